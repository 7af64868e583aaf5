"""A rollout batch applied as one or more optimizer updates (GRPO's μ, TRL's
`num_iterations`).

A rollout batch of B rows is used for `num_iterations` passes; each pass is
`mini_batches` optimizer updates on contiguous slices of B / mini_batches rows (the
rows of one prompt are contiguous, so with `prompts_per_step` divisible by
`mini_batches` every slice holds whole groups). Every update is the same compiled
train step: its loss normaliser is the global (all micro-batches, all devices) count of
its mini-batch, as for a single update. The old log-probs are the sampler's, or, with
`recompute_old_logprobs`, the trainer's own before the first update (same tokens,
trainer numerics), which removes the sampler/trainer mismatch from the ratio.
With one iteration and one mini-batch this is exactly one call of the step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import numpy as np

from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl.batch_check import NonFiniteBatch, numpy_batch

# Statistics also reported per update (as NAME/uK) when there are several updates.
PER_UPDATE = ("loss", "clip_low", "clip_high", "ratio_mean", "ratio_min", "ratio_max",
              "kl", "grad_norm", "clipped")
# Counts summed over one pass (the others are averaged over updates).
_COUNTS = ("response_tokens", "sequences")


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
  """`rl.num_iterations`, `rl.mini_batches`, `rl.recompute_old_logprobs`."""
  num_iterations: int = 1
  mini_batches: int = 1
  recompute_old_logprobs: bool = False

  def __post_init__(self):
    if self.num_iterations < 1 or self.mini_batches < 1:
      raise ValueError(f"num_iterations ({self.num_iterations}) and mini_batches "
                       f"({self.mini_batches}) must be >= 1")

  @property
  def updates_per_batch(self) -> int:
    return self.num_iterations * self.mini_batches


def mini_batch(batch: Mapping[str, np.ndarray], index: int, count: int
               ) -> dict[str, np.ndarray]:
  """Rows [index * B/count, (index + 1) * B/count) of every entry (of a shared-prefix
  batch's G prompts, [index * G/count, ...): those slices' groups)."""
  bad = {k: len(v) for k, v in batch.items() if len(v) % count}
  if bad:
    raise ValueError(f"a batch of {bad} rows does not split into {count} mini-batches")
  return {k: v[index * (len(v) // count):(index + 1) * (len(v) // count)]
          for k, v in batch.items()}


def with_logprobs(batch: Mapping[str, np.ndarray], state: Any, *,
                  reference: Optional[logprobs_lib.Reference] = None,
                  policy_logprobs: Optional[Callable] = None
                  ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
  """`batch` plus `ref_logp` (from `reference`) and, with `policy_logprobs`, old
  log-probs recomputed under `state`; also the mean |sampler - trainer| gap then."""
  batch, extra = dict(batch), {}
  if policy_logprobs is not None:
    old = np.asarray(jax.device_get(
        policy_logprobs(state.params, state.model_state, batch)), np.float32)
    mask = batch["loss_mask"] > 0
    gap = np.abs(np.asarray(batch["old_logp"]) - old)[mask]
    extra["sampler_logprob_gap"] = float(gap.mean()) if gap.size else 0.0
    batch["old_logp"] = old
  if reference is not None:
    batch["ref_logp"] = np.asarray(jax.device_get(reference.logprobs(batch)), np.float32)
  return batch, extra


def run_updates(step: Callable, state: Any, batch: Mapping[str, np.ndarray],
                config: UpdateConfig) -> tuple[Any, list[dict[str, float]]]:
  """`num_iterations` x `mini_batches` calls of `step`; the state after them and each
  update's metrics (fetched once, after the last update is dispatched)."""
  metrics = []
  for _ in range(config.num_iterations):
    for index in range(config.mini_batches):
      state, m = step(state, mini_batch(batch, index, config.mini_batches)
                      if config.mini_batches > 1 else batch)
      metrics.append(m)
  fetched = jax.device_get(metrics)
  return state, [{k: float(v) for k, v in m.items()} for m in fetched]


def update_batch(step: Callable, state: Any, batch: Mapping[str, np.ndarray],
                 config: UpdateConfig, *, keys: Sequence[str],
                 reference: Optional[logprobs_lib.Reference] = None,
                 policy_logprobs: Optional[Callable] = None, signal: bool = True
                 ) -> tuple[Any, list[dict[str, float]], dict[str, float], Optional[str]]:
  """One rollout batch's updates: `with_logprobs`, the batch checked and cut to `keys`
  (`numpy_batch`), `run_updates`. Returns the state, each update's metrics, the extra
  metrics of `with_logprobs`, and None, or, when the policy's own log-probs are not
  finite (`NonFiniteBatch`), its message: no update then, the state's step still
  advanced by `updates_per_batch` and one skipped update reported. Without `signal`
  (no row of the batch has a reward difference to learn from, `rl.flat_groups="drop"`)
  nothing is computed: no update, the step advanced, one update reported as
  `skipped_no_signal`."""
  if not signal:
    state = state.replace(step=state.step + config.updates_per_batch)
    skipped = {"skipped_nonfinite": 0.0, "skipped_no_signal": 1.0, "loss": 0.0}
    return state, [skipped], {}, None
  batch, extra = with_logprobs(batch, state, reference=reference,
                               policy_logprobs=policy_logprobs)
  try:
    batch = numpy_batch(batch, keys)
  except NonFiniteBatch as e:
    state = state.replace(step=state.step + config.updates_per_batch)
    return state, [{"skipped_nonfinite": 1.0, "loss": float("nan")}], extra, str(e)
  state, per_update = run_updates(step, state, batch, config)
  return state, per_update, extra, None


def summarize(updates: Sequence[Mapping[str, float]], num_iterations: int = 1
              ) -> dict[str, float]:
  """One metrics row for a rollout batch: a single update's metrics as they are;
  for several, means over updates (minima/maxima of `*_min`/`*_max`, counts summed
  over one pass), `updates`, and `PER_UPDATE` statistics as NAME/u1, NAME/u2, ..."""
  if len(updates) == 1:
    return dict(updates[0])
  row: dict[str, float] = {"updates": float(len(updates))}
  for name in updates[0]:
    values = np.asarray([u[name] for u in updates], np.float64)
    if name.endswith("_min"):
      row[name] = float(values.min())
    elif name.endswith("_max"):
      row[name] = float(values.max())
    elif name == "skipped_nonfinite":  # updates skipped, over all passes
      row[name] = float(values.sum())
    elif name in _COUNTS:
      row[name] = float(values.sum() / num_iterations)
    else:
      row[name] = float(values.mean())
  for k, u in enumerate(updates, 1):
    for name in PER_UPDATE:
      if name in u:
        row[f"{name}/u{k}"] = u[name]
  return row
