"""AdamW with linear warm-up, cosine decay and global-norm clipping."""

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import optax

from rcca_jax.base import mapping


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Optimizer hyper-parameters; `total_steps` is the length of the schedule."""
  learning_rate: float = 1e-6
  warmup_steps: int = 0
  total_steps: int = 1000
  end_lr_ratio: float = 0.1
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.01
  max_grad_norm: float = 1.0

  def __post_init__(self):
    if self.total_steps < 1 or not 0 <= self.warmup_steps <= self.total_steps:
      raise ValueError(f"need 0 <= warmup_steps ({self.warmup_steps}) <= total_steps "
                       f"({self.total_steps}) and total_steps >= 1")

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


def make_optimizer(config: OptimizerConfig) -> optax.GradientTransformation:
  """Global-norm clipping followed by AdamW on the schedule."""
  return optax.chain(
      optax.clip_by_global_norm(config.max_grad_norm),
      optax.adamw(learning_rate_schedule(config), b1=config.b1, b2=config.b2,
                  eps=config.eps, weight_decay=config.weight_decay,
                  mask=_decay_mask))
