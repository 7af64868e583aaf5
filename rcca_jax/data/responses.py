"""Response files (docs/contracts.md#3-responses-file); a bad line becomes a
BadResponseLine, never an error."""

from __future__ import annotations

import dataclasses
import os

from rcca_jax.data import jsonl


@dataclasses.dataclass(frozen=True)
class ResponseItem:
  task_id: str
  sample_id: int
  response: str
  line: int


@dataclasses.dataclass(frozen=True)
class BadResponseLine:
  """A line that cannot be evaluated; ids are kept when they could be read."""

  line: int
  error: str                     # "FILE:LINE: what is wrong"
  task_id: str | None
  sample_id: int | None


def _readable_sample_id(obj: dict) -> int | None:
  value = obj.get("sample_id", 0)
  return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_responses(path: str | os.PathLike) -> list[ResponseItem | BadResponseLine]:
  """Every non-blank line of the file, in order, as an item or a bad line."""
  out: list[ResponseItem | BadResponseLine] = []
  for line in jsonl.read_lines(path):
    if line.error is not None:
      out.append(BadResponseLine(line.number, line.error, None, None))
      continue
    obj = line.obj
    task_id = obj.get("task_id")
    task_id = task_id if isinstance(task_id, str) and task_id else None
    sample_id = _readable_sample_id(obj)
    problems = []
    if "task_id" not in obj:
      problems.append("missing 'task_id'")
    elif task_id is None:
      problems.append(f"'task_id' must be a non-empty string, got "
                      f"{jsonl.json_type(obj['task_id'])} {obj['task_id']!r}")
    if sample_id is None:
      problems.append(f"'sample_id' must be an integer, got "
                      f"{jsonl.json_type(obj['sample_id'])} {obj['sample_id']!r}")
    if "response" not in obj:
      problems.append("missing 'response'")
    elif not isinstance(obj["response"], str):
      problems.append(f"'response' must be a string, got {jsonl.json_type(obj['response'])}")
    if problems:
      out.append(BadResponseLine(line.number, f"{line.where}: {'; '.join(problems)}",
                                 task_id, sample_id))
    else:
      out.append(ResponseItem(task_id, sample_id, obj["response"], line.number))
  return out
