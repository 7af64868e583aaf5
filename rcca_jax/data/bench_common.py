"""Shared parts of the public-benchmark loaders: reading, rubric mapping, answers, CLI.

Benchmark items become RCCA tasks whose rubrics have no `check` (a judge grades them).
Mapping (docs/benchmarks.md#mapping-onto-rcca-rubrics): static / initial-state items ->
`initial` rubrics, interaction items -> `dynamic`; intention items -> `core`; generic
items (visual design, robustness, code quality) -> `rendering` or `behavior`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rcca_jax.data import jsonl
from rcca_jax.data import tasks as tasks_lib

ANSWER_KEYS = ("answer", "model_infer_result", "output", "response", "generation")

_DYNAMIC = re.compile(
    r"\b(click\w*|tap\w*|hover\w*|drag\w*|press\w*|typ(e|es|ed|ing)|input\w*|enter\w*|"
    r"scroll\w*|interact\w*|after|when the user|user action|toggle\w*|select\w*|submit\w*|"
    r"dynamic\w*|state change\w*|transition\w*|animat\w*|respond\w*|event\w*|keyboard|"
    r"play\w*|start\w*|move\w*)\b", re.IGNORECASE)
_RENDERING = re.compile(
    r"\b(visual\w*|aesthetic\w*|design|layout|colou?r\w*|font\w*|typograph\w*|style\w*|"
    r"appearance|beaut\w*|polish\w*|look\w*|spacing|alignment|responsive\w*|theme|"
    r"render\w*|ui|ux)\b", re.IGNORECASE)
_BEHAVIOR = re.compile(
    r"\b(robust\w*|error\w*|edge case\w*|invalid|exception\w*|performance|smooth\w*|"
    r"stabil\w*|code quality|maintainab\w*|accessib\w*|compatib\w*|boundary|crash\w*|"
    r"fault\w*)\b", re.IGNORECASE)


@dataclasses.dataclass
class Loaded:
  """What a loader read: tasks, embedded answers by task id, and what it could not read."""

  tasks: list[tasks_lib.Task] = dataclasses.field(default_factory=list)
  answers: dict[str, str] = dataclasses.field(default_factory=dict)
  problems: list[str] = dataclasses.field(default_factory=list)   # "FILE:LINE: what"


def read_records(path: str | os.PathLike) -> Iterator[tuple[str, Any, str | None]]:
  """(where, object, error) per record of a JSON Lines file or of a JSON array file."""
  path = os.fspath(path)
  with open(path, "rb") as f:
    head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
  if head.startswith(b"["):
    try:
      with open(path, encoding="utf-8-sig") as f:
        items = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      yield f"{path}:1", None, f"{path}:1: not a valid JSON array: {e}"
      return
    for i, obj in enumerate(items, 1):
      where = f"{path}:item {i}"
      if isinstance(obj, dict):
        yield where, obj, None
      else:
        yield where, None, f"{where}: expected a JSON object, got {jsonl.json_type(obj)}"
    return
  for line in jsonl.read_lines(path):
    yield line.where, line.obj, line.error


def first_key(obj: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
  """The first of `keys` present in `obj` (case-insensitive), with its value."""
  lower = {k.lower(): k for k in obj if isinstance(k, str)}
  for k in keys:
    if k.lower() in lower:
      real = lower[k.lower()]
      return real, obj[real]
  return None, None


def strip_think(text: str) -> str:
  """Drops everything up to the last `</think>` (reasoning models' hidden thoughts)."""
  i = text.rfind("</think>")
  return text[i + len("</think>"):].lstrip() if i >= 0 else text


def answer_of(obj: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
  key, value = first_key(obj, ANSWER_KEYS)
  if key is None or value is None:
    return None
  if not isinstance(value, str):
    problems.append(f"{where}: '{key}' is {jsonl.json_type(value)}, expected a string; "
                    "answer ignored")
    return None
  return strip_think(value)


def rubric_kind(text: str, default: str = "initial") -> str:
  return "dynamic" if _DYNAMIC.search(text) else default


def rubric_level(text: str, default: str = "core") -> str:
  """Generic items go to `behavior` (robustness, quality) or `rendering` (visual design)."""
  if _BEHAVIOR.search(text):
    return "behavior"
  if _RENDERING.search(text):
    return "rendering"
  return default


def make_task(obj: dict[str, Any], where: str, problems: list[str]) -> tasks_lib.Task | None:
  try:
    return tasks_lib.parse_task(obj, where)
  except tasks_lib.TaskFileError as e:
    problems.extend(e.errors)
    return None


def load_items(path: str | os.PathLike,
               item_to_task: Callable[[dict[str, Any], str, list[str]], tasks_lib.Task | None]
               ) -> Loaded:
  """Converts every readable record; duplicates and unreadable records become problems."""
  out = Loaded()
  ids: set[str] = set()
  for where, obj, error in read_records(path):
    if error is not None:
      out.problems.append(error + "; skipped")
      continue
    task = item_to_task(obj, where, out.problems)
    if task is None:
      continue
    if task.id in ids:
      out.problems.append(f"{where}: duplicate task id {task.id!r}; item skipped")
      continue
    ids.add(task.id)
    out.tasks.append(task)
    answer = answer_of(obj, where, out.problems)
    if answer is not None:
      out.answers[task.id] = answer
  return out


def write_tasks_and_responses(loaded: Loaded, tasks_out: str | None,
                              responses_out: str | None) -> None:
  """Writes the tasks file and, from the embedded answers, a responses file
  (docs/contracts.md#3-responses-file)."""
  if tasks_out:
    tasks_lib.write_tasks(tasks_out, loaded.tasks)
  if responses_out:
    jsonl.write_lines(responses_out, (
        {"task_id": t.id, "sample_id": 0, "response": loaded.answers[t.id]}
        for t in loaded.tasks if t.id in loaded.answers))


def cli(name: str, load: Callable[[str], Loaded], argv: Sequence[str] | None) -> int:
  """`python -m rcca_jax.data.NAME FILE [--tasks-out T] [--responses-out R]`."""
  p = argparse.ArgumentParser(description=f"Converts {name} items into RCCA task files.")
  p.add_argument("file")
  p.add_argument("--tasks-out", help="task file to write (JSON Lines)")
  p.add_argument("--responses-out", help="responses file from the embedded answers")
  args = p.parse_args(argv)
  loaded = load(args.file)
  for problem in loaded.problems:
    print(f"warning: {problem}", file=sys.stderr)
  write_tasks_and_responses(loaded, args.tasks_out, args.responses_out)
  print(f"{name}: {len(loaded.tasks)} tasks, {len(loaded.answers)} answers, "
        f"{len(loaded.problems)} problems")
  return 0 if loaded.tasks else 1
