"""Issue 54's study report, from the study's `summary.json` alone.

    python experiments/natural_v2_report.py DIR/summary.json [--json OUT]

The study (`python -m rcca_jax.study --config=experiments/natural_v2.py:rl`) keeps of
each evaluation the metrics `natural_v2.POINT_KEYS` names, among them the greedy pass
rate per split and each request's share of passing samples at RL's start and end
(`pass_at_1_tasks`, 16 samples). From those this prints, per arm and over seeds:
greedy pass on dev requests whose ids are made of train words (`split/dev`, where the
gain target holds) post-SFT and at the end, the gain with its 95% bootstrap interval;
pass@1/4/16 on those requests at RL's start and end (does RL only sharpen, or widen
too?); gates, copy entropy and distinct passing apps; per family; and, paired by seed
against GRPO (and `rcca_focus` against its placebo: does the blame's location matter
here?), the differences in the dev pass AUC, the final dev pass, the final pass@16 and
the final greedy gates on dev, each with its interval and sign-flip p.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from rcca_jax.study import stats
from rcca_jax.train import eval_loop

DEV = "split/dev/pass_rate"
BASELINE = "grpo"
# Further pairs (arm, baseline) beside every arm against BASELINE.
PAIRS = (("rcca_focus", "rcca_focus_placebo"),)
PASS_K = (1, 4, 16)
_NOVEL_ID = re.compile(r"-f\d+-n\d{6}$")


def split_of_id(task_id: str) -> str:
  """`novel` for a request whose ids use words no train request has, else `dev`."""
  return "novel" if _NOVEL_ID.search(task_id) else "dev"


def pass_at(point: Mapping[str, Any], k: int, split: str = "dev") -> Optional[float]:
  """pass@k over `split`'s requests of one evaluation (the unbiased estimator on each
  request's `samples_per_request` samples); None where it did not sample k."""
  shares, n = point.get("pass_at_1_tasks"), int(point.get("samples_per_request", 0))
  if not shares or n < k:
    return None
  values = [eval_loop.pass_at_k(n, round(s * n), k) for t, s in shares.items()
            if split_of_id(t) == split]
  return float(np.mean(values)) if values else None


def _last(run: Mapping[str, Any]) -> Mapping[str, Any]:
  return run["evals"][-1] if run["evals"] else run["post_sft"]


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
  known = [v for v in values if v is not None]
  return float(np.mean(known)) if known else None


def arm_row(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """One arm over its seeds: dev pass post-SFT and final, the gain (mean, per seed,
  95% bootstrap interval), pass@k at start and end, gates, copy entropy, distinct
  passing apps, RL steps."""
  gains = [stats.final(r, DEV) - r["post_sft"][DEV] for r in runs]
  row: dict[str, Any] = {
      "seeds": [r["seed"] for r in runs],
      "rl_steps": [r["rl_steps"] for r in runs],
      "post_sft": float(np.mean([r["post_sft"][DEV] for r in runs])),
      "final": float(np.mean([stats.final(r, DEV) for r in runs])),
      "gain": float(np.mean(gains)), "gain_per_seed": gains,
      "gain_interval": stats.bootstrap_interval(gains),
      "auc": float(np.mean([stats.auc(r, DEV) for r in runs])),
      "best": float(np.mean([max(stats.curve(r, DEV)[1]) for r in runs])),
  }
  for k in PASS_K:
    row[f"post_sft_pass_at_{k}"] = _mean([pass_at(r["post_sft"], k) for r in runs])
    row[f"final_pass_at_{k}"] = _mean([pass_at(_last(r), k) for r in runs])
  for key in ("split/dev/gates_pass", "gates_pass", "copy/dev/entropy_w1",
              "copy/dev/copied_w1", "distinct_passing_mean", "split/novel/pass_rate"):
    row[f"post_sft_{key}"] = _mean([r["post_sft"].get(key) for r in runs])
    row[f"final_{key}"] = _mean([_last(r).get(key) for r in runs])
  return row


def paired_row(runs: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]]
               ) -> dict[str, Any]:
  """Per-seed differences against the baseline's runs (`stats.paired`)."""
  def by_seed(rs, value):
    return {r["seed"]: value(r) for r in rs}
  measures = {"auc": lambda r: stats.auc(r, DEV),
              "final": lambda r: stats.final(r, DEV),
              "final_pass_at_16": lambda r: pass_at(_last(r), 16),
              "final_gates": lambda r: _last(r).get("split/dev/gates_pass")}
  return {name: stats.paired(by_seed(runs, f), by_seed(base, f))
          for name, f in measures.items()}


def family_rows(summary: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
  """Per arm and family: greedy pass post-SFT and final, mean over seeds."""
  out: dict[str, dict[str, dict[str, float]]] = {}
  for arm, runs in summary["arms"].items():
    if not runs:
      continue
    families = sorted(k[:-len("/pass_rate")] for k in runs[0]["post_sft"]
                      if k.endswith("_copy/pass_rate") and k.count("/") == 1)
    out[arm] = {f: {"post_sft": float(np.mean([r["post_sft"][f"{f}/pass_rate"]
                                               for r in runs])),
                    "final": float(np.mean([_last(r)[f"{f}/pass_rate"] for r in runs]))}
                for f in families}
  return out


def report(summary: Mapping[str, Any]) -> dict[str, Any]:
  arms = {a: runs for a, runs in summary["arms"].items() if runs}
  base = arms.get(BASELINE, [])
  return {"arms": {a: arm_row(runs) for a, runs in arms.items()},
          "paired": {a: paired_row(runs, base) for a, runs in arms.items()
                     if a != BASELINE and base},
          "pairs": {f"{a} - {b}": paired_row(arms[a], arms[b]) for a, b in PAIRS
                    if a in arms and b in arms},
          "families": family_rows(summary)}


def _f(x: Optional[float]) -> str:
  return "–" if x is None else f"{x:.3f}"


def _test(t: Optional[Mapping[str, Any]]) -> str:
  if not t:
    return "–"
  lo, hi = t["interval"]
  return f"{t['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] p={t['p']:.2f} (n={len(t['seeds'])})"


def markdown(rep: Mapping[str, Any]) -> str:
  lines = ["Greedy pass on dev requests with train-word ids (60), post-SFT and at the "
           "end; gain with its 95% bootstrap interval over seeds:", "",
           "| arm | seeds | steps | post-SFT | final | gain [95% CI] | per seed | best | "
           "AUC |", "|---|---|---|---|---|---|---|---|---|"]
  for arm, r in rep["arms"].items():
    lo, hi = r["gain_interval"]
    lines.append(
        f"| {arm} | {len(r['seeds'])} | {', '.join(map(str, r['rl_steps']))} | "
        f"{_f(r['post_sft'])} | {_f(r['final'])} | {r['gain']:+.3f} [{lo:+.3f}, "
        f"{hi:+.3f}] | {', '.join(f'{g:+.3f}' for g in r['gain_per_seed'])} | "
        f"{_f(r['best'])} | {_f(r['auc'])} |")
  lines += ["", "Sampled pass@k on the same requests (16 samples each at the RL "
            "temperature), distinct passing apps per request (over all dev requests, "
            "novel-word ones included), greedy gates, entropy at the first word of "
            "each id, novel-word pass:", "",
            "| arm | pass@1 | pass@4 | pass@16 | distinct passing | gates | entropy w1 | "
            "novel pass |", "|---|---|---|---|---|---|---|---|"]
  for arm, r in rep["arms"].items():
    cells = [f"{_f(r[f'post_sft_{k}'])} -> {_f(r[f'final_{k}'])}" for k in
             ("pass_at_1", "pass_at_4", "pass_at_16", "distinct_passing_mean",
              "split/dev/gates_pass", "copy/dev/entropy_w1", "split/novel/pass_rate")]
    lines.append(f"| {arm} | " + " | ".join(cells) + " |")
  if rep["paired"]:
    lines += ["", f"Paired by seed against `{BASELINE}` (mean [95% bootstrap interval], "
              "two-sided sign-flip p):", "",
              "| arm | Δ AUC dev pass | Δ final dev pass | Δ final pass@16 | "
              "Δ final gates |", "|---|---|---|---|---|"]
    pairs = {**rep["paired"], **rep.get("pairs", {})}
    for arm, p in pairs.items():
      lines.append(f"| {arm} | {_test(p['auc'])} | {_test(p['final'])} | "
                   f"{_test(p['final_pass_at_16'])} | {_test(p['final_gates'])} |")
  families = rep["families"]
  if families:
    names = sorted({f for rows in families.values() for f in rows})
    lines += ["", "Greedy pass per family (all its dev requests), post-SFT -> final:", "",
              "| arm | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for arm, rows in families.items():
      lines.append(f"| {arm} | " + " | ".join(
          f"{_f(rows[f]['post_sft'])} -> {_f(rows[f]['final'])}" if f in rows else "–"
          for f in names) + " |")
  return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  p.add_argument("summary", help="the study's summary.json")
  p.add_argument("--json", default="", help="also write the report here")
  args = p.parse_args(argv)
  with open(args.summary, encoding="utf-8") as f:
    rep = report(json.load(f))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(rep, f, indent=1)
  sys.stdout.write(markdown(rep))
  return 0


if __name__ == "__main__":
  sys.exit(main())
