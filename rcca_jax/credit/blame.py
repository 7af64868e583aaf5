"""What an RL update blames: the evaluator's issues, a placebo of them, or the known sites.

The `credit` config section (`CreditConfig`):
  direct, context, cap: the diagnostic weights (`diagnostic_weights`,
    docs/method.md#5-diagnostic-weights);
  blame: where the blamed tokens come from —
    "evaluator": the evaluator's issues (the paper's method);
    "placebo": the evaluator's weights moved to random places of the same response
      (`placebo_weights`): same blamed structure, no information about where the
      fault is;
    "oracle": the known bug sites of a controlled task that the response carries
      (`oracle_issues`), direct spans only, no context;
    "sibling_diff": model-free, no evaluator: a response rewarded below its group's
      best gets `direct` on the tokens that differ from that best response
      (`sibling_references`, `sibling_diff_weights`), every other response weight 1;
  negative_unblamed: the weight of the unblamed tokens of a negative-advantage response
    in the RCCA loss (1.0: the paper's rule, docs/method.md#6-asymmetric-effective-weights;
    0.0 puts the negative update on blamed code only);
  preset: a named method (`credit/presets.py`) setting the fields above and the
    loss's; "" none.
All four blame sources: docs/method.md#9-blame-sources.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rcca_jax.base import mapping
from rcca_jax.credit import presets
from rcca_jax.credit import sites as sites_lib

BLAME_MODES = ("evaluator", "placebo", "oracle", "sibling_diff")
# Rewards within this of the group's best are not below it (objective.group_advantages'
# tolerance for equal rewards).
SIBLING_ATOL = 1e-6


@dataclasses.dataclass(frozen=True)
class CreditConfig:
  """The `credit` section: diagnostic weights, the blame source, focused weights."""
  direct: float = 3.0
  context: float = 1.5
  cap: float = 4.0
  blame: str = "evaluator"
  negative_unblamed: float = 1.0
  preset: str = ""
  placebo_draw: int = 0  # which random layout "placebo" draws (0: the default one)

  def __post_init__(self):
    presets.fields(self.preset)  # a known name
    if self.blame not in BLAME_MODES:
      raise ValueError(f"blame={self.blame!r}: expected one of {', '.join(BLAME_MODES)}")
    low = [f"{name}={getattr(self, name)}" for name in ("direct", "context", "cap")
           if getattr(self, name) < 1.0]
    if low:
      raise ValueError(f"{', '.join(low)} must be >= 1 (a blamed token's weight; "
                       "1 = not blamed)")
    if self.negative_unblamed < 0:
      raise ValueError(f"negative_unblamed={self.negative_unblamed} must be >= 0")
    if self.placebo_draw < 0:
      raise ValueError(f"placebo_draw={self.placebo_draw} must be >= 0")

  @classmethod
  def from_mapping(cls, values: Optional[Mapping[str, Any]]) -> "CreditConfig":
    """From a dict / ConfigDict (None: the defaults); unknown keys are an error."""
    return cls(**mapping.strict_kwargs(cls, dict(values or {}), "credit config keys"))

  def weights(self) -> dict[str, float]:
    """The keywords of `credit.diagnostic_weights`."""
    return {"direct": self.direct, "context": self.context, "cap": self.cap}


def blamed_runs(wbar: np.ndarray) -> list[tuple[int, int]]:
  """[start, end) of the maximal runs of consecutive tokens with one equal weight > 1."""
  w = np.asarray(wbar)
  out, t = [], 0
  while t < len(w):
    if w[t] > 1.0:
      end = t + 1
      while end < len(w) and w[end] == w[t]:
        end += 1
      out.append((t, end))
      t = end
    else:
      t += 1
  return out


def placebo_weights(wbar: np.ndarray, seed: Sequence[int]) -> np.ndarray:
  """The response's weights with every blamed run moved to a random place.

  Works at token level: `wbar` splits into its maximal runs of equal weight > 1
  (`blamed_runs`) and its unblamed tokens (weight <= 1, kept in their order); the runs,
  in a random order, go into distinct random gaps between the unblamed tokens (the
  U + 1 gaps of U unblamed tokens, so no two runs touch), or, when there are more runs
  than gaps, into random gaps with repetition (touching runs of one weight then read as
  one run). The number of runs, each run's length and weight, and the multiset of
  weights (hence their sum) are those of `wbar`. `seed` seeds `np.random.default_rng`.
  """
  w = np.asarray(wbar, np.float32)
  runs = blamed_runs(w)
  if not runs:
    return w.copy()
  rng = np.random.default_rng(list(seed))
  blamed = np.zeros(len(w), bool)
  for a, b in runs:
    blamed[a:b] = True
  free = w[~blamed]
  gaps = len(free) + 1
  order = rng.permutation(len(runs))
  if len(runs) <= gaps:
    places = np.sort(rng.choice(gaps, size=len(runs), replace=False))
  else:
    places = np.sort(rng.integers(0, gaps, size=len(runs)))
  pieces, used = [], 0
  for place, k in zip(places, order):
    pieces.append(free[used:place])
    used = place
    a, b = runs[k]
    pieces.append(w[a:b])
  pieces.append(free[used:])
  return np.concatenate(pieces).astype(np.float32)


def oracle_issues(task: Any, text: str) -> Optional[list[dict[str, Any]]]:
  """One issue per known bug site that `text` carries, its direct span the site's span
  in `text` and no context; [] for a combination without bugs; None when `text` is not
  a combination of the task's sites (sampled noise) or the task has no known sites."""
  sites = sites_lib.sites_of(task)
  if not sites:
    return None
  reference = sites_lib.reference_answer(task)
  choice = sites_lib.decompose(reference, sites, text)
  if choice is None:
    return None
  _, spans = sites_lib.render(reference, sites, choice)
  names = [s.name for s in sites if s.kind == "bug" and choice.get(s.name, False)]
  return [{"site": name, "source": "oracle", "direct": [list(span)], "context": []}
          for name, span in zip(names, sites_lib.blame_spans(spans, sites, choice))]


def sibling_references(rewards: Sequence[Optional[float]]) -> list[Optional[int]]:
  """For one group's rewards (None: ungraded), each member's reference for the sibling
  diff: the index of the group's first best-rewarded member when the member's reward is
  below that best by more than `SIBLING_ATOL`; None for the others (the best, its ties,
  the ungraded, every member of a group of equal rewards)."""
  graded = [r for r in rewards if r is not None]
  if not graded:
    return [None] * len(rewards)
  best = max(graded)
  first = next(i for i, r in enumerate(rewards) if r == best)
  return [first if r is not None and r < best - SIBLING_ATOL else None for r in rewards]


def sibling_diff_weights(tokens: Sequence[int], best: Sequence[int],
                         direct: float) -> np.ndarray:
  """[len(tokens)] weights: `direct` on the tokens of `tokens` outside every block it
  shares with `best` (a token-level diff: `difflib.SequenceMatcher` on the token ids,
  its junk heuristic off), 1 on the matched ones."""
  matcher = difflib.SequenceMatcher(None, list(tokens), list(best), autojunk=False)
  w = np.full(len(tokens), direct, np.float32)
  for start, _, size in matcher.get_matching_blocks():
    w[start:start + size] = 1.0
  return w
