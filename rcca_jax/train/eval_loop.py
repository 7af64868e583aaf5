"""Evaluation of the current policy on a task split (dev by default).

Greedy (or low-temperature) responses are evaluated in the worker pool; the summary
has the mean reward, each gate's pass rate, the pass rate (a sample passes when all
its task's rubrics pass) and the same per family, category and difficulty. With
`samples_per_request` > 0 it also has the sampled pass@1: that many samples per request
at `sample_temperature`, graded by the same grader; `pass_at_1` is the mean over
requests of the share of their samples that pass, `sampled_reward_mean` the samples'
mean reward, `sampled_gates_pass` their all-gates rate, `pass_at_1_tasks` the share
per request and `sampled_families` the samples' `record_stats` per family (a policy
whose greedy apps run may sample apps that do not: RL learns only from the samples);
with at least 4 samples per request also `pass_at_4` (the unbiased estimator). Writes
`responses.jsonl`, `evaluations.jsonl`, `report.html` (the credit view of a few
samples), with samples `sampled.jsonl`, and last `summary.json` into the output
directory, each atomically.
"""

from __future__ import annotations

import collections
import json
import os
import time
import zlib
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rcca_jax.credit import report
from rcca_jax.data import jsonl
from rcca_jax.data.tasks import family_of
from rcca_jax.evaluation.grader import Grader
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import sections


# Summary key -> how a task is grouped; flat metric names get `PREFIX/GROUP/` (families
# keep their bare `FAMILY/` names).
GROUPINGS = (("families", family_of, ""),
             ("categories", lambda t: t.category or "unknown", "category/"),
             ("difficulties", lambda t: t.difficulty or "unknown", "difficulty/"))
# Summary entries that are tables, not metrics (left out of the flat row and headline).
TABLES = tuple(key for key, _, _ in GROUPINGS) + ("splits", "sites", "pass_at_1_tasks",
                                                  "sampled_families")
# Sampled pass@k reported when every request has at least k samples.
PASS_AT_K = (1, 4, 8, 16)


def summarize(rollouts: Sequence[rollouts_lib.Rollout]) -> dict[str, Any]:
  """Overall `record_stats`, the sample count, and the stats per family, category and
  difficulty (each with its sample count `n`), and per split where tasks name one
  (`extra["split"]`: the copying families' dev and novel-word requests)."""
  summary = rollouts_lib.record_stats([r.record for r in rollouts])
  summary["samples"] = len(rollouts)
  for key, group_of, _ in GROUPINGS:
    groups = collections.defaultdict(list)
    for r in rollouts:
      groups[group_of(r.task)].append(r.record)
    summary[key] = {g: {**rollouts_lib.record_stats(recs), "n": len(recs)}
                    for g, recs in sorted(groups.items())}
  splits = collections.defaultdict(list)  # copying families' draws (data.draws)
  for r in rollouts:
    if (r.task.extra or {}).get("split"):
      splits[r.task.extra["split"]].append(r.record)
  if splits:
    summary["splits"] = {g: {**rollouts_lib.record_stats(recs), "n": len(recs)}
                         for g, recs in sorted(splits.items())}
  return summary


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
  """The summary as flat metric names (`FAMILY/pass_rate`, `category/C/pass_rate`,
  `difficulty/D/pass_rate`, the samples' `sampled/FAMILY/gates_pass`, ...)."""
  out = {k: v for k, v in summary.items() if k not in TABLES}
  tables = [(summary[key], prefix) for key, _, prefix in GROUPINGS]
  tables.append((summary.get("splits", {}), "split/"))
  tables.append((summary.get("sampled_families", {}), "sampled/"))
  for table, prefix in tables:
    for group, stats in table.items():
      for name in ("reward_mean", "gates_pass", "pass_rate"):
        out[f"{prefix}{group}/{name}"] = stats[name]
  return out


def headline(summary: dict[str, Any]) -> dict[str, Any]:
  """The summary without its per-group tables (one printable line)."""
  return {k: v for k, v in summary.items() if k not in TABLES}


def sample_seed(seed: int, stage: str, step: int) -> int:
  """The sampled pass@1's seed of an evaluation: fixed by the run's seed, the stage
  ("sft", "rl", ...) and the step, so every arm of a seed draws alike."""
  rng = np.random.default_rng([seed, zlib.crc32(stage.encode()), step])
  return int(rng.integers(0, 2**31 - 1))


def pass_at_k(n: int, c: int, k: int) -> float:
  """The unbiased pass@k of a request with `c` of `n` samples passing: the chance
  that `k` of them drawn without replacement hold a pass, 1 - C(n-c, k) / C(n, k)."""
  if n - c < k:
    return 1.0
  return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_stats(rollouts: Sequence[rollouts_lib.Rollout]) -> dict[str, Any]:
  """`pass_at_1` (mean over requests of the share of their samples passing every
  rubric), `pass_at_K` for K in `PASS_AT_K` up to the fewest samples of a request
  (the unbiased estimator, `pass_at_k`), `distinct_passing_mean` (distinct passing
  response texts per request), `sampled_reward_mean` (over samples with a reward),
  `sampled_gates_pass`, `pass_at_1_tasks` and `sampled_families`."""
  records = [r.record or {} for r in rollouts]
  passed, by_family = collections.defaultdict(list), collections.defaultdict(list)
  passing_texts = collections.defaultdict(set)
  for r, record in zip(rollouts, records):
    passed[r.task.id].append(rollouts_lib.passed_all(record))
    by_family[family_of(r.task)].append(record)
    if passed[r.task.id][-1]:
      passing_texts[r.task.id].add(r.text)
  shares = {tid: float(np.mean(p)) for tid, p in passed.items()}
  rewards = [r.reward for r in rollouts if r.reward is not None]
  out = {"pass_at_1": float(np.mean(list(shares.values()))) if shares else 0.0}
  fewest = min((len(p) for p in passed.values()), default=0)
  for k in PASS_AT_K:
    if 1 < k <= fewest:
      out[f"pass_at_{k}"] = float(np.mean([pass_at_k(len(p), sum(p), k)
                                           for p in passed.values()]))
  out["distinct_passing_mean"] = (float(np.mean([len(passing_texts[t]) for t in passed]))
                                  if passed else 0.0)
  return {**out, "sampled_reward_mean": float(np.mean(rewards)) if rewards else 0.0,
          "sampled_gates_pass": rollouts_lib.record_stats(records)["gates_pass"],
          "pass_at_1_tasks": shares,
          "sampled_families": {f: {**rollouts_lib.record_stats(recs), "n": len(recs)}
                               for f, recs in sorted(by_family.items())}}


def sampled_pass(sampler: Any, tokenizer: Any, tasks: Sequence[Any], pool: Grader, *,
                 n: int, max_new_tokens: int, temperature: float, seed: int,
                 prompts_per_call: int) -> tuple[dict[str, Any], list]:
  """`n` samples per task (`prompts_per_call` tasks per sampler call, so the RL step's
  shapes are reused), graded; `pass_stats` and the rollouts."""
  rollouts = []
  for i, lo in enumerate(range(0, len(tasks), prompts_per_call)):
    rollouts += rollouts_lib.sample(sampler, tokenizer, tasks[lo:lo + prompts_per_call],
                                    n=n, max_new_tokens=max_new_tokens,
                                    temperature=temperature,
                                    seed=(seed + 7919 * i) % (2**31 - 1))
  rollouts_lib.evaluate(pool, rollouts)
  return pass_stats(rollouts), rollouts


def write_outputs(out_dir: str, rollouts: Sequence[rollouts_lib.Rollout],
                  summary: dict[str, Any], *, num_reports: int, title: str,
                  sampled: Sequence[rollouts_lib.Rollout] = ()) -> None:
  """Writes the output files, each atomically (a kill never leaves half a file);
  `summary.json` last, so its presence means the others are complete. Temp files
  that a killed earlier write left are removed."""
  os.makedirs(out_dir, exist_ok=True)
  for name in os.listdir(out_dir):
    if name.startswith(jsonl.TMP_PREFIX):
      os.remove(os.path.join(out_dir, name))
  with jsonl.atomic_writer(os.path.join(out_dir, "responses.jsonl")) as f:
    for r in rollouts:
      f.write(json.dumps({"task_id": r.task.id, "sample_id": r.sample_id,
                          "response": r.text}) + "\n")
  with jsonl.atomic_writer(os.path.join(out_dir, "evaluations.jsonl")) as f:
    for r in rollouts:
      f.write(json.dumps(r.record) + "\n")
  with jsonl.atomic_writer(os.path.join(out_dir, "report.html")) as f:
    f.write(report.render_report(_report_items(rollouts, num_reports), title=title))
  if sampled:
    with jsonl.atomic_writer(os.path.join(out_dir, "sampled.jsonl")) as f:
      for r in sampled:
        passed = rollouts_lib.passed_all(r.record or {})
        f.write(json.dumps({"task_id": r.task.id, "sample_id": r.sample_id,
                            "reward": r.reward, "passed": passed,
                            "gates": (r.record or {}).get("gates"),
                            "response": r.text}) + "\n")
  with jsonl.atomic_writer(os.path.join(out_dir, "summary.json")) as f:
    json.dump(summary, f, indent=1)


def _report_items(rollouts: Sequence[rollouts_lib.Rollout],
                  num_reports: int) -> list[report.ReportItem]:
  """A few samples for the credit report, spread over families, worst reward first."""
  picked, seen = [], set()
  for r in sorted(rollouts, key=lambda r: (r.reward is None, r.reward or 0.0)):
    family = family_of(r.task)
    if family not in seen and len(picked) < num_reports:
      picked.append(r)
      seen.add(family)
  return [report.ReportItem(task_id=r.task.id, sample_id=r.sample_id, response=r.text,
                            offsets=r.offsets, weights=r.wbar, record=r.record)
          for r in picked]


def run_eval(sampler: Any, tokenizer: Any, tasks: Sequence[Any], pool: Grader, *,
             out_dir: str, max_new_tokens: int, temperature: float = 0.0,
             samples_per_task: int = 1, seed: int = 0,
             num_reports: int = sections.default("eval.num_reports"),
             title: str = "evaluation",
             weights: dict[str, float] | None = None, samples_per_request: int = 0,
             sample_temperature: float = 1.0, sample_seed: int = 0,
             prompts_per_call: int = 1,
             extra: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
  """Samples, evaluates and writes the outputs; returns the summary. `weights`: the
  diagnostic weights of the credit report (`credit.diagnostic_weights` keywords);
  `samples_per_request` > 0 adds the sampled pass@1 (`sampled_pass`; `sampled_s` its
  seconds); `extra` entries (e.g. the site metrics) are added to the summary."""
  rollouts = rollouts_lib.sample(sampler, tokenizer, tasks, n=samples_per_task,
                                 max_new_tokens=max_new_tokens, temperature=temperature,
                                 seed=seed)
  rollouts_lib.evaluate(pool, rollouts, weights=weights)
  summary = summarize(rollouts)
  sampled: list = []
  if samples_per_request:
    t0 = time.time()
    stats, sampled = sampled_pass(
        sampler, tokenizer, tasks, pool, n=samples_per_request,
        max_new_tokens=max_new_tokens, temperature=sample_temperature, seed=sample_seed,
        prompts_per_call=prompts_per_call)
    summary.update(stats, samples_per_request=samples_per_request,
                   sampled_s=time.time() - t0)
  summary.update(extra or {})
  write_outputs(out_dir, rollouts, summary, num_reports=num_reports, title=title,
                sampled=sampled)
  return summary
