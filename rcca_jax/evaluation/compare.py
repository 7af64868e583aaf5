"""Pure comparison rules of rubric expectations and their severities
(docs/method.md#2-gated-reward).

Each function returns None when the expectation holds, "minor" when it holds only up to
normalisation (case/whitespace-insensitive text, numbers within 1%), else "major".
"""

from __future__ import annotations

import operator
import re

NUMERIC_TOLERANCE = 0.01
_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def collapse(text: str) -> str:
  """Whitespace runs to one space, trimmed (how a browser shows text)."""
  return _WS.sub(" ", text).strip()


def _loose(text: str) -> str:
  return _WS.sub("", text).casefold()


def first_number(text: str) -> float | None:
  """The first number in `text` (thousands separators allowed), or None."""
  m = _NUMBER.search(text)
  if not m:
    return None
  try:
    return float(m.group(0).replace(",", ""))
  except ValueError:
    return None


def _as_number(text: str) -> float | None:
  try:
    return float(text.replace(",", "").strip())
  except ValueError:
    return None


def _close(a: float, b: float) -> bool:
  return abs(a - b) <= NUMERIC_TOLERANCE * abs(b) if b != 0 else a == b


def compare_number(op: str, observed: float, expected: float) -> str | None:
  """Severity of `observed OP expected` failing; within 1% of the operand is minor."""
  if _CMP[op](observed, expected):
    return None
  if op != "!=" and _close(observed, expected):
    return "minor"
  return "major"


def compare_text(op: str, observed: str, expected: str, *, alternatives=()) -> str | None:
  """Severity of a STROP text comparison; `alternatives` are equivalent expected forms."""
  obs = collapse(observed)
  options = [collapse(expected), *(collapse(a) for a in alternatives)]
  if op == "!=":
    return "major" if obs in options else None
  if op == "matches":
    if re.search(expected, obs):
      return None
    return "minor" if re.search(expected, obs, re.IGNORECASE) else "major"
  if op == "==":
    if obs in options:
      return None
    loose = _loose(obs)
    if any(loose == _loose(o) for o in options):
      return "minor"
    num_obs = _as_number(obs)
    if num_obs is not None and any(
        (n := _as_number(o)) is not None and _close(num_obs, n) for o in options):
      return "minor"
    return "major"
  if op == "contains":
    if any(o in obs for o in options):
      return None
    loose = _loose(obs)
    return "minor" if any(_loose(o) in loose for o in options) else "major"
  raise ValueError(f"unknown string operator {op!r}")


def check_regex(pattern: str) -> str | None:
  """Error message when `pattern` is not a valid regular expression."""
  try:
    re.compile(pattern)
  except re.error as e:
    return f"invalid regular expression {pattern!r}: {e}"
  return None
