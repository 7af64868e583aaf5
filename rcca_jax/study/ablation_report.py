"""The ablation's outputs: `summary.json`, `ablation.png` and `ablation.md`.

`collect` reads the `metrics.jsonl` files of an ablation directory (layout in
`study.ablation`); the table and plot are pure functions of the summary it returns:

  {"arms": {ARM: [{"seed", "post_sft": POINT, "evals": [{"step", **POINT}, ...],
                   "rl": {mean over RL steps of the logged diagnostics}}, ...]},
   "comparison": {ARM: paired differences against the baseline arm},
   "timing": {ARM: mean sample / evaluate / train seconds per RL step}, ...}

A POINT (one dev evaluation) has `pass_rate` and `reward_mean` (an RL one also `step`
and `rl_seconds`, the RL steps' wall seconds up to it), and, when the run
logged them, `bug_prob_mean`, `pass_at_1`, `sampled_reward_mean` and `sites` (the
evaluation's per-site records, `train.site_metrics`), and the row's metrics that
`ablation.point_keys` names; older runs load without them.
The comparison and its metrics are `study.stats` (`stats.compare(summary["arms"])`
recomputes every number of it from the summary alone).
"""

from __future__ import annotations

import fnmatch
import json
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rcca_jax.study.stats import (AUC_KEYS, BASELINE, BUG_PROB_THRESHOLD, EXACT_MAX, HALF,
                                  compare, curve, has_metric)
from rcca_jax.train import sections
from rcca_jax.train.run_log import read_rows

# RL-row diagnostics averaged over the steps of each run (docs/ablation.md#what-to-log).
DIAGNOSTICS = ("reward_mean", "pass_rate", "zero_advantage_groups", "abs_advantage",
               "blamed_token_share", "wbar_mean", "entropy", "clip_low", "clip_high",
               "ratio_min", "ratio_max", "logprob_gap", "kl", "bug_rate", "reference_rate",
               "bug_direct_recall", "bug_any_recall", "response_len",
               # The token weights the loss used (objective.loss_terms) and blame rates
               # (rollouts.blame_stats).
               "weight_mean", "weight_sq_mean", "zero_weight_share",
               "negative_token_share", "negative_weight_sum", "sibling_diff_rate",
               "oracle_fallback_rate")
TIMING = ("sample_s", "eval_s", "train_s", "step_s", "cache_hit_rate")
# Exact and sampled metrics of an evaluation (docs/ablation.md#metrics).
EXACT = ("bug_prob_mean", "pass_at_1", "sampled_reward_mean")


def _point(row: Mapping[str, Any], eval_dir: Optional[str] = None,
           keys: Sequence[str] = ()) -> dict[str, Any]:
  """One evaluation: its metrics row's values (those named by `keys`, shell patterns
  such as `split/*`, besides the standard ones) and, from its `summary.json` in
  `eval_dir` when there is one, the site records and, when `keys` holds
  "pass_at_1_tasks", each request's share of passing samples (pass@k per split or
  family, recomputed from the summary alone)."""
  out: dict[str, Any] = {"pass_rate": float(row["pass_rate"]),
                         "reward_mean": float(row["reward_mean"])}
  out.update({k: float(row[k]) for k in EXACT if row.get(k) is not None})
  out.update({k: float(v) for k, v in row.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)
              and any(fnmatch.fnmatchcase(k, pattern) for pattern in keys)})
  path = os.path.join(eval_dir, "summary.json") if eval_dir else ""
  if path and os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      summary = json.load(f)
    if summary.get("sites"):
      out["sites"] = summary["sites"]
    if "pass_at_1_tasks" in keys and summary.get("pass_at_1_tasks"):
      out["pass_at_1_tasks"] = summary["pass_at_1_tasks"]
  return out


# Written in a run's directory when its policy diverged (`ablation._run`).
DIVERGED = "diverged.json"


def point_keys(config: Any) -> tuple[str, ...]:
  """`ablation.point_keys`: patterns of the eval rows' metrics each summary point keeps
  besides the standard ones (the natural setting: per split and family, pass@k)."""
  if config is None or "ablation" not in config:
    return ()
  return tuple(config.ablation.get("point_keys", ()))


def shared_sft(config: Any) -> bool:
  """`ablation.shared_sft`: one SFT run (seed 0's) for every seed, whose RL runs differ
  by their seed (prompt order, sampling) alone; default one SFT per seed."""
  return bool(config is not None and "ablation" in config
              and config.ablation.get("shared_sft", False))


def sft_dir_of(workdir: str, seed: int, shared: bool) -> str:
  """The SFT run that seed `seed`'s arms start from."""
  return os.path.join(workdir, f"seed_{0 if shared else seed}", "sft")


def collect(workdir: str, arms: Sequence[str], seeds: int, config: Any = None
            ) -> dict[str, Any]:
  """The summary of whatever runs of `workdir` have results so far."""
  out: dict[str, Any] = {"arms": {}, "timing": {}}
  shared = shared_sft(config)
  keys = point_keys(config)
  if config is not None:
    out["setting"] = sections.value(config, "data.setting")
    out["config"] = json.loads(config.to_json_best_effort())
  for arm in arms:
    runs, timing = [], {k: [] for k in TIMING}
    for seed in range(seeds):
      sft_dir = sft_dir_of(workdir, seed, shared)
      sft = [r for r in read_rows(sft_dir)
             if r.get("stage") == "eval" and r.get("after") == "sft"]
      if not sft:
        continue
      arm_dir = os.path.join(workdir, f"seed_{seed}", arm)
      diverged = os.path.join(arm_dir, DIVERGED)
      if os.path.exists(diverged):   # no p_bug after it diverged: left out of comparisons
        with open(diverged, encoding="utf-8") as f:
          out.setdefault("diverged", {}).setdefault(arm, []).append(
              {"seed": seed, **json.load(f)})
        continue
      rows = read_rows(arm_dir)
      rl = [r for r in rows if r.get("stage") == "rl"]
      if not rl:  # not started (a shared SFT has every seed's post-SFT evaluation)
        continue
      evals = [dict(step=int(r["step"]), rl_seconds=_rl_seconds(rl, int(r["step"])),
                    **_point(r, os.path.join(arm_dir, "eval",
                                             f"rl_{int(r['step']):06d}"), keys))
               for r in rows if r.get("stage") == "eval" and r.get("after") == "rl"]
      diag = {k: float(np.mean([r[k] for r in rl if k in r]))
              for k in DIAGNOSTICS if any(k in r for r in rl)}
      for k in TIMING:
        timing[k] += [float(r[k]) for r in rl if k in r]
      post = _point(sft[-1], os.path.join(sft_dir, "eval",
                                          f"sft_{int(sft[-1]['step']):06d}"), keys)
      runs.append({"seed": seed, "post_sft": post, "evals": evals,
                   "rl_steps": len(rl), "rl": diag})
    out["arms"][arm] = runs
    out["timing"][arm] = {k: float(np.mean(v)) for k, v in timing.items() if v}
  out["comparison"] = compare(out["arms"])
  if out.get("setting") == "controlled":
    out["tasks"] = task_outcomes(workdir, arms, seeds, shared)
  return out


def _rl_seconds(rl: Sequence[Mapping[str, Any]], step: int) -> float:
  """Wall seconds of the RL steps up to `step` (sample + evaluate + train; the dev
  evaluations not included), from the rows' `step_s`."""
  return float(sum(float(r.get("step_s", 0.0)) for r in rl if int(r["step"]) <= step))


def _last_eval(run_dir: str, prefix: str) -> Optional[str]:
  """The run's last evaluation directory named `PREFIX*` (`sft_`, `rl_`), if any."""
  root = os.path.join(run_dir, "eval")
  names = sorted(n for n in os.listdir(root) if n.startswith(prefix)) if os.path.isdir(
      root) else []
  return os.path.join(root, names[-1]) if names else None


def _outcomes(eval_dir: str, tasks: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
  """Per task of one greedy evaluation: passed, and whether the response is the
  reference, the task's known mutant or something else."""
  from rcca_jax.credit import controlled  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import rollouts  # pylint: disable=import-outside-toplevel
  out = {}
  with open(os.path.join(eval_dir, "responses.jsonl"), encoding="utf-8") as f:
    responses = [json.loads(line) for line in f if line.strip()]
  with open(os.path.join(eval_dir, "evaluations.jsonl"), encoding="utf-8") as f:
    records = [json.loads(line) for line in f if line.strip()]
  for resp, record in zip(responses, records):
    task = tasks[resp["task_id"]]
    o = controlled.bug_outcome(task, resp["response"], record.get("issues") or [])
    kind = "bug" if o["bug"] else "reference" if o["reference"] else "other"
    out[task.id] = {"passed": rollouts.passed_all(record), "wrote": kind}
  return out


def task_outcomes(workdir: str, arms: Sequence[str], seeds: int,
                  shared: bool = False) -> dict[str, Any]:
  """Controlled setting: per task, its bug and rate, and over seeds how often greedy
  decoding passed (and wrote the reference / the bug) after SFT and after each arm."""
  from rcca_jax.credit import controlled  # pylint: disable=import-outside-toplevel
  from rcca_jax.data import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
  path = os.path.join(workdir, "controlled_tasks.jsonl")
  if not os.path.exists(path):
    return {}
  tasks = {t.id: t for t in tasks_lib.load_tasks(path)}
  table: dict[str, Any] = {}
  for tid, task in tasks.items():
    rec = controlled.info(task)
    table[tid] = {"operator": rec["operator"], "rate": rec["rate"],
                  "description": rec["description"], "post_sft": [], **{a: [] for a in arms}}
  for seed in range(seeds):
    runs = [("post_sft", _last_eval(sft_dir_of(workdir, seed, shared), "sft_"))]
    runs += [(arm, _last_eval(os.path.join(workdir, f"seed_{seed}", arm), "rl_"))
             for arm in arms]
    for column, eval_dir in runs:
      if eval_dir:
        for tid, o in _outcomes(eval_dir, tasks).items():
          table[tid][column].append(o)
  return table


def task_markdown(table: Mapping[str, Any], arms: Sequence[str]) -> str:
  """One row per controlled task: passes over seeds after SFT and after each arm."""
  if not table:
    return ""
  def cell(outcomes):
    if not outcomes:
      return "–"
    passed = sum(o["passed"] for o in outcomes)
    bugs = sum(o["wrote"] == "bug" for o in outcomes)
    return f"{passed}/{len(outcomes)} (bug {bugs})"
  lines = ["| task | bug | mutant rate | post-SFT passed | " + " | ".join(
      f"{a} passed" for a in arms) + " |", "|---|---|---|---|" + "---|" * len(arms)]
  for tid, row in table.items():
    lines.append(f"| {tid} | {row['operator']} | {row['rate']} | {cell(row['post_sft'])} | "
                 + " | ".join(cell(row[a]) for a in arms) + " |")
  return "\n".join(lines) + "\n"


def fmt(x: Optional[float], digits: int = 3) -> str:
  return "–" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _paired_cell(test: Optional[Mapping[str, Any]]) -> str:
  if not test:
    return "–"
  lo, hi = test["interval"]
  return f"{test['mean']:+.3f} [{fmt(lo)}, {fmt(hi)}], p={fmt(test['p'])}"


def exact_markdown(comp: Mapping[str, Any]) -> list[str]:
  """Lines of the exact-metric table (none when no run has the metrics)."""
  arms = [(a, c) for a, c in comp.items() if any(f"auc_{k}" in c for k in AUC_KEYS)]
  if not arms:
    return []
  lines = ["", "Exact site metric (p_bug: the policy's teacher-forced probability of each "
           "bug against the correct code, lower is better) and sampled pass@1; AUC = mean "
           "over the evaluations incl. post-SFT; Δ against "
           f"`{BASELINE}` paired by seed [95% bootstrap interval], two-sided sign-flip p:",
           "", "| arm | post-SFT p_bug | final p_bug | AUC p_bug | Δ AUC p_bug | "
           f"steps to p_bug < {BUG_PROB_THRESHOLD} | site-level Δ AUC p_bug | "
           "post-SFT pass@1 | final pass@1 | AUC pass@1 | Δ AUC pass@1 |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for arm, c in arms:
    steps = c.get("steps_to_bug_prob", {}).get("per_seed")
    steps_text = ("–" if steps is None else
                  ", ".join("never" if x is None else str(x) for x in steps))
    site = c.get("site_test")
    site_text = ("–" if not site else f"{site['mean']:+.3f} ({site['units']} units, "
                 f"{site['seeds']} seeds), p={fmt(site['p'])}")
    lines.append(
        f"| {arm} | {fmt(c.get('post_sft_bug_prob_mean'))} | "
        f"{fmt(c.get('final_bug_prob_mean'))} | {fmt(c.get('auc_bug_prob_mean'))} | "
        f"{_paired_cell(c.get('paired_auc_bug_prob_mean'))} | {steps_text} | {site_text} | "
        f"{fmt(c.get('post_sft_pass_at_1'))} | {fmt(c.get('final_pass_at_1'))} | "
        f"{fmt(c.get('auc_pass_at_1'))} | {_paired_cell(c.get('paired_auc_pass_at_1'))} |")
  lines += half_markdown(comp)
  lines += match_markdown(comp)
  lines += ["", "Site-level test: units are (seed, task, bug site); difference = the unit's "
            "AUC of p_bug, arm − baseline; sign flips per unit, statistic stratified by "
            f"seed (mean of per-seed means); exact up to {EXACT_MAX} units, else Monte "
            "Carlo. Units within a seed share its runs (not independent)."]
  return lines


def ratio_cell(test: Optional[Mapping[str, Any]]) -> str:
  if not test or "geomean" not in test:
    return "–"
  lo, hi = test["interval"]
  never = [f"{len(test[k])} {k.replace('_', ' ')}" for k in ("arm_never", "baseline_never")
           if test[k]]
  n = len(test["seeds"])
  return (f"{test['geomean']:.2f} [{lo:.2f}, {hi:.2f}] ({n} seed{'s' * (n != 1)}"
          + "".join(f"; {part}" for part in never) + ")")


def half_markdown(comp: Mapping[str, Any]) -> list[str]:
  """Lines of the steps-saved table: per arm, RL steps and seconds until mean p_bug is
  below HALF of post-SFT, and the ratios to the baseline's."""
  return _steps_table(
      comp, "steps_to_half", "half",
      f"Steps saved: RL steps (and RL wall seconds, dev evaluations excluded) until the "
      f"run's mean p_bug is first below {HALF} x its post-SFT value, at the evaluated "
      f"steps (never: not within the horizon); ratio to `{BASELINE}` paired by seed, "
      "geometric mean [95% bootstrap interval] over the seeds where both got there:")


def match_markdown(comp: Mapping[str, Any]) -> list[str]:
  """Lines of the second steps-saved table: per arm, RL steps and seconds until mean
  p_bug is at or below the baseline's final value of the same seed, and the ratios to
  the baseline's own."""
  return _steps_table(
      comp, "steps_to_baseline_bug_prob", "match",
      f"Steps to `{BASELINE}`'s result: RL steps (and seconds) until the run's mean p_bug "
      f"is first at or below `{BASELINE}`'s final value of the same seed; ratio to "
      f"`{BASELINE}`'s own steps to it, paired by seed, as above:")


def _steps_table(comp: Mapping[str, Any], entry: str, prefix: str, title: str
                 ) -> list[str]:
  """Per arm with `entry` (per-seed steps and seconds), those and the `prefix`_steps /
  seconds ratios to the baseline."""
  arms = [(a, c) for a, c in comp.items() if entry in c]
  if not arms:
    return []
  lines = ["", title, "",
           "| arm | steps per seed | seconds per seed | steps ratio | seconds ratio |",
           "|---|---|---|---|---|"]
  for arm, c in arms:
    steps = ", ".join("never" if x is None else str(x) for x in c[entry]["steps"])
    seconds = ", ".join("never" if x is None else f"{x:.0f}" for x in c[entry]["seconds"])
    lines.append(f"| {arm} | {steps} | {seconds} | "
                 f"{ratio_cell(c.get(f'{prefix}_steps_ratio'))} | "
                 f"{ratio_cell(c.get(f'{prefix}_seconds_ratio'))} |")
  return lines


# The RL-diagnostics tables of `markdown`: (title, row keys).
DIAGNOSTIC_TABLES = (
    ("RL diagnostics", ("zero_advantage_groups", "blamed_token_share", "bug_rate",
                        "bug_direct_recall", "bug_any_recall", "entropy", "clip_low",
                        "clip_high")),
    ("Token weights of the loss (per response token; negative_weight_sum / "
     "negative_token_share is the mean weight on failed responses)",
     ("weight_mean", "weight_sq_mean", "zero_weight_share", "negative_token_share",
      "negative_weight_sum", "sibling_diff_rate")))


def diagnostics_markdown(arms: Mapping[str, Sequence[Mapping[str, Any]]], title: str,
                         keys: Sequence[str]) -> list[str]:
  """A table of `keys` averaged over steps and seeds per arm (none when no run logged
  any of them)."""
  if not any(k in r.get("rl", {}) for runs in arms.values() for r in runs for k in keys):
    return []
  lines = ["", f"{title} (mean over steps and seeds):", "",
           "| arm | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
  for arm, runs in arms.items():
    vals = []
    for k in keys:
      xs = [r["rl"][k] for r in runs if k in r.get("rl", {})]
      vals.append(fmt(float(np.mean(xs)) if xs else None))
    lines.append(f"| {arm} | " + " | ".join(vals) + " |")
  return lines


def markdown(summary: Mapping[str, Any]) -> str:
  """The result table, the paired differences and the step-time split."""
  comp = summary.get("comparison", {})
  lines = ["| arm | seeds | post-SFT pass | final pass | gain [95% CI] | final reward | "
           "steps to GRPO's final pass |", "|---|---|---|---|---|---|---|"]
  for arm, c in comp.items():
    lo, hi = c["gain_interval"]
    reached = c.get("steps_to_baseline_final")
    steps = ("–" if reached is None else ", ".join("never" if s is None else str(s)
                                                  for s in reached))
    lines.append(f"| {arm} | {c['seeds']} | {fmt(c['post_sft_pass_rate'])} | "
                 f"{fmt(c['final_pass_rate'])} | {fmt(c['gain'])} [{fmt(lo)}, "
                 f"{fmt(hi)}] | {fmt(c['final_reward_mean'])} | {steps} |")
  paired = [(a, c) for a, c in comp.items() if "paired_pass_rate_diff" in c]
  if paired:
    lines += ["", f"Paired differences against `{BASELINE}` (same seed, final evaluation; "
              "95% bootstrap interval over seeds):", "",
              "| arm | Δ pass rate [CI] | per seed | Δ reward [CI] | Δ pass AUC [CI] |",
              "|---|---|---|---|---|"]
    for arm, c in paired:
      plo, phi = c["paired_pass_rate_diff_interval"]
      rlo, rhi = c["paired_reward_mean_diff_interval"]
      per_seed = ", ".join(f"{d:+.3f}" for d in c["paired_pass_rate_diff_per_seed"])
      a = c.get("paired_auc_pass_rate")  # absent from summaries written before it
      auc_cell = (f"{a['mean']:+.3f} [{fmt(a['interval'][0])}, {fmt(a['interval'][1])}]"
                  if a else "–")
      lines.append(f"| {arm} | {c['paired_pass_rate_diff']:+.3f} [{fmt(plo)}, {fmt(phi)}]"
                   f" | {per_seed} | {c['paired_reward_mean_diff']:+.3f} "
                   f"[{fmt(rlo)}, {fmt(rhi)}] | {auc_cell} |")
  lines += exact_markdown(comp)
  timing = summary.get("timing", {})
  if timing:
    lines += ["", "Seconds per RL step (mean) and the grading cache's hit rate:", "",
              "| arm | sample | evaluate | train | step | cache hits |",
              "|---|---|---|---|---|---|"]
    for arm, t in timing.items():
      lines.append(f"| {arm} | " + " | ".join(fmt(t.get(k), 1) for k in TIMING[:-1])
                   + f" | {fmt(t.get('cache_hit_rate'), 2)} |")
  arms = summary.get("arms", {})
  for title, keys in DIAGNOSTIC_TABLES:
    lines += diagnostics_markdown(arms, title, keys)
  for arm, runs in (summary.get("diverged") or {}).items():
    for run in runs:
      lines += ["", f"**{arm}, seed {run['seed']}: diverged** after RL step "
                f"{run['rl_steps_done']} ({run['error']}); left out of this table's "
                f"comparisons, which pair the other seeds."]
  if summary.get("tasks"):
    lines += ["", "Greedy dev outcome per task, over seeds (passed / seeds; how often it "
              "wrote the known bug):", "", task_markdown(summary["tasks"], list(arms))]
  return "\n".join(lines) + "\n"


def plot(summary: Mapping[str, Any], path: str) -> None:
  """Dev pass rate and reward (and, when every run has them, mean p_bug and sampled
  pass@1) against the RL step: mean line and min–max band over seeds, one colour per
  arm."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  panels = [("pass_rate", "dev pass rate (greedy)"), ("reward_mean", "dev reward")]
  runs_all = [r for runs in summary["arms"].values() for r in runs]
  panels += [(key, label) for key, label in (("bug_prob_mean", "mean p_bug (exact)"),
                                             ("pass_at_1", "sampled pass@1"))
             if runs_all and all(has_metric(r, key) for r in runs_all)]
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8))
  for ax, (key, label) in zip(axes, panels):
    for arm, runs in summary["arms"].items():
      curves = [curve(r, key) for r in runs]
      if not curves:
        continue
      n = min(len(s) for s, _ in curves)
      steps = curves[0][0][:n]
      values = np.stack([v[:n] for _, v in curves])
      seeds = f"{len(runs)} seed" + ("s" if len(runs) > 1 else "")
      line, = ax.plot(steps, values.mean(axis=0), marker="o", label=f"{arm} ({seeds})")
      ax.fill_between(steps, values.min(axis=0), values.max(axis=0), alpha=0.2,
                      color=line.get_color())
    ax.set_xlabel("RL step")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
  axes[0].legend(loc="best")
  fig.suptitle(f"GRPO vs RCCA ({summary.get('setting', '')} setting)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def write_all(workdir: str, summary: Mapping[str, Any]) -> None:
  with open(os.path.join(workdir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  with open(os.path.join(workdir, "ablation.md"), "w", encoding="utf-8") as f:
    f.write(markdown(summary))
  if any(summary["arms"].values()):
    plot(summary, os.path.join(workdir, "ablation.png"))
