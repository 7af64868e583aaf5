"""GRPO: group-relative advantages and the clipped, weighted policy loss.

docs/method.md#7-objective. The loss is `-J` with

  J = 1/N sum_i norm_i sum_t w_it * min(rho_it A_i, clip(rho_it, 1-eps_lo, 1+eps_hi) A_i)
      - beta * KL,

where the aggregation fixes `norm_i` and `N`:

  seq-mean-token-mean: norm_i = 1 / T_i, N = number of non-empty sequences
  token-mean:          norm_i = 1,       N = number of response tokens
  seq-mean-token-sum:  norm_i = 1,       N = number of non-empty sequences

Every aggregation is computed as a (numerator, denominator) pair: the numerator is a
plain sum over the sequences of a micro-batch, and the denominator comes from the whole
(global) batch, so gradient accumulation and data parallelism do not change the result.

Per-token arrays are [B, T] with `mask` 1 on response tokens; padding rows (mask all
zero) contribute nothing and are not counted as sequences.
"""

from typing import Mapping, Optional

import jax
import jax.numpy as jnp

Array = jax.Array

AGGREGATIONS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")

# Token buckets of the effective weight reported as shares of response tokens.
WEIGHT_BUCKETS = (1.0, 1.2, 1.5, 3.0, 4.0)
_BUCKET_ATOL = 1e-3

# Log-ratios are clamped to this range before exponentiation (no effect on any sane
# update; it only keeps a stale or corrupt log-prob from overflowing to inf).
_MAX_LOG_RATIO = 20.0


EQUAL_ATOL = 1e-6  # rewards this close carry no ranking (flat groups: train/flat_groups)


def group_advantages(rewards: Array, group_size: int, eps: float = 1e-6, *,
                     scale_by_std: bool = True, equal_atol: float = EQUAL_ATOL) -> Array:
  """`(r_i - mean_g r) / (std_g r + eps)` for consecutive groups of `group_size`.

  A group whose rewards all lie within `equal_atol` of each other carries no ranking,
  so its advantages are exactly 0 (docs/method.md#7-objective): the float rounding of its
  mean would
  otherwise push every member the same way (e.g. eight rewards of 0.7 in float32 give
  +0.056 each after the division by `std + eps`).

  Args:
    rewards: [B] rewards, the responses of one prompt contiguous (any float dtype;
      computed in float32).
    group_size: responses per prompt; must divide B.
    eps: added to the (population) standard deviation.
    scale_by_std: divide by the standard deviation (False gives Dr. GRPO's
      mean-centred advantage).
    equal_atol: groups with `max - min <= equal_atol` are degenerate.

  Returns:
    [B] float32 advantages; a degenerate group gets exact zeros.
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


def _check_aggregation(aggregation: str) -> None:
  if aggregation not in AGGREGATIONS:
    raise ValueError(
        f"unknown aggregation {aggregation!r}; expected one of {AGGREGATIONS}")


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


def policy_loss_terms(
    logp: Array, old_logp: Array, advantages: Array, weights: Array, mask: Array, *,
    eps_low: float = 0.2, eps_high: float = 0.2,
    aggregation: str = "seq-mean-token-mean", ref_logp: Optional[Array] = None,
    kl_beta: float = 0.0) -> tuple[Array, dict]:
  """Loss numerator and additive statistics of one (micro-)batch.

  Returns:
    `(numerator, stats)`: the loss is `numerator / loss_denominator(global mask)`;
    `stats` merge across micro-batches with `merge_stats` and turn into metrics with
    `finalize_stats`. Per response token, of the weights: `weight_mean`,
    `weight_sq_mean`, `zero_weight_share`, the `weight_share_*` buckets, and over the
    tokens of negative-advantage responses `negative_token_share` and
    `negative_weight_sum` (their weights' sum; its ratio to the share is their mean).
  """
  mask = mask.astype(jnp.float32)
  valid = mask > 0
  advantages = advantages.astype(jnp.float32)[:, None]
  log_ratio = jnp.where(valid, logp - old_logp, 0.0)
  ratio = jnp.exp(jnp.clip(log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO))
  clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
  surrogate = jnp.minimum(ratio * advantages, clipped * advantages)
  per_token = -weights * surrogate
  token_sums = {}
  if ref_logp is not None:
    ref_log_ratio = jnp.where(valid, ref_logp - logp, 0.0)
    ref_log_ratio = jnp.clip(ref_log_ratio, -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    kl = jnp.exp(ref_log_ratio) - ref_log_ratio - 1.0  # k3 estimator, >= 0.
    per_token = per_token + kl_beta * kl
    token_sums["kl"] = jnp.sum(kl * mask)
  numerator = aggregate_numerator(per_token, mask, aggregation)

  no_grad = jax.lax.stop_gradient
  ratio_ng, logp_ng = no_grad(ratio), no_grad(logp)
  weights_ng = no_grad(weights)
  negative = (advantages < 0).astype(jnp.float32)
  seq_valid = (jnp.sum(mask, axis=-1) > 0).astype(jnp.float32)
  token_sums.update(
      clip_low=jnp.sum(mask * ((ratio_ng < 1.0 - eps_low) & (advantages < 0))),
      clip_high=jnp.sum(mask * ((ratio_ng > 1.0 + eps_high) & (advantages > 0))),
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
  stats = {
      "tokens": jnp.sum(mask),
      "sequences": jnp.sum(seq_valid),
      "token_sums": token_sums,
      "seq_sums": {"abs_advantage": jnp.sum(seq_valid * jnp.abs(advantages[:, 0]))},
      "mins": {"ratio_min": jnp.min(jnp.where(valid, ratio_ng, jnp.inf))},
      "maxs": {"ratio_max": jnp.max(jnp.where(valid, ratio_ng, -jnp.inf))},
  }
  return numerator, stats


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


def policy_loss(
    logp: Array, old_logp: Array, advantages: Array, weights: Array, mask: Array, *,
    eps_low: float = 0.2, eps_high: float = 0.2,
    aggregation: str = "seq-mean-token-mean", ref_logp: Optional[Array] = None,
    kl_beta: float = 0.0,
    denominator: Optional[Array] = None) -> tuple[Array, Mapping[str, Array]]:
  """Clipped, token-weighted GRPO loss (`weights = 1` gives plain GRPO).

  Args:
    logp: [B, T] log-probabilities of the response tokens under the policy.
    old_logp: [B, T] log-probabilities under the sampling policy.
    advantages: [B] per-response advantages.
    weights: [B, T] per-token weights (or a broadcastable scalar).
    mask: [B, T] 1 on response tokens, 0 elsewhere.
    eps_low: lower clip range, ratio >= 1 - eps_low.
    eps_high: upper clip range, ratio <= 1 + eps_high.
    aggregation: one of `AGGREGATIONS`.
    ref_logp: [B, T] reference-policy log-probabilities for the KL penalty.
    kl_beta: KL coefficient (k3 estimator); used only with `ref_logp`.
    denominator: the global normaliser (`loss_denominator` of the whole batch) when
      this call sees only a micro-batch or a shard; defaults to this batch's own.

  Returns:
    `(loss, metrics)`.
  """
  weights = jnp.broadcast_to(jnp.asarray(weights, jnp.float32), logp.shape)
  numerator, stats = policy_loss_terms(
      logp, old_logp, advantages, weights, mask, eps_low=eps_low, eps_high=eps_high,
      aggregation=aggregation, ref_logp=ref_logp, kl_beta=kl_beta)
  if denominator is None:
    denominator = loss_denominator(mask, aggregation)
  return numerator / denominator, finalize_stats(stats)
