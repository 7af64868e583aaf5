"""The runners' inputs: a benchmark or project task file, and the responses to grade.

Every response becomes one `Item`; a line that cannot be graded keeps its place with
the error (it becomes a `bad_input` record). An item's `key` (task id, sample id and a
hash of the response text) identifies it across re-runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Mapping, Sequence

from rcca_jax.data import artifactsbench as artifactsbench_data
from rcca_jax.data import bench_common
from rcca_jax.data import miniappbench as miniappbench_data
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib

LOADERS = {"artifactsbench": artifactsbench_data.load, "miniappbench": miniappbench_data.load}


class InputError(ValueError):
  """A task file that cannot be used; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Item:
  """One response line to grade; `error` is set for a line that cannot be graded."""

  index: int
  task_id: str
  sample_id: int
  response: str
  task: tasks_lib.Task | None
  error: str | None = None

  @property
  def key(self) -> str:
    digest = hashlib.sha1(self.response.encode("utf-8", "replace")).hexdigest()[:16]
    return f"{self.task_id}\t{self.sample_id}\t{digest}"

  def base_record(self) -> dict[str, Any]:
    """The fields every record of this item starts with."""
    task = self.task
    return {"task_id": self.task_id, "sample_id": self.sample_id,
            "category": task.category if task else None,
            "difficulty": task.difficulty if task else None, "key": self.key}


def load_tasks(path: str, benchmark: str) -> tuple[list[tasks_lib.Task], dict[str, str],
                                                   list[str]]:
  """Tasks, embedded answers and warnings of a benchmark file or a project task file.

  A project task file (docs/contracts.md#1-task-file; first record has `request` and
  `rubrics`) must validate as a whole (TaskFileError otherwise); a benchmark file keeps
  every item it can read and lists what it could not as `FILE:LINE: what` warnings.
  """
  first = next(iter(bench_common.read_records(path)), None)
  if first is None:
    raise InputError(f"{path}: no tasks in the file")
  _, obj, _ = first
  if isinstance(obj, dict) and "request" in obj and "rubrics" in obj:
    return tasks_lib.load_tasks(path), {}, []
  loaded = LOADERS[benchmark](path)
  if not loaded.tasks:
    raise InputError("\n".join(loaded.problems + [f"{path}: no usable {benchmark} task"]))
  return loaded.tasks, loaded.answers, loaded.problems


def load_items(tasks: Sequence[tasks_lib.Task], responses_path: str | None,
               answers: Mapping[str, str]) -> list[Item]:
  """One item per response line (or per embedded answer when there is no file)."""
  by_id = {t.id: t for t in tasks}
  if responses_path is None:
    return [Item(i, t.id, 0, answers[t.id], t)
            for i, t in enumerate(t for t in tasks if t.id in answers)]
  items = []
  for i, line in enumerate(responses_lib.load_responses(responses_path)):
    if isinstance(line, responses_lib.BadResponseLine):
      items.append(Item(i, line.task_id or "", line.sample_id if line.sample_id is not None
                        else -1, "", by_id.get(line.task_id or ""), line.error))
    elif line.task_id not in by_id:
      items.append(Item(i, line.task_id, line.sample_id, line.response, None,
                        f"{responses_path}:{line.line}: unknown task id {line.task_id!r}"))
    else:
      items.append(Item(i, line.task_id, line.sample_id, line.response, by_id[line.task_id]))
  return items


def error_record(item: Item, error: str, status: str) -> dict[str, Any]:
  """The record of an item that has no score: `status` and the `error` text."""
  return {**item.base_record(), "score": None, "status": status, "error": error}
