"""Evaluation of the current policy on a task split (dev by default).

Greedy (or low-temperature) responses are evaluated in the worker pool; the summary
has the mean reward, each gate's pass rate, the pass rate (a sample passes when all
its task's rubrics pass) and the same per family. Writes `responses.jsonl`,
`evaluations.jsonl`, `summary.json` and `report.html` (the credit view of a few
samples) into the output directory.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any, Sequence

from rcca_jax.credit import report
from rcca_jax.data.tasks import family_of
from rcca_jax.evaluation.grader import Grader
from rcca_jax.train import rollouts as rollouts_lib


def summarize(rollouts: Sequence[rollouts_lib.Rollout]) -> dict[str, Any]:
  """Overall and per-family `record_stats`, plus the sample count."""
  summary = rollouts_lib.record_stats([r.record for r in rollouts])
  summary["samples"] = len(rollouts)
  by_family = collections.defaultdict(list)
  for r in rollouts:
    by_family[family_of(r.task)].append(r.record)
  summary["families"] = {f: rollouts_lib.record_stats(recs)
                         for f, recs in sorted(by_family.items())}
  return summary


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
  """The summary as flat metric names (per family: `FAMILY/pass_rate`, ...)."""
  out = {k: v for k, v in summary.items() if k != "families"}
  for family, stats in summary["families"].items():
    for name in ("reward_mean", "gates_pass", "pass_rate"):
      out[f"{family}/{name}"] = stats[name]
  return out


def write_outputs(out_dir: str, rollouts: Sequence[rollouts_lib.Rollout],
                  summary: dict[str, Any], *, num_reports: int, title: str) -> None:
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "responses.jsonl"), "w", encoding="utf-8") as f:
    for r in rollouts:
      f.write(json.dumps({"task_id": r.task.id, "sample_id": r.sample_id,
                          "response": r.text}) + "\n")
  with open(os.path.join(out_dir, "evaluations.jsonl"), "w", encoding="utf-8") as f:
    for r in rollouts:
      f.write(json.dumps(r.record) + "\n")
  with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  # A few samples per report, spread over families, worst reward first.
  picked, seen = [], set()
  for r in sorted(rollouts, key=lambda r: (r.reward is None, r.reward or 0.0)):
    family = family_of(r.task)
    if family not in seen and len(picked) < num_reports:
      picked.append(r)
      seen.add(family)
  items = [report.ReportItem(task_id=r.task.id, sample_id=r.sample_id, response=r.text,
                             offsets=r.offsets, weights=r.wbar, record=r.record)
           for r in picked]
  with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
    f.write(report.render_report(items, title=title))


def run_eval(sampler: Any, tokenizer: Any, tasks: Sequence[Any], pool: Grader, *,
             out_dir: str, max_new_tokens: int, temperature: float = 0.0,
             samples_per_task: int = 1, seed: int = 0, num_reports: int = 4,
             title: str = "evaluation",
             weights: dict[str, float] | None = None) -> dict[str, Any]:
  """Samples, evaluates and writes the outputs; returns the summary. `weights`: the
  diagnostic weights of the credit report (`credit.diagnostic_weights` keywords)."""
  rollouts = rollouts_lib.sample(sampler, tokenizer, tasks, n=samples_per_task,
                                 max_new_tokens=max_new_tokens, temperature=temperature,
                                 seed=seed)
  rollouts_lib.evaluate(pool, rollouts, weights=weights)
  summary = summarize(rollouts)
  write_outputs(out_dir, rollouts, summary, num_reports=num_reports, title=title)
  return summary
