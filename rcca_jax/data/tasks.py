"""Task files (docs/contracts.md#1-task-file): requests with rubrics, validated line by line."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

from rcca_jax.base import dsl
from rcca_jax.base.schema import KINDS, LEVELS
from rcca_jax.data import jsonl

_INITIAL_VERBS = ("wait", "expect")
_TASK_FIELDS = ("id", "request", "category", "difficulty", "reference", "rubrics")
_RUBRIC_FIELDS = ("id", "kind", "level", "text", "check")


@dataclasses.dataclass(frozen=True)
class Rubric:
  """One checkable requirement; `steps` is the parsed `check` (None without check)."""

  id: str
  kind: str
  level: str
  text: str
  check: str | None = None
  steps: tuple[dsl.Step, ...] | None = None
  extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    out: dict[str, Any] = {"id": self.id, "kind": self.kind, "level": self.level,
                           "text": self.text}
    if self.check is not None:
      out["check"] = self.check
    out.update(self.extra)
    return out


@dataclasses.dataclass(frozen=True)
class Task:
  """A request plus its rubrics; unknown fields are kept in `extra`."""

  id: str
  request: str
  rubrics: tuple[Rubric, ...]
  category: str | None = None
  difficulty: str | None = None
  reference: str | None = None
  extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    out: dict[str, Any] = {"id": self.id, "request": self.request}
    for name in ("category", "difficulty", "reference"):
      if getattr(self, name) is not None:
        out[name] = getattr(self, name)
    out["rubrics"] = [r.to_json() for r in self.rubrics]
    out.update(self.extra)
    return out

  def rubric_levels(self) -> dict[str, str]:
    return {r.id: r.level for r in self.rubrics}


class TaskFileError(ValueError):
  """A task file (or object) that does not validate; `errors` are `FILE:LINE: what`."""

  def __init__(self, errors: list[str]):
    self.errors = list(errors)
    super().__init__("\n".join(self.errors))

  def __reduce__(self):
    return type(self), (self.errors,)


def _required_str(obj: Mapping[str, Any], key: str, what: str, errors: list[str]) -> str | None:
  if key not in obj:
    errors.append(f"{what}missing {key!r}")
    return None
  value = obj[key]
  if not isinstance(value, str):
    errors.append(f"{what}{key!r} must be a string, got {jsonl.json_type(value)}")
    return None
  if not value.strip():
    errors.append(f"{what}{key!r} is empty")
    return None
  return value


def _optional_str(obj: Mapping[str, Any], key: str, what: str, errors: list[str]) -> str | None:
  value = obj.get(key)
  if value is not None and not isinstance(value, str):
    errors.append(f"{what}{key!r} must be a string or null, got {jsonl.json_type(value)}")
    return None
  return value


def _parse_rubric(obj: Any, index: int, errors: list[str]) -> Rubric | None:
  """Validates one rubric object; problems go to `errors` (without the FILE:LINE prefix)."""
  if not isinstance(obj, dict):
    errors.append(f"rubric #{index + 1}: expected an object, got {jsonl.json_type(obj)}")
    return None
  rid = obj.get("id")
  label = f"rubric {rid}: " if isinstance(rid, str) and rid.strip() else f"rubric #{index + 1}: "
  before = len(errors)
  rid = _required_str(obj, "id", label, errors)
  kind = _required_str(obj, "kind", label, errors)
  if kind is not None and kind not in KINDS:
    errors.append(f"{label}unknown kind {kind!r} (allowed: {', '.join(KINDS)})")
  level = _required_str(obj, "level", label, errors)
  if level is not None and level not in LEVELS:
    errors.append(f"{label}unknown level {level!r} (allowed: {', '.join(LEVELS)})")
  text = _required_str(obj, "text", label, errors)
  check = _optional_str(obj, "check", label, errors)
  steps = None
  if check is not None:
    if not check.strip():
      errors.append(f"{label}check is empty (omit it for a rubric graded by a judge)")
    else:
      try:
        steps = dsl.parse_check(check)
      except dsl.DslSyntaxError as e:
        at = f"column {e.column}" if e.line == 1 else f"line {e.line}, column {e.column}"
        errors.append(f"{label}check: syntax error at {at}: {e.reason}")
  if steps is not None and kind == "initial":
    for step in steps:
      if step.verb not in _INITIAL_VERBS:
        errors.append(f"{label}an 'initial' rubric may only wait and expect, but its check "
                      f"has {step.verb!r} at column {step.column}"
                      + (f" of check line {step.line}" if step.line > 1 else ""))
  if len(errors) > before:
    return None
  extra = {k: v for k, v in obj.items() if k not in _RUBRIC_FIELDS}
  return Rubric(id=rid, kind=kind, level=level, text=text, check=check, steps=steps,
                extra=extra)


def parse_task(obj: dict, where: str = "<task>") -> Task:
  """Validates one task object; raises TaskFileError listing every problem."""
  if not isinstance(obj, dict):
    raise TaskFileError([f"{where}: expected a JSON object, got {jsonl.json_type(obj)}"])
  errors: list[str] = []
  tid = _required_str(obj, "id", "", errors)
  request = _required_str(obj, "request", "", errors)
  category = _optional_str(obj, "category", "", errors)
  difficulty = _optional_str(obj, "difficulty", "", errors)
  reference = _optional_str(obj, "reference", "", errors)
  rubrics: list[Rubric] = []
  raw_rubrics = obj.get("rubrics")
  if "rubrics" not in obj:
    errors.append("missing 'rubrics'")
  elif not isinstance(raw_rubrics, list):
    errors.append(f"'rubrics' must be an array, got {jsonl.json_type(raw_rubrics)}")
  elif not raw_rubrics:
    errors.append("'rubrics' is empty")
  else:
    first_index: dict[str, int] = {}
    for i, raw in enumerate(raw_rubrics):
      rubric = _parse_rubric(raw, i, errors)
      rid = raw.get("id") if isinstance(raw, dict) else None
      if isinstance(rid, str):
        if rid in first_index:
          errors.append(f"duplicate rubric id {rid!r} (rubrics #{first_index[rid] + 1} "
                        f"and #{i + 1})")
        else:
          first_index[rid] = i
      if rubric is not None:
        rubrics.append(rubric)
  if errors:
    raise TaskFileError([f"{where}: {e}" for e in errors])
  extra = {k: v for k, v in obj.items() if k not in _TASK_FIELDS}
  return Task(id=tid, request=request, rubrics=tuple(rubrics), category=category,
              difficulty=difficulty, reference=reference, extra=extra)


def family_of(task: Task) -> str:
  """The task's family: `extra["family"]`, else its id without the trailing number."""
  family = (task.extra or {}).get("family")
  return str(family) if family else task.id.rsplit("-", 1)[0]


def load_tasks(path: str | os.PathLike) -> list[Task]:
  """All tasks of a JSON Lines file; every problem of the file is collected, then raised."""
  tasks: list[Task] = []
  errors: list[str] = []
  first_line: dict[str, int] = {}
  for line in jsonl.read_lines(path):
    if line.error is not None:
      errors.append(line.error)
      continue
    tid = line.obj.get("id")
    if isinstance(tid, str) and tid.strip():
      if tid in first_line:
        errors.append(f"{line.where}: duplicate task id {tid!r} (first at line {first_line[tid]})")
      else:
        first_line[tid] = line.number
    try:
      tasks.append(parse_task(line.obj, line.where))
    except TaskFileError as e:
      errors.extend(e.errors)
  if errors:
    raise TaskFileError(errors)
  return tasks


def write_tasks(path: str | os.PathLike, tasks: Iterable[Task]) -> None:
  """Canonical JSON Lines (UTF-8, stable key order) that `load_tasks` reads back equal."""
  jsonl.write_lines(path, (t.to_json() for t in tasks))
