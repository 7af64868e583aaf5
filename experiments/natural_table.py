"""The natural setting's base -> SFT -> RL table (issue 38): greedy pass, sampled pass@1
and pass@4, reward and gate rate per stage, split and family, from the `summary.json`
of evaluations run with `eval.samples_per_request >= 4`.

    python experiments/natural_table.py "base:dev=W/eval/base_000000_dev" \
        "SFT:dev=W/eval/sft_006000_dev" "RL grpo:dev=A/seed_0/grpo/eval/rl_000040_dev,..." \
        [--json OUT]

Each argument is STAGE:SPLIT=DIR[,DIR...]; several directories (seeds) are averaged,
and `n` counts their runs. Per-family pass@k comes from the summary's
`pass_at_1_tasks` (each request's share of passing samples) with the unbiased
estimator (`eval_loop.pass_at_k`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rcca_jax.data import draws
from rcca_jax.train import eval_loop

KEYS = ("pass_rate", "pass_at_1", "pass_at_4", "reward_mean", "gates_pass")
HEADER = ("greedy pass", "pass@1", "pass@4", "reward", "gates")


def family_values(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
  """{"all": ..., FAMILY: ...} -> the `KEYS` of one evaluation's summary."""
  n = int(summary["samples_per_request"])
  by_family: dict[str, list[float]] = {}
  for task_id, share in summary["pass_at_1_tasks"].items():
    by_family.setdefault(draws.family_of_id(task_id), []).append(share)
  out = {"all": {k: float(summary[k]) for k in KEYS}}
  for family, greedy in sorted(summary["families"].items()):
    shares = by_family.get(family, [])
    out[family] = {
        "pass_rate": float(greedy["pass_rate"]),
        "pass_at_1": float(np.mean(shares)),
        "pass_at_4": float(np.mean([eval_loop.pass_at_k(n, round(s * n), 4)
                                    for s in shares])),
        "reward_mean": float(greedy["reward_mean"]),
        "gates_pass": float(greedy["gates_pass"])}
  return out


def table(entries: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]]
          ) -> list[dict[str, Any]]:
  """Rows (stage, split, family, runs, KEYS) of (stage, split, summaries) entries, the
  summaries of one entry averaged."""
  rows = []
  for stage, split, summaries in entries:
    values = [family_values(s) for s in summaries]
    for family in values[0]:
      rows.append({"stage": stage, "split": split, "family": family,
                   "runs": len(values),
                   **{k: float(np.mean([v[family][k] for v in values])) for k in KEYS}})
  return rows


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
  lines = ["| stage | split | family | runs | " + " | ".join(HEADER) + " |",
           "|---|---|---|---|" + "---|" * len(KEYS)]
  for r in rows:
    lines.append(f"| {r['stage']} | {r['split']} | {r['family']} | {r['runs']} | "
                 + " | ".join(f"{r[k]:.3f}" for k in KEYS) + " |")
  return "\n".join(lines) + "\n"


def _entry(arg: str) -> tuple[str, str, list[dict[str, Any]]]:
  label, _, dirs = arg.partition("=")
  stage, _, split = label.rpartition(":")
  if not (stage and split and dirs):
    raise SystemExit(f"{arg!r}: expected STAGE:SPLIT=DIR[,DIR...]")
  summaries = []
  for d in dirs.split(","):
    path = os.path.join(d, "summary.json")
    with open(path, encoding="utf-8") as f:
      summary = json.load(f)
    if int(summary.get("samples_per_request", 0)) < 4:
      raise SystemExit(f"{path}: no pass@4 (samples_per_request "
                       f"{summary.get('samples_per_request', 0)} < 4)")
    summaries.append(summary)
  return stage, split, summaries


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  p.add_argument("entries", nargs="+", help="STAGE:SPLIT=DIR[,DIR...]")
  p.add_argument("--json", default="", help="also write the rows here")
  args = p.parse_args(argv)
  rows = table([_entry(a) for a in args.entries])
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)
  sys.stdout.write(markdown(rows))
  return 0


if __name__ == "__main__":
  sys.exit(main())
