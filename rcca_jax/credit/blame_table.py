"""A hand-checkable table of what the localizer blamed in failed responses: per sampled
failed response, the first issue (a failed gate's or rubric's), the text of its direct
spans, and the response's lines that differ from the task's reference app, with
whether the blame touches one of them.

    python -m rcca_jax.credit.blame_table EVAL_DIR --tasks TASKS.jsonl [--n 20]
        [--seed 0] [--json OUT]

EVAL_DIR is an evaluation directory (`responses.jsonl` and `evaluations.jsonl`, as
`--mode=eval` and the dev evaluations write them). A line "differs" when its stripped
text occurs nowhere in the reference; in a family's template apps these are the lines
where the response departs from a correct app, so they are where its faults can be
(a wrong value, a wrong id, a missing handler). The `actual fault` column is left for
the reader.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rcca_jax.data import chat
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import failures

_SHOWN = 80  # characters of a span or line shown in a cell


def differing_lines(response: str, reference: str) -> list[tuple[int, int]]:
  """[start, end) response offsets of its non-empty lines whose stripped text is not a
  line of `reference` (the reference answer, fenced as SFT teaches it)."""
  known = {line.strip() for line in reference.splitlines()}
  out, pos = [], 0
  for line in response.splitlines(keepends=True):
    if line.strip() and line.strip() not in known:
      out.append((pos, pos + len(line.rstrip("\n"))))
    pos += len(line)
  return out


def _overlaps(spans: Sequence[Sequence[int]], ranges: Sequence[tuple[int, int]]) -> bool:
  return any(a < hi and lo < b for a, b in spans for lo, hi in ranges)


def _cell(text: str) -> str:
  text = " ".join(text.split()).replace("|", "\\|")
  return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


def first_issue(record: Mapping[str, Any]) -> dict[str, Any] | None:
  """The issue that explains the response's failure: the failed gate's, else the first
  failed rubric's."""
  issues = [i for i in record.get("issues") or [] if i.get("direct")]
  failed = {r["id"] for r in record.get("rubrics") or [] if r.get("passed") is False}
  for issue in issues:
    if issue.get("stage") in ("source", "runtime") or issue.get("rubric_id") in failed:
      return issue
  return None


def rows(eval_dir: str, tasks: Mapping[str, tasks_lib.Task], n: int,
         seed: int) -> list[dict[str, Any]]:
  """Up to `n` failed responses of `eval_dir`, drawn with `seed`, as table rows."""
  records = failures.read_records(eval_dir)
  with open(os.path.join(eval_dir, "responses.jsonl"), encoding="utf-8") as f:
    responses = {(r["task_id"], r["sample_id"]): r["response"]
                 for r in map(json.loads, filter(str.strip, f))}
  failed = [r for r in records
            if not failures.classify(r, tasks[r["task_id"]])["passed"]
            and first_issue(r) is not None]
  picked = random.Random(seed).sample(failed, min(n, len(failed)))
  out = []
  for record in sorted(picked, key=lambda r: (r["task_id"], r["sample_id"])):
    task = tasks[record["task_id"]]
    text = responses[(record["task_id"], record["sample_id"])]
    issue = first_issue(record)
    rubric = {r.id: r for r in task.rubrics}.get(issue.get("rubric_id"))
    differs = differing_lines(text, chat.format_response(task.reference or ""))
    cause = failures.classify(record, task)
    out.append({
        "task_id": record["task_id"], "sample_id": record["sample_id"],
        "failed": (f"{rubric.level}: {rubric.text}" if rubric
                   else f"{issue['stage']} gate: {issue.get('message', '')}"),
        "cause": cause["gate"] or next((c for rid, *_, c in cause["rubrics"]
                                        if rid == issue.get("rubric_id")), "?"),
        "blamed": [text[a:b] for a, b in issue["direct"]],
        "differing": [text[a:b] for a, b in differs],
        "blame_on_difference": _overlaps(issue["direct"], differs)})
  return out


def markdown(table: Sequence[Mapping[str, Any]]) -> str:
  lines = ["| task | failed | cause | blamed (direct) | differs from the reference | "
           "blame on a difference | actual fault |", "|" + "---|" * 7]
  for r in table:
    lines.append(
        f"| {r['task_id']}#{r['sample_id']} | {_cell(r['failed'])} | {r['cause']} | "
        f"{'<br>'.join(_cell(s) for s in r['blamed'][:2])} | "
        f"{'<br>'.join(_cell(s) for s in r['differing'][:2]) or '(none)'} | "
        f"{'yes' if r['blame_on_difference'] else 'no'} |  |")
  hits = sum(r["blame_on_difference"] for r in table)
  lines.append(f"\nBlame touches a differing line in {hits} of {len(table)} responses.")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("eval_dir")
  p.add_argument("--tasks", required=True)
  p.add_argument("--n", type=int, default=20)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  tasks = {t.id: t for t in tasks_lib.load_tasks(args.tasks)}
  table = rows(args.eval_dir, tasks, args.n, args.seed)
  print(markdown(table))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(table, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
