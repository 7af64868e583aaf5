"""Token alignment and diagnostic weights (docs/method.md#5-diagnostic-weights).

A token is in an issue's direct (context) set when its character range overlaps any of
the issue's direct (context) spans. Tokens with an empty range (special tokens, which
tokenizers report as (0, 0)) are never blamed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rcca_jax.base.schema import merge_spans


def overlaps(offsets: np.ndarray, spans: Iterable[Sequence[int]]) -> np.ndarray:
  """Boolean [T]: token t's range [s, e) overlaps one of `spans` (empty ranges never do)."""
  merged = merge_spans(spans)
  starts = offsets[:, 0]
  ends = offsets[:, 1]
  if not merged:
    return np.zeros(len(offsets), dtype=bool)
  a = np.array([m[0] for m in merged], dtype=np.int64)
  b = np.array([m[1] for m in merged], dtype=np.int64)
  # The only candidate is the first span ending after the token starts (spans are disjoint).
  i = np.searchsorted(b, starts, side="right")
  ok = i < len(merged)
  hit = np.zeros(len(offsets), dtype=bool)
  hit[ok] = a[i[ok]] < ends[ok]
  return hit & (ends > starts)


def _spans_of(issue: Any, key: str) -> list[Sequence[int]]:
  if isinstance(issue, Mapping):
    return list(issue.get(key) or ())
  return list(getattr(issue, key) or ())


def diagnostic_weights(offsets: Sequence[Sequence[int]] | np.ndarray,
                       issues: Iterable[Any], *, direct: float = 3.0,
                       context: float = 1.5, cap: float = 4.0) -> np.ndarray:
  """Per-token diagnostic weights wbar (docs/method.md#5-diagnostic-weights).

  wbar_t = min(cap, 1 + sum_k [(direct - 1) 1(t in T_dir_k)
                               + (context - 1) 1(t in T_ctx_k and t not in T_dir_k)])

  Args:
    offsets: [T, 2] character offsets (half-open) of the completion tokens into the
      response, as a tokenizer's offset mapping gives them.
    issues: issue dicts (docs/contracts.md#4-evaluation) or `Issue` objects with
      `direct`/`context` spans.
    direct, context: weight of a token hit once directly / once by context only.
    cap: upper bound of the accumulated weight.

  Returns:
    float32 array [T].
  """
  offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
  total = np.zeros(len(offs), dtype=np.float64)
  for issue in issues:
    d = overlaps(offs, _spans_of(issue, "direct"))
    c = overlaps(offs, _spans_of(issue, "context")) & ~d
    total += (direct - 1.0) * d + (context - 1.0) * c
  return np.minimum(cap, 1.0 + total).astype(np.float32)
