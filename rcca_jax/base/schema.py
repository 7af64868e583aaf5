"""The vocabulary of tasks and evaluation records (docs/contracts.md#1-task-file,
docs/contracts.md#4-evaluation) and span algebra.

Spans are half-open character ranges `(start, end)` of a response (or of its app).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

KINDS = ("initial", "dynamic")                  # when a rubric is checked
LEVELS = ("core", "behavior", "rendering")      # a rubric's importance
SEVERITIES = ("minor", "major", "critical")     # how badly a failed rubric fails
GATES = ("format", "source", "runtime")         # the reward's gates, in order
STAGES = ("source", "runtime", "rubric")        # where an issue was found

Span = tuple[int, int]


def merge_spans(spans: Iterable[Sequence[int]]) -> list[Span]:
  """Sorted, disjoint, non-empty spans covering the same characters as `spans`."""
  out: list[list[int]] = []
  for s, e in sorted((int(s), int(e)) for s, e in spans if int(e) > int(s)):
    if out and s <= out[-1][1]:
      out[-1][1] = max(out[-1][1], e)
    else:
      out.append([s, e])
  return [(s, e) for s, e in out]


def contains(outer: Sequence[int], inner: Sequence[int]) -> bool:
  """True when span `inner` lies within span `outer`."""
  return outer[0] <= inner[0] and inner[1] <= outer[1]


def subtract_spans(spans: Iterable[Sequence[int]], remove: Iterable[Sequence[int]]) -> list[Span]:
  """The characters of `spans` that are not in `remove`, as merged spans."""
  cut = merge_spans(remove)
  out: list[Span] = []
  for s, e in merge_spans(spans):
    for a, b in cut:
      if b <= s or a >= e:
        continue
      if a > s:
        out.append((s, a))
      s = max(s, b)
      if s >= e:
        break
    if s < e:
      out.append((s, e))
  return out
