"""Policy losses selected by name, and config presets for the common variants.

A policy loss maps `(logp, old_logp, advantages, wbar, mask, ref_logp, config,
entropy=None)` to the loss numerator and additive statistics (see
`grpo.policy_loss_terms`); the train step divides by the global normaliser. `grpo`
ignores the diagnostic weights `wbar` (every token has weight 1); `rcca` turns them
into the effective weights of docs/method.md#6-asymmetric-effective-weights;
`rcca_neg_mean` is `rcca` with every token of a negative-advantage response at that
response's mean `rcca` weight (`rcca.negative_mean_weights`; `grpo_neg_scaled`, its former
name, is an alias: `POLICY_LOSS_ALIASES`); `weighted` uses `wbar` as it is (diagnostics,
`benchmarks/credit_mechanism.py`). `LossConfig.entropy_top_fraction > 0` keeps, in any
of them, only each response's highest-entropy tokens (`grpo.top_entropy_tokens`; the
per-token `entropy` is then required); `LossConfig.negative_scale` multiplies, in any of
them, every weight of a negative-advantage response by one constant (no blame needed). Variants (DAPO, Dr. GRPO) are presets of
`LossConfig`, not code branches.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp

from rcca_jax.base import mapping
from rcca_jax.rl import grpo
from rcca_jax.rl import rcca


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Hyper-parameters of the RL objective (defaults: docs/method.md#7-objective)."""
  policy_loss: str = "rcca"
  aggregation: str = "seq-mean-token-mean"
  eps_low: float = 0.2
  eps_high: float = 0.2
  kl_beta: float = 0.0
  scale_advantages_by_std: bool = True
  rcca_c: float = 1.2
  rcca_positive_blamed: float = 1.0
  # Filled from `credit.negative_unblamed` (train/sections.loss_config), not rl.loss.
  rcca_negative_unblamed: float = 1.0
  # > 0: only each response's ceil(fraction * n) highest-entropy tokens keep their
  # weight, the others get 0 (grpo.top_entropy_tokens); 0: off.
  entropy_top_fraction: float = 0.0
  # Every token weight of a negative-advantage response times this constant (1: off):
  # the model-free magnitude control (docs/method.md#7-objective).
  negative_scale: float = 1.0

  def __post_init__(self):
    get_policy_loss(self.policy_loss)
    if self.aggregation not in grpo.AGGREGATIONS:
      raise ValueError(f"unknown aggregation {self.aggregation!r}; expected one of "
                       f"{grpo.AGGREGATIONS}")
    if not 0.0 <= self.entropy_top_fraction <= 1.0:
      raise ValueError(f"entropy_top_fraction={self.entropy_top_fraction} must lie in "
                       "[0, 1] (0: off)")
    if not self.negative_scale >= 0.0:
      raise ValueError(f"negative_scale={self.negative_scale} must be >= 0 (1: off)")

  @classmethod
  def from_mapping(cls, values: Mapping[str, Any]) -> "LossConfig":
    """Builds a config from a dict / ConfigDict; unknown keys are an error."""
    return cls(**mapping.strict_kwargs(cls, values, "loss config keys"))


PolicyLossFn = Callable[..., tuple[jax.Array, dict]]
_POLICY_LOSSES: dict[str, PolicyLossFn] = {}
# Former names of registered losses, still accepted (configs and committed results
# name them): alias -> name.
POLICY_LOSS_ALIASES: dict[str, str] = {"grpo_neg_scaled": "rcca_neg_mean"}


def register_policy_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
  """Decorator adding a policy loss to the registry under `name`."""
  def register(fn: PolicyLossFn) -> PolicyLossFn:
    if name in _POLICY_LOSSES:
      raise ValueError(f"policy loss {name!r} is already registered")
    _POLICY_LOSSES[name] = fn
    return fn
  return register


def get_policy_loss(name: str) -> PolicyLossFn:
  """The policy loss registered as `name` or as the name it is an alias of."""
  name = POLICY_LOSS_ALIASES.get(name, name)
  if name not in _POLICY_LOSSES:
    raise ValueError(
        f"unknown policy loss {name!r}; registered: {sorted(_POLICY_LOSSES)}")
  return _POLICY_LOSSES[name]


def _clipped_terms(logp, old_logp, advantages, weights, mask, ref_logp,
                   config: LossConfig, entropy: Optional[jax.Array]):
  if config.entropy_top_fraction:
    if entropy is None:
      raise ValueError("entropy_top_fraction > 0 needs the per-token entropy")
    weights = weights * grpo.top_entropy_tokens(entropy, mask,
                                                config.entropy_top_fraction)
  if config.negative_scale != 1.0:
    negative = jnp.asarray(advantages)[:, None] < 0
    weights = jnp.where(negative, config.negative_scale * weights, weights)
  return grpo.policy_loss_terms(
      logp, old_logp, advantages, weights, mask, eps_low=config.eps_low,
      eps_high=config.eps_high, aggregation=config.aggregation, ref_logp=ref_logp,
      kl_beta=config.kl_beta)


def _rcca_keywords(config: LossConfig) -> dict[str, float]:
  return dict(c=config.rcca_c, positive_blamed=config.rcca_positive_blamed,
              negative_unblamed=config.rcca_negative_unblamed)


@register_policy_loss("grpo")
def grpo_loss(logp, old_logp, advantages, wbar, mask,
              ref_logp: Optional[jax.Array], config: LossConfig,
              entropy: Optional[jax.Array] = None):
  """Plain GRPO: every token has weight 1 (`wbar` is ignored)."""
  del wbar
  return _clipped_terms(logp, old_logp, advantages, jnp.ones_like(logp), mask,
                        ref_logp, config, entropy)


@register_policy_loss("rcca")
def rcca_loss(logp, old_logp, advantages, wbar, mask,
              ref_logp: Optional[jax.Array], config: LossConfig,
              entropy: Optional[jax.Array] = None):
  """GRPO with RCCA's asymmetric effective weights inside the clipped term."""
  weights = rcca.effective_weights(wbar, advantages, **_rcca_keywords(config))
  return _clipped_terms(logp, old_logp, advantages, weights, mask, ref_logp, config,
                        entropy)


@register_policy_loss("rcca_neg_mean")
def rcca_neg_mean_loss(logp, old_logp, advantages, wbar, mask,
                       ref_logp: Optional[jax.Array], config: LossConfig,
                       entropy: Optional[jax.Array] = None):
  """`rcca`'s weights with every token of a negative-advantage response at that
  response's mean weight (one factor per response, its total kept); the magnitude
  control of focus."""
  weights = rcca.negative_mean_weights(wbar, advantages, mask, **_rcca_keywords(config))
  return _clipped_terms(logp, old_logp, advantages, weights, mask, ref_logp, config,
                        entropy)


@register_policy_loss("weighted")
def weighted_loss(logp, old_logp, advantages, wbar, mask,
                  ref_logp: Optional[jax.Array], config: LossConfig,
                  entropy: Optional[jax.Array] = None):
  """The clipped term with `wbar` itself as the token weights (a tool: e.g. the part of
  the GRPO gradient that some tokens give, with `wbar` their 0/1 indicator)."""
  return _clipped_terms(logp, old_logp, advantages, wbar, mask, ref_logp, config,
                        entropy)


PRESETS: dict[str, dict[str, Any]] = {
    "grpo": dict(policy_loss="grpo"),
    "rcca": dict(policy_loss="rcca"),
    # DAPO: token-level normalisation and a wider upper clip ("clip-higher").
    "dapo": dict(policy_loss="grpo", aggregation="token-mean", eps_high=0.28),
    "rcca_dapo": dict(policy_loss="rcca", aggregation="token-mean", eps_high=0.28),
    # Dr. GRPO: no std scaling of advantages, no per-sequence length normalisation.
    "dr_grpo": dict(policy_loss="grpo", aggregation="seq-mean-token-sum",
                    scale_advantages_by_std=False),
}


def preset(name: str, **overrides: Any) -> LossConfig:
  """The `LossConfig` of preset `name`, with `overrides` applied."""
  if name not in PRESETS:
    raise ValueError(f"unknown loss preset {name!r}; known: {sorted(PRESETS)}")
  return LossConfig.from_mapping({**PRESETS[name], **overrides})
