"""Why graded responses fail: each response's failure causes, read from its evaluation
record (gates, rubric results and the diagnostics' evidence) and its task.

    python -m rcca_jax.evaluation.failures EVALUATIONS.jsonl --tasks TASKS.jsonl [--json OUT]

EVALUATIONS is an evaluation's `evaluations.jsonl` (or the directory holding it); the
table counts, per family, the responses that pass, the first gate that failed, and the
failed rubrics by level and cause:
  missing_element  the rubric's selector matches nothing (an id the app did not write)
  no_handler       an interaction found no listener for its events on the element
  wrong_value      text, value, attribute, number, count or a JS check disagreed
  wrong_style      a computed style disagreed
  wrong_visibility the element was visible or hidden against the rubric
  other            anything else (a hang, an exception during the interaction, ...)
A runtime gate failure is split by its exception: `runtime_null_element` (a script
used an element the page lacks: a wrong or missing id), `runtime_reference`,
`runtime_syntax`, `runtime_other`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rcca_jax.base import dsl
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.actions import ACTION_EVENTS
from rcca_jax.evaluation.record import UNSCORABLE

GATES = ("format", "source", "runtime")
RUBRIC_CAUSES = ("missing_element", "no_handler", "wrong_value", "wrong_style",
                 "wrong_visibility", "other")


def runtime_cause(message: str) -> str:
  """The runtime gate's failure by the exception in its message."""
  if "of null" in message or "of undefined" in message:
    return "runtime_null_element"
  if "ReferenceError" in message:
    return "runtime_reference"
  if "SyntaxError" in message:
    return "runtime_syntax"
  return "runtime_other"


def _action_events(path: Sequence[str]) -> set[str]:
  """The DOM events the actions of an issue's step path dispatch."""
  events: set[str] = set()
  for text in path:
    try:
      steps = dsl.parse_check(text)
    except ValueError:
      continue
    for step in steps:
      events.update(ACTION_EVENTS.get(step.verb, ()))
  return events


def rubric_cause(issue: Mapping[str, Any]) -> str:
  """A failed rubric's cause from its diagnostic issue (`RUBRIC_CAUSES`)."""
  message = str(issue.get("message") or "")
  evidence = issue.get("evidence") or {}
  if "no element matches" in message:
    return "missing_element"
  events = _action_events(evidence.get("path") or [])
  listeners = evidence.get("listeners")
  if events and listeners is not None and not any(
      item.get("type") in events for item in listeners):
    return "no_handler"
  step = str(evidence.get("step") or "")
  if step.startswith("expect style"):
    return "wrong_style"
  if step.startswith(("expect visible", "expect hidden")):
    return "wrong_visibility"
  if step.startswith("expect") and "expected" in evidence:
    return "wrong_value"
  return "other"


def classify(record: Mapping[str, Any], task: tasks_lib.Task) -> dict[str, Any]:
  """One response: `passed`, `gate` (the first failed gate's cause, "unscorable" when
  grading gave no verdict, else None) and `rubrics`: (id, kind, level, cause) of each
  failed rubric."""
  if record.get(UNSCORABLE):
    return {"passed": False, "gate": "unscorable", "rubrics": []}
  gates = record.get("gates") or {}
  issues = record.get("issues") or []
  for gate in GATES:
    if gates.get(gate) is False:
      cause = gate
      if gate == "runtime":
        messages = [str(i.get("message") or "") for i in issues if i.get("stage") == "runtime"]
        cause = runtime_cause(messages[0] if messages else "")
      return {"passed": False, "gate": cause, "rubrics": []}
  by_id = {r.id: r for r in task.rubrics}
  issue_of = {i.get("rubric_id"): i for i in issues if i.get("stage") == "rubric"}
  failed = []
  for result in record.get("rubrics") or []:
    if result.get("passed") is False:
      rubric = by_id.get(result["id"])
      failed.append((result["id"], rubric.kind if rubric else "?",
                     rubric.level if rubric else "?",
                     rubric_cause(issue_of.get(result["id"], {"message": result.get("detail")}))))
  passed = not failed and all(r.get("passed") for r in record.get("rubrics") or [])
  return {"passed": passed, "gate": None, "rubrics": failed}


def tally(records: Iterable[Mapping[str, Any]],
          tasks: Mapping[str, tasks_lib.Task]) -> dict[str, Any]:
  """Counts per family and overall ("all"): responses, passed, `gates` (cause ->
  responses) and `rubrics` ("LEVEL/CAUSE" -> failed rubrics)."""
  out: dict[str, Any] = {}
  for record in records:
    task = tasks[record["task_id"]]
    c = classify(record, task)
    for key in (tasks_lib.family_of(task), "all"):
      t = out.setdefault(key, {"responses": 0, "passed": 0,
                               "gates": collections.Counter(),
                               "rubrics": collections.Counter()})
      t["responses"] += 1
      t["passed"] += int(c["passed"])
      if c["gate"]:
        t["gates"][c["gate"]] += 1
      for _, _, level, cause in c["rubrics"]:
        t["rubrics"][f"{level}/{cause}"] += 1
  return {k: {**v, "gates": dict(v["gates"]), "rubrics": dict(v["rubrics"])}
          for k, v in sorted(out.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def markdown(counts: Mapping[str, Any]) -> str:
  """The tally as a table: one row per family, gate and rubric causes as columns."""
  gates = sorted({g for t in counts.values() for g in t["gates"]})
  causes = sorted({c for t in counts.values() for c in t["rubrics"]})
  head = ["family", "responses", "passed", *(f"gate: {g}" for g in gates),
          *(f"rubric: {c}" for c in causes)]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for family, t in counts.items():
    cells = [family, str(t["responses"]), str(t["passed"]),
             *(str(t["gates"].get(g, 0)) for g in gates),
             *(str(t["rubrics"].get(c, 0)) for c in causes)]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def read_records(path: str) -> list[dict[str, Any]]:
  """The records of an `evaluations.jsonl` file or of the directory holding one."""
  if os.path.isdir(path):
    path = os.path.join(path, "evaluations.jsonl")
  out = []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if line.strip():
        try:
          out.append(json.loads(line))
        except json.JSONDecodeError as e:
          raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
  return out


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("evaluations", help="evaluations.jsonl, or the evaluation directory")
  p.add_argument("--tasks", required=True, help="the task file the responses answer")
  p.add_argument("--json", default="", help="also write the counts here")
  args = p.parse_args(argv)
  tasks = {t.id: t for t in tasks_lib.load_tasks(args.tasks)}
  records = read_records(args.evaluations)
  unknown = sorted({r["task_id"] for r in records} - set(tasks))
  if unknown:
    print(f"{args.evaluations}: task ids not in {args.tasks}: {', '.join(unknown[:5])}",
          file=sys.stderr)
    return 2
  counts = tally(records, tasks)
  print(markdown(counts))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(counts, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
