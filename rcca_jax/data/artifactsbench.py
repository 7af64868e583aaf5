"""ArtifactsBench items -> RCCA tasks (judge-graded rubrics), plus embedded answers.

python -m rcca_jax.data.artifactsbench FILE [--tasks-out T] [--responses-out R]

The file is JSON Lines (also when named `.json`; a JSON array is accepted too), one item
per line with `index`, `question`, `checklist` (items with `id`, `title`, `description`,
`maxScore`), `class` ("Major-Sub") and `difficulty`. Model answers may be embedded as
`answer` / `model_infer_result` / `output`; text before `</think>` is dropped. Each
checklist item becomes one rubric without `check`; items that cannot be read are
reported as `FILE:LINE: what` and skipped, and reading goes on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from rcca_jax.data import bench_common as common
from rcca_jax.data import jsonl

DIFFICULTIES = ("easy", "medium", "hard")


def _rubric(item: Any, k: int, where: str, problems: list[str]) -> dict[str, Any] | None:
  if not isinstance(item, dict):
    problems.append(f"{where}: checklist item {k}: expected an object, got "
                    f"{jsonl.json_type(item)}; skipped")
    return None
  title = item.get("title") if isinstance(item.get("title"), str) else ""
  desc = item.get("description") if isinstance(item.get("description"), str) else ""
  if not (title.strip() or desc.strip()):
    problems.append(f"{where}: checklist item {k}: no 'title' or 'description' text; skipped")
    return None
  text = f"{title.strip()}: {desc.strip()}" if title.strip() and desc.strip() else (
      title.strip() or desc.strip())
  rid = item.get("id")
  rubric = {"id": str(rid) if isinstance(rid, (str, int)) and str(rid).strip() else f"c{k}",
            "kind": common.rubric_kind(text), "level": common.rubric_level(text),
            "text": text}
  if isinstance(item.get("maxScore"), (int, float)):
    rubric["max_score"] = item["maxScore"]
  return rubric


def item_to_task(obj: dict[str, Any], where: str, problems: list[str]):
  """One ArtifactsBench item as a Task (None, with problems recorded, when unusable)."""
  question = obj.get("question")
  if not isinstance(question, str) or not question.strip():
    problems.append(f"{where}: missing or empty 'question'; item skipped")
    return None
  index = obj.get("index")
  if not isinstance(index, (int, str)) or isinstance(index, bool):
    problems.append(f"{where}: missing 'index'; item skipped")
    return None
  checklist = obj.get("checklist")
  if not isinstance(checklist, list) or not checklist:
    problems.append(f"{where}: 'checklist' must be a non-empty list; item skipped")
    return None
  rubrics = [r for k, it in enumerate(checklist, 1) if (r := _rubric(it, k, where, problems))]
  seen: set[str] = set()
  for k, r in enumerate(rubrics, 1):
    if r["id"] in seen:
      problems.append(f"{where}: duplicate checklist id {r['id']!r}; renamed c{k}")
      r["id"] = f"c{k}"
    seen.add(r["id"])
  if not rubrics:
    problems.append(f"{where}: no readable checklist items; item skipped")
    return None
  cls = obj.get("class") if isinstance(obj.get("class"), str) else None
  difficulty = obj.get("difficulty")
  if isinstance(difficulty, str) and difficulty.lower() in DIFFICULTIES:
    difficulty = difficulty.lower()
  elif difficulty is not None:
    problems.append(f"{where}: unknown difficulty {difficulty!r}; left unset")
    difficulty = None
  task = {"id": f"artifactsbench-{index}", "request": question,
          "category": cls.split("-", 1)[0].strip() if cls else None,
          "difficulty": difficulty, "rubrics": rubrics,
          "benchmark": "artifactsbench", "index": index}
  if cls:
    task["class"] = cls
  return common.make_task({k: v for k, v in task.items() if v is not None}, where, problems)


def load(path: str | os.PathLike) -> common.Loaded:
  """Reads every item it can; `problems` lists (FILE:LINE) what it could not read."""
  return common.load_items(path, item_to_task)


def main(argv: Sequence[str] | None = None) -> int:
  return common.cli("artifactsbench", load, argv)


if __name__ == "__main__":
  sys.exit(main())
