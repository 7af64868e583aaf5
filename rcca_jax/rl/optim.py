"""AdamW or SGD on a linear warm-up + cosine schedule, with optional global-norm clipping."""

import dataclasses
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import optax

from rcca_jax.base import mapping


OPTIMIZERS = ("adamw", "sgd")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Optimizer hyper-parameters; `total_steps` is the length of the schedule.

  `name` "adamw" uses `b1, b2, eps`; "sgd" is plain SGD (heavy-ball `momentum`, 0 =
  none). Both take the same schedule and `weight_decay` on matrices (AdamW's decoupled
  decay; SGD adds `weight_decay * param` to the gradient). `max_grad_norm` 0 (or None)
  disables clipping.
  """
  name: str = "adamw"
  learning_rate: float = 1e-6
  warmup_steps: int = 0
  total_steps: int = 1000
  end_lr_ratio: float = 0.1
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.01
  max_grad_norm: Optional[float] = 1.0
  momentum: float = 0.0

  def __post_init__(self):
    if self.name not in OPTIMIZERS:
      raise ValueError(f"name={self.name!r} is not an optimizer; expected one of "
                       f"{', '.join(OPTIMIZERS)}")
    if self.max_grad_norm is not None and self.max_grad_norm < 0:
      raise ValueError(f"max_grad_norm={self.max_grad_norm} must be >= 0 (0: no clipping)")
    if not 0.0 <= self.momentum < 1.0:
      raise ValueError(f"momentum={self.momentum} must be in [0, 1)")
    if self.momentum and self.name != "sgd":
      raise ValueError(f"momentum={self.momentum} is an SGD field (name={self.name!r} "
                       "uses b1)")
    if self.total_steps < 1 or not 0 <= self.warmup_steps <= self.total_steps:
      raise ValueError(f"need 0 <= warmup_steps ({self.warmup_steps}) <= total_steps "
                       f"({self.total_steps}) and total_steps >= 1")

  @property
  def clips(self) -> bool:
    return bool(self.max_grad_norm)

  @classmethod
  def from_mapping(cls, values: Mapping[str, Any]) -> "OptimizerConfig":
    """Builds a config from a dict / ConfigDict; unknown keys are an error."""
    return cls(**mapping.strict_kwargs(cls, values, "optimizer config keys"))


def learning_rate_schedule(config: OptimizerConfig) -> optax.Schedule:
  """Linear warm-up to the peak (update s uses peak * (s + 1) / warmup_steps), then
  cosine decay to `end_lr_ratio * peak` at `total_steps`, constant after."""
  peak, warmup = config.learning_rate, config.warmup_steps
  decay_steps = max(config.total_steps - warmup, 1)
  end_ratio = config.end_lr_ratio

  def schedule(step):
    step = jnp.asarray(step, jnp.float32)
    warm = peak * (step + 1.0) / max(warmup, 1)
    progress = jnp.clip((step - warmup) / decay_steps, 0.0, 1.0)
    cosine = peak * (end_ratio + (1.0 - end_ratio) * 0.5 *
                     (1.0 + jnp.cos(jnp.pi * progress)))
    return jnp.where(step < warmup, warm, cosine)

  return schedule


def _decay_mask(params: Any) -> Any:
  """Weight decay on matrices only (not on norms, biases or other vectors)."""
  return jax.tree.map(lambda p: p.ndim >= 2, params)


def clip_fired(grad_norm: jax.Array, config: OptimizerConfig) -> jax.Array:
  """1.0 where global-norm clipping scales a gradient of norm `grad_norm` (as
  `optax.clip_by_global_norm` decides: not `norm < max_grad_norm`), else 0.0."""
  if not config.clips:
    return jnp.zeros_like(grad_norm, jnp.float32)
  return jnp.logical_not(grad_norm < config.max_grad_norm).astype(jnp.float32)


def make_optimizer(config: OptimizerConfig) -> optax.GradientTransformation:
  """Global-norm clipping (identity when disabled: same state tree) followed by AdamW
  or SGD on the schedule."""
  clip = (optax.clip_by_global_norm(config.max_grad_norm) if config.clips
          else optax.identity())
  schedule = learning_rate_schedule(config)
  if config.name == "sgd":
    return optax.chain(
        clip, optax.add_decayed_weights(config.weight_decay, mask=_decay_mask),
        optax.sgd(schedule, momentum=config.momentum or None))
  return optax.chain(
      clip, optax.adamw(schedule, b1=config.b1, b2=config.b2, eps=config.eps,
                        weight_decay=config.weight_decay, mask=_decay_mask))
