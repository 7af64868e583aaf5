"""Corpus quality: reference apps pass, and mutants of them fail (rubrics are not vacuous).

python benchmarks/corpus_quality.py [--tasks-per-family 1] [--per-operator 6] [--workers 2]
    [--families counter tabs ...] [--json OUT]

For each family it draws tasks, evaluates the reference app (the baseline: it must score
1.0) and every mutant from `rcca_jax.credit.mutations` (at most `--per-operator` per
operator) with the real evaluator pool. A mutant is killed when its reward is below 1.0;
"by rubric" counts the kills where all gates passed and a rubric failed. Prints the kill
rate per family and per operator.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time

from rcca_jax.credit import mutations
from rcca_jax.data import chat
from rcca_jax.data.families import FAMILIES
from rcca_jax.evaluation.pool import EvalPool, Job


def _jobs(families, tasks_per_family: int, per_operator: int, seed: int):
  """(job, family, operator) triples; operator None marks the unmutated reference."""
  out = []
  for name in families:
    for i in range(tasks_per_family):
      task = FAMILIES[name].generate(random.Random(f"quality:{seed}:{name}:{i}"), i)
      response = chat.format_response(task.reference)
      out.append((Job(task, response, 0), name, None))
      for k, m in enumerate(mutations.mutants(response, seed=seed, per_operator=per_operator), 1):
        out.append((Job(task, m.response, k), name, m.operator))
  return out


def measure(families, tasks_per_family: int = 1, per_operator: int = 6, workers: int = 2,
            seed: int = 0) -> dict:
  """Runs the evaluation; returns per-family and per-operator counts."""
  jobs = _jobs(families, tasks_per_family, per_operator, seed)
  start = time.monotonic()
  with EvalPool(workers=workers) as pool:
    records = list(pool.run([j for j, _, _ in jobs]))
  elapsed = time.monotonic() - start
  fam = collections.defaultdict(lambda: collections.Counter())
  ops = collections.defaultdict(lambda: collections.Counter())
  survivors = []
  for (job, name, op), rec in zip(jobs, records):
    if op is None:
      fam[name]["refs"] += 1
      fam[name]["refs_ok"] += rec["reward"] == 1.0
      continue
    killed = rec["reward"] < 1.0
    by_rubric = killed and all(rec["gates"].values()) and any(
        r["passed"] is False for r in rec["rubrics"])
    for c in (fam[name], ops[op]):
      c["mutants"] += 1
      c["killed"] += killed
      c["by_rubric"] += by_rubric
    if not killed:
      survivors.append({"task_id": job.task.id, "operator": op, "sample_id": job.sample_id})
  return {"families": {k: dict(v) for k, v in fam.items()},
          "operators": {k: dict(v) for k, v in ops.items()},
          "survivors": survivors, "evaluations": len(jobs), "seconds": elapsed}


def _rate(c: dict) -> str:
  return f"{c.get('killed', 0) / max(1, c.get('mutants', 0)):6.1%}"


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--tasks-per-family", type=int, default=1)
  p.add_argument("--per-operator", type=int, default=6)
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--families", nargs="*", default=list(FAMILIES))
  p.add_argument("--json", help="write the full result here")
  args = p.parse_args(argv)
  res = measure(args.families, args.tasks_per_family, args.per_operator, args.workers, args.seed)
  print(f"{'family':24s} refs_ok  mutants  killed  by_rubric  kill_rate")
  tot = collections.Counter()
  for name in args.families:
    c = res["families"][name]
    tot.update(c)
    print(f"{name:24s} {c['refs_ok']:3d}/{c['refs']:<3d} {c.get('mutants', 0):7d} "
          f"{c.get('killed', 0):7d} {c.get('by_rubric', 0):10d}  {_rate(c)}")
  print(f"{'TOTAL':24s} {tot['refs_ok']:3d}/{tot['refs']:<3d} {tot['mutants']:7d} "
        f"{tot['killed']:7d} {tot['by_rubric']:10d}  {_rate(tot)}")
  for op, c in sorted(res["operators"].items()):
    print(f"operator {op:14s} mutants {c['mutants']:4d} killed {c['killed']:4d} ({_rate(c)})")
  print(f"baseline (unmutated references scoring 1.0): {tot['refs_ok']}/{tot['refs']}; "
        f"kill rate vs baseline false-alarm rate: {_rate(tot)} vs "
        f"{1 - tot['refs_ok'] / max(1, tot['refs']):.1%}")
  print(f"{res['evaluations']} evaluations in {res['seconds']:.0f} s "
        f"({res['seconds'] / max(1, res['evaluations']):.2f} s each, {args.workers} workers)")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(res, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
