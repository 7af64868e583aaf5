"""Evaluation of the current policy on a task split (dev by default).

Greedy (or low-temperature) responses are evaluated in the worker pool; the summary
has the mean reward, each gate's pass rate, the pass rate (a sample passes when all
its task's rubrics pass) and the same per family, category and difficulty. Writes
`responses.jsonl`, `evaluations.jsonl`, `summary.json` and `report.html` (the credit
view of a few samples) into the output directory.
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


# Summary key -> how a task is grouped; flat metric names get `PREFIX/GROUP/` (families
# keep their bare `FAMILY/` names).
GROUPINGS = (("families", family_of, ""),
             ("categories", lambda t: t.category or "unknown", "category/"),
             ("difficulties", lambda t: t.difficulty or "unknown", "difficulty/"))


def summarize(rollouts: Sequence[rollouts_lib.Rollout]) -> dict[str, Any]:
  """Overall `record_stats`, the sample count, and the stats per family, category and
  difficulty (each with its sample count `n`)."""
  summary = rollouts_lib.record_stats([r.record for r in rollouts])
  summary["samples"] = len(rollouts)
  for key, group_of, _ in GROUPINGS:
    groups = collections.defaultdict(list)
    for r in rollouts:
      groups[group_of(r.task)].append(r.record)
    summary[key] = {g: {**rollouts_lib.record_stats(recs), "n": len(recs)}
                    for g, recs in sorted(groups.items())}
  return summary


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
  """The summary as flat metric names (`FAMILY/pass_rate`, `category/C/pass_rate`,
  `difficulty/D/pass_rate`, ...)."""
  keys = [key for key, _, _ in GROUPINGS]
  out = {k: v for k, v in summary.items() if k not in keys}
  for key, _, prefix in GROUPINGS:
    for group, stats in summary[key].items():
      for name in ("reward_mean", "gates_pass", "pass_rate"):
        out[f"{prefix}{group}/{name}"] = stats[name]
  return out


def headline(summary: dict[str, Any]) -> dict[str, Any]:
  """The summary without its per-group tables (one printable line)."""
  return {k: v for k, v in summary.items() if k not in [key for key, _, _ in GROUPINGS]}


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
