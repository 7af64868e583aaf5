"""The gated reward of docs/method.md#2-gated-reward, with every number as config."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Iterable, Mapping

from rcca_jax.base.schema import GATES, LEVELS, SEVERITIES

_DEFAULT_PENALTIES = {
    "core": {"minor": 0.10, "major": 0.25, "critical": 0.45},
    "behavior": {"minor": 0.05, "major": 0.15, "critical": 0.30},
    "rendering": {"minor": 0.02, "major": 0.06, "critical": 0.12},
}
_DEFAULT_CEILINGS = {"core": {"critical": 0.40, "major": 0.70}}


def _frozen(table: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
  return types.MappingProxyType(
      {level: types.MappingProxyType({s: float(v) for s, v in row.items()})
       for level, row in table.items()})


@dataclasses.dataclass(frozen=True)
class RewardConfig:
  """Gate values, rubric-score range, penalty table p(level, severity) and ceilings."""

  format_fail: float = 0.0
  source_fail: float = 0.05
  runtime_fail: float = 0.10
  floor: float = 0.2
  top: float = 1.0
  penalties: Mapping[str, Mapping[str, float]] = dataclasses.field(
      default_factory=lambda: _frozen(_DEFAULT_PENALTIES))
  ceilings: Mapping[str, Mapping[str, float]] = dataclasses.field(
      default_factory=lambda: _frozen(_DEFAULT_CEILINGS))

  def __post_init__(self):
    object.__setattr__(self, "penalties", _frozen(self.penalties))
    object.__setattr__(self, "ceilings", _frozen(self.ceilings))
    for name, table in (("penalties", self.penalties), ("ceilings", self.ceilings)):
      for level, row in table.items():
        if level not in LEVELS:
          raise ValueError(f"reward {name}: unknown level {level!r} (allowed: {', '.join(LEVELS)})")
        for severity in row:
          if severity not in SEVERITIES:
            raise ValueError(f"reward {name}[{level!r}]: unknown severity {severity!r} "
                             f"(allowed: {', '.join(SEVERITIES)})")
    missing = [f"{l}/{s}" for l in LEVELS for s in SEVERITIES if s not in self.penalties.get(l, {})]
    if missing:
      raise ValueError(f"reward penalties: missing entries {', '.join(missing)}")
    if not self.floor <= self.top:
      raise ValueError(f"reward floor {self.floor} is above top {self.top}")

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> RewardConfig:
    """Defaults overridden by `d`; penalty rows merge per level, `ceilings` replaces."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - fields)
    if unknown:
      raise ValueError(f"reward config: unknown keys {', '.join(unknown)} "
                       f"(allowed: {', '.join(sorted(fields))})")
    kwargs = {k: v for k, v in d.items() if k not in ("penalties", "ceilings")}
    penalties = {level: dict(row) for level, row in _DEFAULT_PENALTIES.items()}
    for level, row in d.get("penalties", {}).items():
      penalties.setdefault(level, {}).update(row)
    ceilings = d.get("ceilings", _DEFAULT_CEILINGS)
    return cls(penalties=penalties, ceilings=ceilings, **kwargs)

  def to_dict(self) -> dict[str, Any]:
    out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    out["penalties"] = {l: dict(r) for l, r in self.penalties.items()}
    out["ceilings"] = {l: dict(r) for l, r in self.ceilings.items()}
    return out


def rubric_score(violations: Iterable[tuple[str, str]], cfg: RewardConfig) -> float:
  """clip(1 - sum p, floor, top), then min with the applicable ceilings, then the floor."""
  total = 0.0
  cap = cfg.top
  for level, severity in violations:
    try:
      total += cfg.penalties[level][severity]
    except KeyError:
      raise ValueError(f"unknown rubric level/severity {level!r}/{severity!r}") from None
    cap = min(cap, cfg.ceilings.get(level, {}).get(severity, cfg.top))
  score = min(max(1.0 - total, cfg.floor), cfg.top)
  return max(min(score, cap), cfg.floor)


def rubric_violations(levels: Mapping[str, str], results: Iterable[Any]) -> list[tuple[str, str]]:
  """(level, severity) of every failed rubric; passed and ungraded (None) ones are skipped.

  `levels` maps rubric id -> level; `results` are `record.RubricResult`-like objects
  (`id`, `passed`, `severity`).
  """
  out = []
  for r in results:
    if r.passed is False:
      if r.severity not in SEVERITIES:
        raise ValueError(f"rubric {r.id}: failed without a valid severity ({r.severity!r})")
      out.append((levels[r.id], r.severity))
  return out


def gate_values(*passed: bool) -> dict[str, bool | None]:
  """Gate dict in order format, source, runtime; None after the first failing gate.

  Pass the outcomes of the stages that ran, e.g. `gate_values(True, False)`.
  """
  if len(passed) > len(GATES):
    raise ValueError(f"at most {len(GATES)} gate outcomes, got {len(passed)}")
  gates: dict[str, bool | None] = dict.fromkeys(GATES)
  for name, ok in zip(GATES, passed):
    gates[name] = bool(ok)
    if not ok:
      break
  return gates


def gated_reward(gates: Mapping[str, bool | None], rubric_score: float | None,
                 cfg: RewardConfig) -> float:
  """R(y) of docs/method.md#2-gated-reward: the first gate that did not pass decides; else
  the rubric score."""
  fail_values = {"format": cfg.format_fail, "source": cfg.source_fail,
                 "runtime": cfg.runtime_fail}
  for name in GATES:
    if gates.get(name) is not True:
      return fail_values[name]
  if rubric_score is None:
    raise ValueError("all gates passed but rubric_score is None")
  return float(rubric_score)
