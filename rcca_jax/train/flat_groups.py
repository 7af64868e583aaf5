"""Groups without a reward difference (docs/method.md#7-objective, "Dynamic sampling").

A GRPO group whose graded rewards are all equal has zero advantage everywhere: it adds
no gradient, yet under a token-mean loss its tokens still count in the denominator,
and an optimizer with momentum still moves the weights on a step made only of such
groups. Two remedies, as DAPO's dynamic sampling:

- `rl.resample_flat_rounds = K`: while fewer than `prompts_per_step` groups of the
  step have a reward difference, up to K more rounds of `prompts_per_step` prompts are
  sampled and graded (prompts and seeds fixed by the step and the round, so a resumed
  run draws the same); the batch is the groups with a difference first, in the order
  drawn, then flat ones to fill it;
- `rl.flat_groups = "drop"`: flat groups leave the loss (zero loss mask), and a step
  with no group left applies no optimizer update (its counters still advance).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from rcca_jax.rl import objective

FLAT_GROUPS = ("keep", "drop")


def groups(rollouts: Sequence, group_size: int) -> list[list]:
  """The rollouts in consecutive groups of `group_size` (prompt-major)."""
  if len(rollouts) % group_size:
    raise ValueError(f"{len(rollouts)} rollouts do not split into groups of {group_size}")
  return [list(rollouts[i:i + group_size]) for i in range(0, len(rollouts), group_size)]


def has_signal(group: Sequence) -> bool:
  """Whether the group's graded rewards differ by more than `objective.EQUAL_ATOL`, so
  that GRPO gives it non-zero advantages (ungraded members do not count)."""
  rewards = [r.reward for r in group if r.reward is not None]
  return len(rewards) > 1 and max(rewards) - min(rewards) > objective.EQUAL_ATOL


def fill_with_signal(rollouts: Sequence, group_size: int, want: int, rounds: int,
                     draw: Callable[[int], list]) -> tuple[list, dict[str, float]]:
  """`want` groups, those with a reward difference first: `rollouts`' groups, then
  those of `draw(1)`, `draw(2)`, ... (graded rollouts of further prompts) while fewer
  than `want` have a difference, at most `rounds` draws. Returns the rollouts and the
  row entries `sampling_rounds`, `groups_sampled`, `groups_with_signal` (of the batch)."""
  found = groups(rollouts, group_size)
  done = 0
  while sum(map(has_signal, found)) < want and done < rounds:
    done += 1
    found += groups(draw(done), group_size)
  picked = [g for g in found if has_signal(g)][:want]
  picked += [g for g in found if not has_signal(g)][:want - len(picked)]
  return [r for g in picked for r in g], {
      "sampling_rounds": float(done), "groups_sampled": float(len(found)),
      "groups_with_signal": float(sum(map(has_signal, picked)))}


def dynamic_sampling(rollouts: Sequence, group_size: int, *, rounds: int, mode: str,
                     draw: Callable[[int], list]
                     ) -> tuple[Sequence, dict[str, float], Optional[np.ndarray]]:
  """The step's rollouts under `rl.resample_flat_rounds = rounds` (`fill_with_signal`,
  none drawn at 0) and `rl.flat_groups = mode`; the row entries (those of
  `fill_with_signal` when it draws, and `groups_kept` with "drop"); and with "drop",
  which rows stay in the loss (those of groups with a reward difference; None with
  "keep": all)."""
  entries: dict[str, float] = {}
  if rounds:
    rollouts, entries = fill_with_signal(rollouts, group_size, len(rollouts) // group_size,
                                         rounds, draw)
  if mode != "drop":
    return rollouts, entries, None
  signal = [has_signal(g) for g in groups(rollouts, group_size)]
  entries["groups_kept"] = float(sum(signal))
  return rollouts, entries, np.repeat(signal, group_size)
