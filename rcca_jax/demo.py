"""`make demo`: evaluates the shipped examples (data/examples) with 2 workers.

Prints one row per response (reward, the expected reward, gates, failed rubrics) and
the run summary. Records go to `--out` (default: a temporary file).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

from rcca_jax import evaluate
from rcca_jax.credit.localize import localize_record
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import EvalPool

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "examples"


def _gates(record: dict) -> str:
  mark = {True: "ok", False: "FAIL", None: "-"}
  return " ".join(f"{g[0].upper()}:{mark[v]}" for g, v in record["gates"].items())


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m rcca_jax.demo", description=__doc__)
  parser.add_argument("--examples", default=str(EXAMPLES))
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--out", default=None)
  args = parser.parse_args(argv)
  root = pathlib.Path(args.examples)
  tasks = tasks_lib.load_tasks(root / "tasks.jsonl")
  jobs = evaluate.make_jobs(tasks, responses_lib.load_responses(root / "responses.jsonl"))
  expected = []
  if (root / "expected.jsonl").exists():
    expected = [json.loads(l) for l in (root / "expected.jsonl").read_text().splitlines() if l]
  out_path = args.out or os.path.join(tempfile.mkdtemp(prefix="rcca_demo_"), "evaluations.jsonl")
  summary = evaluate.Summary()
  start = time.monotonic()
  print(f"{'task':14s} {'sample':>6s} {'variant':26s} {'reward':>6s} {'expect':>6s}  "
        f"{'gates':22s} failed rubrics")
  with EvalPool(EvalConfig(), workers=args.workers, post_process=localize_record) as pool, \
      open(out_path, "w", encoding="utf-8") as out:
    for i, record in enumerate(pool.run(jobs)):
      out.write(json.dumps(record, ensure_ascii=False) + "\n")
      summary.add(record)
      exp = expected[i] if i < len(expected) else {}
      failed = ", ".join(f"{r['id']}:{r['severity']}" for r in record["rubrics"]
                         if r["passed"] is False) or "-"
      want = f"{exp['reward']:.2f}" if "reward" in exp else ""
      print(f"{record['task_id']:14s} {record['sample_id']:>6d} {exp.get('variant', ''):26s} "
            f"{record['reward']:6.2f} {want:>6s}  {_gates(record):22s} {failed}")
  print(summary.line())
  print(f"{summary.count} responses in {time.monotonic() - start:.1f}s with {args.workers} "
        f"workers; records: {out_path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
