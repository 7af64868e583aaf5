"""MiniAppBench items -> RCCA tasks (judge-graded rubrics), plus embedded answers.

python -m rcca_jax.data.miniappbench FILE [--tasks-out T] [--responses-out R]

The public file's field names are not confirmed, so a few plausible spellings are
accepted (case-insensitive): the query (`query`, `question`, `prompt`, `instruction`),
the evaluation reference (`eval_ref`, `evaluation_reference`, `eval_reference`,
`reference`, `evaluation`) holding the lists `intention`, `static` and `dynamic` (items
are strings or objects with `description` / `text` / `content` / `title`), and domain,
sub-class and difficulty. Mapping: intention -> core rubrics; static -> initial;
dynamic -> dynamic. Whatever cannot be read is reported as `FILE:LINE: what`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from rcca_jax.data import bench_common as common
from rcca_jax.data import jsonl

QUERY_KEYS = ("query", "question", "prompt", "instruction", "task")
REF_KEYS = ("eval_ref", "evaluation_reference", "eval_reference", "reference", "evaluation",
            "eval", "ref")
ID_KEYS = ("id", "task_id", "index", "idx", "qid", "uid")
DOMAIN_KEYS = ("domain", "category", "class", "field")
SUBCLASS_KEYS = ("subclass", "sub_class", "sub-class", "subcategory", "sub_category", "subdomain")
DIFFICULTY_KEYS = ("difficulty", "level", "difficulty_level")
TEXT_KEYS = ("description", "text", "content", "desc", "title", "criterion", "item")
DIFFICULTIES = {"easy": "easy", "mid": "medium", "medium": "medium", "hard": "hard"}
LISTS = ("intention", "static", "dynamic")


def _item_text(item: Any) -> str | None:
  if isinstance(item, str):
    return item.strip() or None
  if isinstance(item, dict):
    _, value = common.first_key(item, TEXT_KEYS)
    if isinstance(value, str) and value.strip():
      return value.strip()
  return None


def _rubrics(ref: dict[str, Any], where: str, problems: list[str]) -> list[dict[str, Any]]:
  rubrics: list[dict[str, Any]] = []
  for name in LISTS:
    key, items = common.first_key(ref, (name,))
    if key is None:
      problems.append(f"{where}: evaluation reference has no '{name}' list")
      continue
    if isinstance(items, str):
      items = [items]
    if not isinstance(items, list):
      problems.append(f"{where}: '{key}' is {jsonl.json_type(items)}, expected a list; skipped")
      continue
    for k, item in enumerate(items, 1):
      text = _item_text(item)
      if text is None:
        problems.append(f"{where}: {key}[{k}] has no readable text; skipped")
        continue
      if name == "intention":
        kind, level = common.rubric_kind(text), "core"
      elif name == "static":
        kind, level = "initial", common.rubric_level(text)
      else:
        kind, level = "dynamic", common.rubric_level(text, default="behavior")
      rubrics.append({"id": f"{name}-{k}", "kind": kind, "level": level, "text": text,
                      "source": name})
  unknown = sorted(k for k in ref if isinstance(k, str) and k.lower() not in LISTS)
  if unknown:
    problems.append(f"{where}: ignored evaluation-reference fields: {', '.join(unknown)}")
  return rubrics


def _str_field(obj: dict[str, Any], keys: Sequence[str]) -> str | None:
  _, value = common.first_key(obj, keys)
  return value.strip() if isinstance(value, str) and value.strip() else None


def item_to_task(obj: dict[str, Any], where: str, problems: list[str]):
  """One MiniAppBench item as a Task (None, with problems recorded, when unusable)."""
  _, query = common.first_key(obj, QUERY_KEYS)
  if not isinstance(query, str) or not query.strip():
    problems.append(f"{where}: no query (looked for {', '.join(QUERY_KEYS)}); item skipped")
    return None
  _, ref = common.first_key(obj, REF_KEYS)
  if isinstance(ref, str):
    try:
      ref = json.loads(ref)
    except ValueError:
      pass
  if not isinstance(ref, dict):
    ref = {k: v for k, v in obj.items() if isinstance(k, str) and k.lower() in LISTS}
    if not ref:
      problems.append(f"{where}: no evaluation reference with intention/static/dynamic "
                      f"(looked for {', '.join(REF_KEYS)}); item skipped")
      return None
  rubrics = _rubrics(ref, where, problems)
  if not rubrics:
    problems.append(f"{where}: no readable evaluation items; item skipped")
    return None
  _, raw_id = common.first_key(obj, ID_KEYS)
  line = where.rsplit(":", 1)[-1].strip().replace("item ", "")
  tid = (str(raw_id).strip() if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool)
         and str(raw_id).strip() else line)
  difficulty = _str_field(obj, DIFFICULTY_KEYS)
  if difficulty is not None:
    if difficulty.lower() in DIFFICULTIES:
      difficulty = DIFFICULTIES[difficulty.lower()]
    else:
      problems.append(f"{where}: unknown difficulty {difficulty!r}; left unset")
      difficulty = None
  task: dict[str, Any] = {"id": f"miniappbench-{tid}", "request": query,
                          "category": _str_field(obj, DOMAIN_KEYS), "difficulty": difficulty,
                          "rubrics": rubrics, "benchmark": "miniappbench",
                          "subclass": _str_field(obj, SUBCLASS_KEYS)}
  return common.make_task({k: v for k, v in task.items() if v is not None}, where, problems)


def load(path: str | os.PathLike) -> common.Loaded:
  """Reads every item it can; `problems` lists (FILE:LINE) what it could not read."""
  return common.load_items(path, item_to_task)


def main(argv: Sequence[str] | None = None) -> int:
  return common.cli("miniappbench", load, argv)


if __name__ == "__main__":
  sys.exit(main())
