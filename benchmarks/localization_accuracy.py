"""Mutation benchmark of code localization (issue 3 acceptance).

python benchmarks/localization_accuracy.py [--tasks data/examples/tasks.jsonl data/tasks/*.jsonl]
    [--max-apps 40] [--workers 2] [--seed 0] [--per-operator N] [--operators OP ...]
    [--tokenizer data/tokenizer] [--json OUT] [--save-records FILE | --load-records FILE]

Applies the bug operators of `rcca_jax.credit.mutations` (all of them by default, the
policy-failure ones `EXTRA_OPERATORS` included) to every task's reference app,
evaluates reference and mutants with the real evaluator (process pool, headless
Chromium), localizes each detected mutant (reward < 1) and reports:
  recall(direct)            bug span overlaps a direct span of some issue
  recall(direct or context) ... or a context span
  direct share              direct characters / app characters (mean over mutants)
  cost                      localization + tokenization + alignment time per response,
                            relative to the evaluation time of that response
per operator, for all apps and again for the apps of held-out families (families with no
task in the train split). A deleted binding leaves an empty bug span at position p; it
counts as covered by a span that touches the run of whitespace around p. Undetected
mutants (reward 1) are reported, not scored.
The reference apps themselves are the baseline: apps whose reference does not score 1.0
are left out.
`--save-records FILE` writes the graded (not yet localized) records with their responses;
`--load-records FILE` scores such a file again without grading (the localizer changed, the
apps did not); the task and mutant options are then read from the file.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time

import numpy as np
from transformers import AutoTokenizer

from rcca_jax.base.schema import merge_spans
from rcca_jax.credit import mutations
from rcca_jax.credit.align import diagnostic_weights
from rcca_jax.credit.localize import localize_record
from rcca_jax.data import train_tokenizer
from rcca_jax.data.tasks import load_tasks
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import EvalPool, Job


def covered(bug: tuple[int, int], spans, text: str) -> bool:
  """Whether a span overlaps the bug; an empty bug (deleted text) at p is covered by a
  span that touches the whitespace run around p."""
  s, e = bug
  if e == s:
    while s > 0 and text[s - 1].isspace():
      s -= 1
    while e < len(text) and text[e].isspace():
      e += 1
    return any(a <= e and s <= b for a, b in spans)
  return any(a < e and s < b for a, b in spans)


def share(spans, html_span) -> float:
  lo, hi = html_span
  inside = sum(max(0, min(b, hi) - max(a, lo)) for a, b in merge_spans(spans))
  return inside / max(1, hi - lo)


def pick_apps(tasks, limit: int, seed: int):
  """Up to `limit` tasks, round-robin over families (the id without its last `-part`),
  each family's tasks in a seeded order; deterministic."""
  families = collections.defaultdict(list)
  for t in {t.id: t for t in tasks}.values():
    families[t.id.rsplit("-", 1)[0]].append(t)
  queues = []
  for name in sorted(families):
    group = sorted(families[name], key=lambda t: t.id)
    random.Random(f"{seed}:{name}").shuffle(group)
    queues.append(group)
  out = []
  while len(out) < limit and any(queues):
    for q in queues:
      if q and len(out) < limit:
        out.append(q.pop(0))
  return out


TARGET_OPERATORS = ("rename_id", "wrong_event", "syntax", "hang", "handler_op", "misspell_id",
                    "throw")


def family(task_id: str) -> str:
  return task_id.rsplit("-", 1)[0]


def table(rows, counts, title: str) -> None:
  """Per operator: mutants, undetected, detected, direct recall, direct-or-context recall,
  mean direct share (detected mutants)."""
  print(f"\n{title}")
  print(f"{'operator':<14}{'mutants':>8}{'undetected':>11}{'detected':>9}"
        f"{'recall(direct)':>16}{'recall(d|c)':>13}{'direct share':>14}")
  for op in mutations.ALL_OPERATORS:
    mine = [r for r in rows if r["operator"] == op]
    if not mine and not counts.get(op):
      continue
    n = max(1, len(mine))
    print(f"{op:<14}{counts[op]['mutants']:>8}{counts[op]['undetected']:>11}{len(mine):>9}"
          f"{100 * sum(r['direct_hit'] for r in mine) / n:>15.1f}%"
          f"{100 * sum(r['any_hit'] for r in mine) / n:>12.1f}%"
          f"{100 * np.mean([r['direct_share'] for r in mine] or [0]):>13.1f}%")
  n = max(1, len(rows))
  print(f"{'all':<14}{sum(c['mutants'] for c in counts.values()):>8}"
        f"{sum(c['undetected'] for c in counts.values()):>11}{len(rows):>9}"
        f"{100 * sum(r['direct_hit'] for r in rows) / n:>15.1f}%"
        f"{100 * sum(r['any_hit'] for r in rows) / n:>12.1f}%"
        f"{100 * np.mean([r['direct_share'] for r in rows] or [0]):>13.1f}%")


def grade(args) -> dict | None:
  """Reference apps and their mutants, graded: the inputs of scoring (None: no apps)."""
  tasks = pick_apps([t for path in train_tokenizer.input_files(args.tasks)
                     for t in load_tasks(path) if t.reference], args.max_apps, args.seed)
  if not tasks:
    return None
  jobs, meta = [], []
  for task in tasks:
    jobs.append(Job(task, task.reference, 0))
    meta.append((task.id, None))
    for k, m in enumerate(mutations.mutants(task.reference, seed=args.seed,
                                             per_operator=args.per_operator,
                                             operators=args.operators)):
      jobs.append(Job(task, m.response, k + 1))
      meta.append((task.id, m))
  print(f"{len(tasks)} reference apps, {len(jobs) - len(tasks)} mutants; evaluating with "
        f"{args.workers} workers ...", file=sys.stderr)
  start = time.monotonic()
  with EvalPool(EvalConfig(), workers=args.workers) as pool:
    records = list(pool.run(jobs))
  return {"n_tasks": len(tasks), "meta": meta, "responses": [j.response for j in jobs],
          "records": records, "wall": time.monotonic() - start, "workers": args.workers}


def save_graded(path: str, graded: dict) -> None:
  """One json line per response: task id, mutant (null for a reference app), record."""
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({"n_tasks": graded["n_tasks"], "wall": graded["wall"],
                        "workers": graded["workers"]}) + "\n")
    for (tid, m), response, rec in zip(graded["meta"], graded["responses"], graded["records"]):
      mutant = None if m is None else {"operator": m.operator, "bug_span": list(m.bug_span),
                                       "description": m.description}
      f.write(json.dumps({"task_id": tid, "mutant": mutant, "response": response,
                          "record": rec}) + "\n")


def load_graded(path: str) -> dict:
  """The inverse of `save_graded`."""
  with open(path, encoding="utf-8") as f:
    head, *lines = [json.loads(line) for line in f if line.strip()]
  meta = [(x["task_id"], None if x["mutant"] is None else mutations.Mutant(
      x["mutant"]["operator"], x["response"], tuple(x["mutant"]["bug_span"]),
      x["mutant"]["description"])) for x in lines]
  return {**head, "meta": meta, "responses": [x["response"] for x in lines],
          "records": [x["record"] for x in lines]}


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--tasks", nargs="+", default=list(train_tokenizer.DEFAULT_INPUTS))
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--per-operator", type=int, default=None,
                 help="at most this many mutants per operator and app (default: all)")
  p.add_argument("--operators", nargs="+", default=list(mutations.ALL_OPERATORS),
                 choices=mutations.ALL_OPERATORS)
  p.add_argument("--train", default="data/tasks/train.jsonl",
                 help="families with no task here are held out")
  p.add_argument("--max-apps", type=int, default=40,
                 help="at most this many reference apps, drawn round-robin over task families")
  p.add_argument("--tokenizer", default="data/tokenizer")
  p.add_argument("--json", help="also write per-mutant results here")
  saving = p.add_mutually_exclusive_group()
  saving.add_argument("--save-records", metavar="FILE",
                      help="write the graded records (before localization) here")
  saving.add_argument("--load-records", metavar="FILE",
                      help="score the records of --save-records instead of grading")
  args = p.parse_args()

  if args.load_records:
    graded = load_graded(args.load_records)
  else:
    graded = grade(args)
    if graded is None:
      print("no tasks with a reference app found", file=sys.stderr)
      return 2
    if args.save_records:
      save_graded(args.save_records, graded)
  n_tasks, meta, responses, records, wall = (graded["n_tasks"], graded["meta"],
                                             graded["responses"], graded["records"],
                                             graded["wall"])
  tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
  tokenizer(responses[0], return_offsets_mapping=True)     # warm-up, not timed

  train_families = {family(t.id) for t in load_tasks(args.train)}
  good_refs = {tid for (tid, m), r in zip(meta, records) if m is None and r["reward"] >= 1.0}
  bad_refs = sorted({tid for tid, m in meta if m is None} - good_refs)
  rows = []
  per_op = collections.defaultdict(lambda: collections.Counter())
  for (tid, m), rec, response in zip(meta, records, responses):
    if m is None or tid not in good_refs:
      continue
    stats = per_op[m.operator]
    stats["mutants"] += 1
    if rec["reward"] >= 1.0:
      stats["undetected"] += 1
      continue
    t0, c0 = time.perf_counter(), time.process_time()
    loc = localize_record(rec, response)
    enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
    diagnostic_weights(enc["offset_mapping"], loc["issues"])
    cost, cpu = time.perf_counter() - t0, time.process_time() - c0
    direct = [tuple(s) for i in loc["issues"] for s in i["direct"]]
    context = [tuple(s) for i in loc["issues"] for s in i["context"]]
    hit_d = covered(m.bug_span, direct, response)
    hit_c = hit_d or covered(m.bug_span, context, response)
    html_span = rec.get("html_span") or (0, len(response))
    eval_s = (rec.get("timing") or {}).get("total")
    rows.append({"task_id": tid, "operator": m.operator, "description": m.description,
                 "held_out": family(tid) not in train_families,
                 "bug_span": list(m.bug_span), "reward": rec["reward"], "direct_hit": hit_d,
                 "any_hit": hit_c, "direct_share": share(direct, html_span),
                 "localize_s": cost, "localize_cpu_s": cpu, "eval_s": eval_s})
    stats["detected"] += 1
    stats["direct"] += hit_d
    stats["any"] += hit_c

  if not rows:
    print("no detected mutants", file=sys.stderr)
    return 1
  print(f"\nevaluated {len(responses)} responses in {wall:.1f}s ({graded['workers']} workers); "
        f"reference apps scoring 1.0: {len(good_refs)}/{n_tasks}"
        + (f" (left out: {', '.join(bad_refs)})" if bad_refs else ""))
  held = [r for r in rows if r["held_out"]]
  print(f"held-out families: {', '.join(sorted({family(r['task_id']) for r in held})) or 'none'}")
  table(rows, per_op, "all apps")
  held_ops = collections.defaultdict(collections.Counter)
  for (tid, m), rec in zip(meta, records):
    if m is not None and tid in good_refs and family(tid) not in train_families:
      held_ops[m.operator]["mutants"] += 1
      held_ops[m.operator]["undetected"] += rec["reward"] >= 1.0
  if held:
    table(held, held_ops, "held-out families")
  n = len(rows)
  rd = sum(r["direct_hit"] for r in rows) / n
  ra = sum(r["any_hit"] for r in rows) / n
  ds = float(np.mean([r["direct_share"] for r in rows]))
  loc_s = np.array([r["localize_s"] for r in rows])
  loc_cpu = np.array([r["localize_cpu_s"] for r in rows])
  ev = np.array([r["eval_s"] if r["eval_s"] else wall * graded["workers"] / len(responses)
                 for r in rows])
  ratio = loc_s / ev
  low = [op for op in TARGET_OPERATORS if op in per_op and per_op[op]["detected"]
         and per_op[op]["direct"] / per_op[op]["detected"] < 0.8]
  print(f"\ndetected mutants: {n}   recall(direct) {100 * rd:.1f}%   recall(direct or context) "
        f"{100 * ra:.1f}% (target >= 95%)   direct recall < 80% (target: none of "
        f"{', '.join(TARGET_OPERATORS)}): {', '.join(low) or 'none'}")
  print(f"mean direct share of app characters: {100 * ds:.1f}% (target <= 12%)")
  print(f"localization+alignment per response: mean {1000 * loc_s.mean():.1f} ms vs evaluation "
        f"{1000 * ev.mean():.0f} ms -> {100 * loc_s.sum() / ev.sum():.2f}% of evaluation time "
        f"(target <= 2%); per-response ratio median {100 * np.median(ratio):.2f}%, "
        f"p95 {100 * np.percentile(ratio, 95):.2f}%, max {100 * ratio.max():.2f}%")
  print(f"  (CPU time of localization+alignment: mean {1000 * loc_cpu.mean():.1f} ms, median "
        f"{1000 * np.median(loc_cpu):.1f} ms; wall time above includes waiting for the CPU)")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
