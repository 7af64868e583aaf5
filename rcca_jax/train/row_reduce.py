"""One RL metrics row from every process's row over its own rollouts (pure).

Each process logs a row over its share of the step's rollouts; the job's row combines
them. Counters (`SUMMED`) add up; `reward_mean` is a mean over the rollouts that got a
reward, so it is weighted by each share's `count - unscorable - no_reward`, the gate and
pass rates by `count - unscorable`; every other number is a
per-rollout mean weighted by `count` (the train step's metrics are already global, equal
in every share, and come out unchanged). Non-numbers are taken from the first share.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

# Counters over rollouts or grading calls: summed over the shares.
SUMMED = ("no_reward", "timeouts", "cache_hits", "cache_write_errors", "unscorable",
          "grading_failed", "ungraded_rubrics", "worker_deaths")
# Means over the scorable records only (`rollouts.record_stats`).
SCORABLE_MEANS = ("gates_pass", "pass_rate")


def combine(shares: Sequence[tuple[Mapping[str, Any], int]]) -> dict[str, Any]:
  """The row of all shares, each `(row, count)`: a process's row over `count` rollouts.
  One share is returned as it is. A metric only some shares have is combined over
  those; weights summing to 0 fall back to the plain mean."""
  if len(shares) == 1:
    return dict(shares[0][0])
  out: dict[str, Any] = {}
  for name, value in shares[0][0].items():
    have = [(row, count) for row, count in shares if name in row]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
      out[name] = value
    elif name in SUMMED:
      out[name] = sum(row[name] for row, _ in have)
    else:
      weights = [_weight(name, row, count) for row, count in have]
      total = sum(weights)
      out[name] = (sum(w * row[name] for w, (row, _) in zip(weights, have)) / total
                   if total else float(np.mean([row[name] for row, _ in have])))
  return out


def _weight(name: str, row: Mapping[str, Any], count: int) -> float:
  """A share's weight in the mean of `name`: the rollouts that mean is over."""
  scorable = count - row.get("unscorable", 0)
  if name == "reward_mean":
    return scorable - row.get("no_reward", 0)
  if name in SCORABLE_MEANS or name.startswith("gate_"):
    return scorable
  return count
