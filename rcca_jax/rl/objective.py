"""The RL objective in one module: advantages, token weights, the clipped loss, metrics.

docs/method.md#6-asymmetric-effective-weights and #7-objective. The code minimises `-J`:

  J = 1/N sum_i norm_i sum_t [ w_it * min(rho_it A_i, clip(rho_it, 1-eps_lo, 1+eps_hi) A_i)
                               - beta * KL_it ]

- `A_i`: the group-relative advantage of response i (`group_advantages`);
- `w_it`: per-token weights, chosen by the policy loss's name (`TOKEN_WEIGHTS`: `grpo`
  all 1, `rcca` the asymmetric effective weights, `rcca_neg_mean` their magnitude
  control, `weighted` the diagnostic weights `wbar` as they are), then optionally
  kept on each response's highest-entropy tokens only, set to a gradient mass
  (`negative_mass`) or scaled (`negative_scale`) on failed responses and scaled on
  successful ones (`positive_scale`);
- `rho_it = exp(logp - old_logp)`, `KL_it` the k3 estimator against `ref_logp`;
- the aggregation fixes `norm_i` and `N`:
    seq-mean-token-mean: norm_i = 1 / T_i, N = number of non-empty sequences
    token-mean:          norm_i = 1,       N = number of response tokens
    seq-mean-token-sum:  norm_i = 1,       N = number of non-empty sequences

`loss_terms` computes it all, returning the numerator (a plain sum over the rows it
sees) and additive statistics; the train step divides by `loss_denominator` of the
whole (global) batch, so micro-batches and sharding do not change the result. Per-token
arrays are [B, T] with `mask` 1 on response tokens; padding rows add nothing and are not
counted. `LossConfig` holds the hyper-parameters and `PRESETS` the named variants (DAPO,
Dr. GRPO) as data. `PolicyObjective` is what the train step calls (`rl.train_step`); the
SFT objective (`rl.sft.NextTokenObjective`) is the other `Objective`.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol

import jax
import jax.numpy as jnp

from rcca_jax.base import mapping

Array = jax.Array

AGGREGATIONS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")
EQUAL_ATOL = 1e-6  # rewards this close carry no ranking (flat groups: train/flat_groups)
# Log-ratios are clamped to this range before exponentiation (no effect on any sane
# update; it only keeps a stale or corrupt log-prob from overflowing to inf).
_MAX_LOG_RATIO = 20.0
# Token buckets of the weight reported as shares of response tokens.
WEIGHT_BUCKETS = (1.0, 1.2, 1.5, 3.0, 4.0)
_BUCKET_ATOL = 1e-3

RL_KEYS = ("input_ids", "attention_mask", "loss_mask", "old_logp", "advantages",
           "wbar")
# A batch that stores each group's prompt once (`rl.shared_prefix`,
# `batching.prefix_batch`) adds these; its row arrays then hold the responses alone.
PROMPT_KEYS = ("prompt_ids", "prompt_mask")


# ---- configuration -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Hyper-parameters of the RL objective (defaults: docs/method.md#7-objective)."""
  policy_loss: str = "rcca"  # a key of TOKEN_WEIGHTS or POLICY_LOSS_ALIASES
  aggregation: str = "seq-mean-token-mean"
  eps_low: float = 0.2
  eps_high: float = 0.2
  kl_beta: float = 0.0
  scale_advantages_by_std: bool = True
  rcca_c: float = 1.2
  rcca_positive_blamed: float = 1.0
  # Filled from `credit.negative_unblamed` when the job config builds `rl.loss`
  # (train/sections.py); not a field of rl.loss.
  rcca_negative_unblamed: float = 1.0
  # > 0: only each response's ceil(fraction * n) highest-entropy tokens keep their
  # weight, the others get 0 (`top_entropy_tokens`); 0: off.
  entropy_top_fraction: float = 0.0
  # Every token weight of a negative-advantage response times this constant (1: off):
  # the model-free magnitude control (docs/method.md#7-objective).
  negative_scale: float = 1.0
  # Every token weight of a positive-advantage response times this constant (1: off;
  # 0.1: W-REINFORCE's down-weighted positive updates, 0: negative samples only).
  positive_scale: float = 1.0
  # > 0: each negative-advantage response's weights rescaled so that its gradient mass
  # sum_t w_t (1 - p_t) is this times GRPO's, sum_t (1 - p_t) (`negative_mass_weights`;
  # 0: off). Arms that differ only in where they put their weight then carry the same
  # mass per failed response.
  negative_mass: float = 0.0

  def __post_init__(self):
    policy_loss_name(self.policy_loss)
    _check_aggregation(self.aggregation)
    if not 0.0 <= self.entropy_top_fraction <= 1.0:
      raise ValueError(f"entropy_top_fraction={self.entropy_top_fraction} must lie in "
                       "[0, 1] (0: off)")
    if not self.negative_scale >= 0.0:
      raise ValueError(f"negative_scale={self.negative_scale} must be >= 0 (1: off)")
    if not self.positive_scale >= 0.0:
      raise ValueError(f"positive_scale={self.positive_scale} must be >= 0 (1: off)")
    if not self.negative_mass >= 0.0:
      raise ValueError(f"negative_mass={self.negative_mass} must be >= 0 (0: off)")
    if self.negative_mass and self.negative_scale != 1.0:
      raise ValueError(f"negative_mass={self.negative_mass} sets the failed responses' "
                       f"magnitude itself: leave negative_scale at 1.0, not "
                       f"{self.negative_scale}")

  @classmethod
  def from_mapping(cls, values: Mapping[str, Any]) -> "LossConfig":
    """Builds a config from a dict / ConfigDict; unknown keys are an error."""
    return cls(**mapping.strict_kwargs(cls, values, "loss config keys"))


# Named variants: LossConfig fields that differ from the defaults.
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
# Former policy-loss names, still accepted (configs and committed results name them).
POLICY_LOSS_ALIASES: dict[str, str] = {"grpo_neg_scaled": "rcca_neg_mean"}


def preset(name: str, **overrides: Any) -> LossConfig:
  """The `LossConfig` of preset `name`, with `overrides` applied."""
  if name not in PRESETS:
    raise ValueError(f"unknown loss preset {name!r}; known: {sorted(PRESETS)}")
  return LossConfig.from_mapping({**PRESETS[name], **overrides})


def policy_loss_name(name: str) -> str:
  """The key of `TOKEN_WEIGHTS` that `name` or its former name stands for."""
  name = POLICY_LOSS_ALIASES.get(name, name)
  if name not in TOKEN_WEIGHTS:
    raise ValueError(f"unknown policy loss {name!r}; known: {sorted(TOKEN_WEIGHTS)}")
  return name


def _check_aggregation(aggregation: str) -> None:
  if aggregation not in AGGREGATIONS:
    raise ValueError(
        f"unknown aggregation {aggregation!r}; expected one of {AGGREGATIONS}")


# ---- advantages --------------------------------------------------------------------

def group_advantages(rewards: Array, group_size: int, eps: float = 1e-6, *,
                     scale_by_std: bool = True, equal_atol: float = EQUAL_ATOL) -> Array:
  """`(r_i - mean_g r) / (std_g r + eps)` (population std) over consecutive groups of
  `group_size` rewards ([B], any float dtype, computed in float32); float32 [B].

  A group whose rewards all lie within `equal_atol` of each other carries no ranking
  and gets exact zeros: the float rounding of its mean would otherwise push every
  member the same way (eight rewards of 0.7 in float32 give +0.056 each).
  `scale_by_std=False` gives Dr. GRPO's mean-centred advantage.
  """
  rewards = jnp.asarray(rewards).astype(jnp.float32)
  if rewards.ndim != 1:
    raise ValueError(f"rewards must be 1-D, got shape {rewards.shape}")
  if group_size < 1 or rewards.shape[0] % group_size:
    raise ValueError(
        f"group_size {group_size} does not divide the batch of {rewards.shape[0]}")
  grouped = rewards.reshape(-1, group_size)
  spread = grouped.max(axis=-1, keepdims=True) - grouped.min(axis=-1, keepdims=True)
  centred = grouped - grouped.mean(axis=-1, keepdims=True)
  if scale_by_std:
    centred = centred / (grouped.std(axis=-1, keepdims=True) + eps)
  return jnp.where(spread <= equal_atol, 0.0, centred).reshape(-1)


def zero_advantage_group_fraction(advantages: Array, group_size: int,
                                  atol: float = 1e-8) -> Array:
  """Fraction of groups in which every advantage is (numerically) zero."""
  grouped = jnp.abs(advantages.reshape(-1, group_size))
  return jnp.mean(jnp.all(grouped <= atol, axis=-1).astype(jnp.float32))


# ---- token weights -----------------------------------------------------------------

def effective_weights(wbar: Array, advantages: Array, *, c: float = 1.2,
                      positive_blamed: float = 1.0,
                      negative_unblamed: float = 1.0) -> Array:
  """RCCA's asymmetric weights [B, T] (dtype of `wbar`) from the diagnostic weights
  `wbar` [B, T] (1 on untouched tokens, > 1 on blamed ones) and advantages [B].

  A negative-advantage response keeps `wbar` on blamed tokens (the update concentrates
  on blamed code) and gives the others `negative_unblamed * wbar` (1.0: the paper's
  rule; 0: the negative update only on blamed code); any other response gives blamed
  tokens `positive_blamed` and the rest `c`.
  """
  wbar = jnp.asarray(wbar)
  if wbar.ndim != 2 or jnp.ndim(advantages) != 1:
    raise ValueError(f"expected wbar [B, T] and advantages [B], got "
                     f"{wbar.shape} and {jnp.shape(advantages)}")
  positive = jnp.where(wbar > 1.0, positive_blamed, c).astype(wbar.dtype)
  negative = jnp.where(wbar > 1.0, wbar, (negative_unblamed * wbar).astype(wbar.dtype))
  return jnp.where(jnp.asarray(advantages)[:, None] < 0, negative, positive)


def negative_mean_weights(wbar: Array, advantages: Array, mask: Array, *,
                          c: float = 1.2, positive_blamed: float = 1.0,
                          negative_unblamed: float = 1.0) -> Array:
  """`effective_weights` (same keywords) with each negative-advantage response's
  weight spread evenly over its response tokens (`mask`): the magnitude of RCCA's
  negative update without its location.

  Such a response gets `f_i = sum_t m_it e_it / sum_t m_it` on every token, so its
  total is RCCA's (0 under focus when nothing of it is blamed); the others keep `e`.
  """
  wbar = jnp.asarray(wbar)
  effective = effective_weights(wbar, advantages, c=c, positive_blamed=positive_blamed,
                                negative_unblamed=negative_unblamed)
  mask = jnp.asarray(mask).astype(wbar.dtype)
  factor = jnp.sum(effective * mask, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)
  negative = jnp.asarray(advantages)[:, None] < 0
  return jnp.where(negative, factor[:, None], effective).astype(wbar.dtype)


def top_entropy_tokens(entropy: Array, mask: Array, fraction: float) -> Array:
  """[B, T] float32, 1 on each row's `k = ceil(fraction * n)` highest-entropy response
  tokens (n: its response tokens), 0 elsewhere ("Beyond the 80/20 rule", arXiv
  2506.01939, per response).

  Equal entropies rank by position, the earlier first; `k` is computed as
  `ceil(fraction * n * (1 - 1e-6))`, so a product that is an integer up to float
  rounding (0.2 * 35) is not rounded up, and a row with n >= 1 keeps at least one
  token. The entropy is a constant here (no gradient flows through the selection).
  """
  valid = mask > 0
  key = jnp.where(valid, jax.lax.stop_gradient(entropy).astype(jnp.float32), -jnp.inf)
  order = jnp.argsort(key, axis=-1, stable=True, descending=True)
  ranks = jnp.argsort(order, axis=-1)
  k = jnp.ceil(fraction * jnp.sum(valid, axis=-1) * (1.0 - 1e-6))
  return (valid & (ranks < k[:, None])).astype(jnp.float32)


def negative_mass_weights(weights: Array, advantages: Array, mask: Array, logp: Array,
                          mass: float) -> Array:
  """`weights` [B, T] with each negative-advantage response's row rescaled so that its
  gradient mass `sum_t m_t w_t (1 - p_t)` equals `mass * sum_t m_t (1 - p_t)` (GRPO's
  mass times `mass`); `p_t = exp(logp_t)`, the policy's probability of the sampled
  token (`1 - p_t` is the size of `d log p_t / d logit` at that token). The factor is
  a constant (no gradient through `p`); a row of zero mass stays zero (focus with
  nothing blamed). Other rows keep their weights."""
  weights = jnp.asarray(weights)
  mask = jnp.asarray(mask).astype(jnp.float32)
  slack = mask * (1.0 - jnp.exp(jax.lax.stop_gradient(logp).astype(jnp.float32)))
  have = jnp.sum(slack * weights.astype(jnp.float32), axis=-1)
  want = mass * jnp.sum(slack, axis=-1)
  factor = jnp.where(have > 0, want / jnp.where(have > 0, have, 1.0), 0.0)
  negative = jnp.asarray(advantages)[:, None] < 0
  return jnp.where(negative, factor[:, None] * weights, weights).astype(weights.dtype)


def _rcca(config: LossConfig) -> dict[str, float]:
  return dict(c=config.rcca_c, positive_blamed=config.rcca_positive_blamed,
              negative_unblamed=config.rcca_negative_unblamed)


# Each policy loss's token weights: (wbar, advantages, mask, config) -> [B, T].
TOKEN_WEIGHTS: dict[str, Callable[[Array, Array, Array, LossConfig], Array]] = {
    "grpo": lambda wbar, advantages, mask, config: jnp.ones_like(wbar),
    "rcca": lambda wbar, advantages, mask, config: effective_weights(
        wbar, advantages, **_rcca(config)),
    "rcca_neg_mean": lambda wbar, advantages, mask, config: negative_mean_weights(
        wbar, advantages, mask, **_rcca(config)),
    # A tool: e.g. the part of the GRPO gradient that some tokens give, with `wbar`
    # their 0/1 indicator (benchmarks/credit_mechanism.py).
    "weighted": lambda wbar, advantages, mask, config: wbar,
}


# ---- the loss ----------------------------------------------------------------------

def loss_terms(logp: Array, old_logp: Array, advantages: Array, wbar: Array,
               mask: Array, config: LossConfig, *, ref_logp: Optional[Array] = None,
               entropy: Optional[Array] = None) -> tuple[Array, dict]:
  """The loss numerator of one (micro-)batch and its additive statistics.

  Args:
    logp, old_logp: [B, T] log-probs of the sampled tokens under the policy and the
      sampler.
    advantages: [B]. wbar: [B, T] diagnostic weights. mask: [B, T] response tokens.
    config: the objective; `config.policy_loss` picks the token weights.
    ref_logp: [B, T] reference log-probs; adds the KL term (times `kl_beta`).
    entropy: [B, T] the policy's per-token entropy (`entropy_top_fraction > 0` only).

  Returns:
    `(numerator, stats)`: the loss is `numerator / loss_denominator(global mask)`;
    `stats` merge with `merge_stats` and become metrics with `finalize_stats`.
  """
  # Token weights: the policy loss's rule, then its optional modifiers.
  token_weights = TOKEN_WEIGHTS[policy_loss_name(config.policy_loss)]
  weights = token_weights(wbar, advantages, mask, config)
  if config.entropy_top_fraction:
    if entropy is None:
      raise ValueError("entropy_top_fraction > 0 needs the per-token entropy")
    weights = weights * top_entropy_tokens(entropy, mask, config.entropy_top_fraction)
  if config.negative_mass:
    weights = negative_mass_weights(weights, advantages, mask, logp, config.negative_mass)
  if config.negative_scale != 1.0:
    negative = jnp.asarray(advantages)[:, None] < 0
    weights = jnp.where(negative, config.negative_scale * weights, weights)
  if config.positive_scale != 1.0:
    positive = jnp.asarray(advantages)[:, None] > 0
    weights = jnp.where(positive, config.positive_scale * weights, weights)
  # The clipped importance ratio and the pessimistic surrogate, weighted per token.
  mask = mask.astype(jnp.float32)
  valid = mask > 0
  advantages = advantages.astype(jnp.float32)[:, None]
  log_ratio = jnp.where(valid, logp - old_logp, 0.0)
  ratio = jnp.exp(jnp.clip(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
  clipped = jnp.clip(ratio, 1.0 - config.eps_low, 1.0 + config.eps_high)
  surrogate = jnp.minimum(ratio * advantages, clipped * advantages)
  per_token = -weights * surrogate
  # The KL penalty to the reference policy (k3 estimator, >= 0), unweighted.
  token_sums = {}
  if ref_logp is not None:
    ref_log_ratio = jnp.where(valid, ref_logp - logp, 0.0)
    ref_log_ratio = jnp.clip(ref_log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    kl = jnp.exp(ref_log_ratio) - ref_log_ratio - 1.0
    per_token = per_token + config.kl_beta * kl
    token_sums["kl"] = jnp.sum(kl * mask)
  # Reduce: the aggregation's numerator (the step divides by the global denominator).
  numerator = aggregate_numerator(per_token, mask, config.aggregation)
  return numerator, _stats(token_sums, mask, valid, advantages, ratio, logp, old_logp,
                           weights, config)


def loss_denominator(mask: Array, aggregation: str) -> Array:
  """Global normaliser N of `aggregation`, computed once on the whole batch.

  At least 1, so a batch without response tokens yields a zero loss, not NaN.
  """
  _check_aggregation(aggregation)
  mask = mask.astype(jnp.float32)
  if aggregation == "token-mean":
    count = jnp.sum(mask)
  else:
    count = jnp.sum((jnp.sum(mask, axis=-1) > 0).astype(jnp.float32))
  return jnp.maximum(count, 1.0)


def aggregate_numerator(per_token: Array, mask: Array, aggregation: str) -> Array:
  """The numerator of `aggregation`: a sum over sequences (additive over rows)."""
  _check_aggregation(aggregation)
  mask = mask.astype(jnp.float32)
  token_sums = jnp.sum(jnp.where(mask > 0, per_token, 0.0) * mask, axis=-1)
  if aggregation == "seq-mean-token-mean":
    token_sums = token_sums / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)
  return jnp.sum(token_sums)


def policy_loss(
    logp: Array, old_logp: Array, advantages: Array, weights: Array, mask: Array, *,
    eps_low: float = 0.2, eps_high: float = 0.2,
    aggregation: str = "seq-mean-token-mean", ref_logp: Optional[Array] = None,
    kl_beta: float = 0.0,
    denominator: Optional[Array] = None) -> tuple[Array, Mapping[str, Array]]:
  """`(loss, metrics)` with given token `weights` ([B, T] or a broadcastable scalar;
  1 gives plain GRPO), divided by `denominator` (default: this batch's own)."""
  config = LossConfig(policy_loss="weighted", aggregation=aggregation, eps_low=eps_low,
                      eps_high=eps_high, kl_beta=kl_beta)
  weights = jnp.broadcast_to(jnp.asarray(weights, jnp.float32), logp.shape)
  numerator, stats = loss_terms(logp, old_logp, advantages, weights, mask, config,
                                ref_logp=ref_logp)
  if denominator is None:
    denominator = loss_denominator(mask, aggregation)
  return numerator / denominator, finalize_stats(stats)


# ---- statistics --------------------------------------------------------------------

def _stats(token_sums: dict, mask: Array, valid: Array, advantages: Array, ratio: Array,
           logp: Array, old_logp: Array, weights: Array, config: LossConfig) -> dict:
  """`loss_terms`' statistics, none of them differentiated: per response token the
  clip rates, ratio, log-prob gap and weight moments and buckets, and over the tokens
  of negative-advantage responses `negative_token_share` and `negative_weight_sum`
  (their weights' sum; its ratio to the share is their mean)."""
  no_grad = jax.lax.stop_gradient
  ratio_ng, logp_ng = no_grad(ratio), no_grad(logp)
  weights_ng = no_grad(weights)
  negative = (advantages < 0).astype(jnp.float32)
  seq_valid = (jnp.sum(mask, axis=-1) > 0).astype(jnp.float32)
  token_sums.update(
      clip_low=jnp.sum(mask * ((ratio_ng < 1.0 - config.eps_low) & (advantages < 0))),
      clip_high=jnp.sum(mask * ((ratio_ng > 1.0 + config.eps_high) & (advantages > 0))),
      ratio_mean=jnp.sum(mask * ratio_ng),
      logprob_gap=jnp.sum(mask * jnp.abs(jnp.where(valid, old_logp - logp_ng, 0.0))),
      weight_mean=jnp.sum(mask * weights_ng),
      weight_sq_mean=jnp.sum(mask * weights_ng**2),
      zero_weight_share=jnp.sum(mask * (weights_ng == 0.0)),
      negative_token_share=jnp.sum(mask * negative),
      negative_weight_sum=jnp.sum(mask * negative * weights_ng))
  in_bucket = jnp.zeros_like(mask)
  for bucket in WEIGHT_BUCKETS:
    hit = (jnp.abs(weights_ng - bucket) <= _BUCKET_ATOL).astype(jnp.float32)
    token_sums[f"weight_share_{bucket:.1f}"] = jnp.sum(mask * hit)
    in_bucket = jnp.maximum(in_bucket, hit)
  token_sums["weight_share_other"] = jnp.sum(mask * (1.0 - in_bucket))
  return {
      "tokens": jnp.sum(mask),
      "sequences": jnp.sum(seq_valid),
      "token_sums": token_sums,
      "seq_sums": {"abs_advantage": jnp.sum(seq_valid * jnp.abs(advantages[:, 0]))},
      "mins": {"ratio_min": jnp.min(jnp.where(valid, ratio_ng, jnp.inf))},
      "maxs": {"ratio_max": jnp.max(jnp.where(valid, ratio_ng, -jnp.inf))},
  }


def merge_stats(a: dict, b: dict) -> dict:
  """Combines the statistics of two disjoint micro-batches."""
  merged = {}
  for key in a:
    if key == "mins":
      merged[key] = jax.tree.map(jnp.minimum, a[key], b[key])
    elif key == "maxs":
      merged[key] = jax.tree.map(jnp.maximum, a[key], b[key])
    else:
      merged[key] = jax.tree.map(jnp.add, a[key], b[key])
  return merged


def finalize_stats(stats: dict) -> dict[str, Array]:
  """Means over response tokens / non-empty sequences; 0 when there are none."""
  tokens, sequences = stats["tokens"], stats["sequences"]
  has_tokens = tokens > 0
  metrics = {"response_tokens": tokens, "sequences": sequences}
  for name, total in stats["token_sums"].items():
    metrics[name] = total / jnp.maximum(tokens, 1.0)
  for name, total in stats["seq_sums"].items():
    metrics[name] = total / jnp.maximum(sequences, 1.0)
  for name, value in {**stats["mins"], **stats["maxs"]}.items():
    metrics[name] = jnp.where(has_tokens, value, 0.0)
  return metrics


# ---- what the train step optimises -------------------------------------------------

class Objective(Protocol):
  """What a train step optimises: the batch entries it reads (`keys`), a loss as
  (numerator, global denominator), and batch-level metrics."""

  keys: tuple[str, ...]

  def denominator(self, batch: Mapping[str, Array]) -> Array:
    ...

  def terms(self, logp: Array, entropy: Array,
            batch: Mapping[str, Array]) -> tuple[Array, dict]:
    ...

  def batch_metrics(self, batch: Mapping[str, Array]) -> dict[str, Array]:
    ...


@dataclasses.dataclass(frozen=True)
class PolicyObjective:
  """The RL objective of `loss` on an RL batch (layout: `rl.train_step`; with
  `shared_prefix`, each group's prompt stored once)."""
  loss: LossConfig
  group_size: int
  shared_prefix: bool = False

  @property
  def keys(self) -> tuple[str, ...]:
    return (RL_KEYS + (("ref_logp",) if self.loss.kl_beta else ())
            + (PROMPT_KEYS if self.shared_prefix else ()))

  def denominator(self, batch):
    return loss_denominator(batch["loss_mask"], self.loss.aggregation)

  def terms(self, logp, entropy, batch):
    numerator, stats = loss_terms(
        logp, batch["old_logp"], batch["advantages"], batch["wbar"], batch["loss_mask"],
        self.loss, ref_logp=batch.get("ref_logp"), entropy=entropy)
    stats["token_sums"]["entropy"] = jnp.sum(entropy * batch["loss_mask"])
    return numerator, stats

  def batch_metrics(self, batch):
    return {"zero_advantage_groups": zero_advantage_group_fraction(
        batch["advantages"], self.group_size)}
