"""The evaluation record (docs/contracts.md#4-evaluation) and its parts."""

from __future__ import annotations

import dataclasses
from typing import Any

from rcca_jax.base.schema import Span

# Record key: why the record is no verdict on the app (its grading did not finish, or
# the judge could not grade its rubrics). Such a record has no reward, is never cached,
# and its response gets advantage 0 and loss mask 0 (docs/method.md#2-gated-reward).
UNSCORABLE = "unscorable"
# A rubric's detail when the judge could not grade it (transport failure, time budget
# spent, unusable replies); such a rubric makes the record UNSCORABLE unless
# `EvalConfig.partial_judge == "drop"`.
JUDGE_FAILED = "ungraded: judge failed: "


@dataclasses.dataclass
class Issue:
  """One diagnostic: what went wrong, where (response spans) and the evidence."""

  stage: str                      # one of schema.STAGES
  message: str
  rubric_id: str | None = None
  severity: str | None = None     # one of schema.SEVERITIES (None for non-rubric issues that gate)
  direct: list[Span] = dataclasses.field(default_factory=list)
  context: list[Span] = dataclasses.field(default_factory=list)
  evidence: dict[str, Any] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    return {
        "stage": self.stage,
        "rubric_id": self.rubric_id,
        "severity": self.severity,
        "message": self.message,
        "direct": [list(s) for s in self.direct],
        "context": [list(s) for s in self.context],
        "evidence": self.evidence,
    }


@dataclasses.dataclass
class RubricResult:
  """Outcome of one rubric. `passed is None` means ungraded (no check, no judge)."""

  id: str
  passed: bool | None
  severity: str | None = None
  detail: str = ""

  def to_json(self) -> dict[str, Any]:
    return {"id": self.id, "passed": self.passed, "severity": self.severity, "detail": self.detail}


@dataclasses.dataclass
class EvalRecord:
  """Everything evaluation knows about one response."""

  task_id: str
  sample_id: int
  reward: float | None            # None: no reward (`no_reward` or `unscorable` says why)
  gates: dict[str, bool | None]
  rubric_score: float | None
  rubrics: list[RubricResult]
  html_span: Span | None
  issues: list[Issue]
  error: str | None = None        # set when the evaluator itself failed on this item
  timing: dict[str, float] = dataclasses.field(default_factory=dict)
  no_reward: str | None = None
  unscorable: str | None = None   # set: no verdict (UNSCORABLE), `reward` is None

  def to_json(self) -> dict[str, Any]:
    out = {
        "task_id": self.task_id,
        "sample_id": self.sample_id,
        "reward": self.reward,
        "gates": dict(self.gates),
        "rubric_score": self.rubric_score,
        "rubrics": [r.to_json() for r in self.rubrics],
        "html_span": list(self.html_span) if self.html_span else None,
        "issues": [i.to_json() for i in self.issues],
    }
    if self.error is not None:
      out["error"] = self.error
    if self.no_reward is not None:
      out["no_reward"] = self.no_reward
    if self.unscorable is not None:
      out[UNSCORABLE] = self.unscorable
    if self.timing:
      out["timing"] = dict(self.timing)
    return out
