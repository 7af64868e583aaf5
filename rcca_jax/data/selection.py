"""Task selection: which tasks of a task file a run uses, and paths in the repository."""

import functools
import os
import pathlib
from typing import Iterable, Sequence

from rcca_jax.data import tasks as tasks_lib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def resolve_path(path: str) -> str:
  """`path` as given when it exists (or is absolute), else relative to the repo root."""
  if os.path.isabs(path) or os.path.exists(path):
    return path
  return str(REPO_ROOT / path)


@functools.lru_cache(maxsize=8)
def load_task_file(path: str) -> tuple[tasks_lib.Task, ...]:
  """All tasks of a task file (read once per process)."""
  return tuple(tasks_lib.load_tasks(resolve_path(path)))


def select_tasks(path: str, *, families: Sequence[str] = (), limit: int = 0,
                 per_family: int = 0, need_reference: bool = False) -> list[tasks_lib.Task]:
  """Tasks of `path`, optionally only `families`, at most `per_family` of each family
  and `limit` in all (0: no limit), in file order."""
  return cap_tasks(load_task_file(path), where=path, families=families, limit=limit,
                   per_family=per_family, need_reference=need_reference)


def cap_tasks(tasks: Iterable[tasks_lib.Task], *, where: str, families: Sequence[str] = (),
              limit: int = 0, per_family: int = 0,
              need_reference: bool = False) -> list[tasks_lib.Task]:
  """`select_tasks` over any sequence of tasks (`where` names it in the error)."""
  counts: dict[str, int] = {}
  out = []
  for task in tasks:
    family = tasks_lib.family_of(task)
    if (families and family not in families) or (need_reference and not task.reference):
      continue
    if per_family and counts.get(family, 0) >= per_family:
      continue
    counts[family] = counts.get(family, 0) + 1
    out.append(task)
    if limit and len(out) >= limit:
      break
  if not out:
    raise ValueError(f"{where}: no tasks left after selecting families {list(families)}")
  return out
