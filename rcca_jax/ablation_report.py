"""The ablation's outputs: `summary.json`, `ablation.png` and `ablation.md`.

`collect` reads the `metrics.jsonl` files of an ablation directory (layout in
`rcca_jax.ablation`); the rest is pure functions of the summary it returns:

  {"arms": {ARM: [{"seed", "post_sft": POINT, "evals": [{"step", **POINT}, ...],
                   "rl": {mean over RL steps of the logged diagnostics}}, ...]},
   "comparison": {ARM: paired differences against the baseline arm},
   "timing": {ARM: mean sample / evaluate / train seconds per RL step}, ...}

A POINT (one dev evaluation) has `pass_rate` and `reward_mean` (an RL one also `step`
and `rl_seconds`, the RL steps' wall seconds up to it), and, when the run
logged them, `bug_prob_mean`, `pass_at_1`, `sampled_reward_mean` and `sites` (the
evaluation's per-site records, `train.site_metrics`); older runs load without them.
`compare(summary["arms"])` recomputes every number of the comparison from the summary
alone. Exact metrics (docs/ablation.md#metrics): per run, the area under the curve (mean over the
evaluations, post-SFT included) of `bug_prob_mean` (lower is better) and `pass_at_1`,
the steps until `bug_prob_mean` < 0.1, and the RL steps and seconds until it is below
half its post-SFT value (`reaches_fraction`) and until it is at or below the baseline's
final value of the same seed (`reaches_value`: the baseline's result at its horizon, a
measure that exists where the baseline never halves); against the baseline, per-seed
paired differences with a bootstrap interval and a two-sided paired sign-flip p-value,
the steps-saved ratios (`ratio_test`), and a site-level test over (seed, bug site) units
(see `site_test`).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rcca_jax.train import sections
from rcca_jax.train.run_log import read_rows

BASELINE = "grpo"
# RL-row diagnostics averaged over the steps of each run (docs/ablation.md#what-to-log).
DIAGNOSTICS = ("reward_mean", "pass_rate", "zero_advantage_groups", "abs_advantage",
               "blamed_token_share", "wbar_mean", "entropy", "clip_low", "clip_high",
               "ratio_min", "ratio_max", "logprob_gap", "kl", "bug_rate", "reference_rate",
               "bug_direct_recall", "bug_any_recall", "response_len",
               # The token weights the loss used (grpo.policy_loss_terms) and blame rates
               # (rollouts.blame_stats).
               "weight_mean", "weight_sq_mean", "zero_weight_share",
               "negative_token_share", "negative_weight_sum", "sibling_diff_rate",
               "oracle_fallback_rate")
TIMING = ("sample_s", "eval_s", "train_s", "step_s", "cache_hit_rate")
# Exact and sampled metrics of an evaluation (docs/ablation.md#metrics).
EXACT = ("bug_prob_mean", "pass_at_1", "sampled_reward_mean")
AUC_KEYS = ("bug_prob_mean", "pass_at_1")
BUG_PROB_THRESHOLD = 0.1
# Steps saved: the first evaluation whose mean p_bug is below this fraction of the run's
# post-SFT value (docs/ablation.md#metrics).
HALF = 0.5
EXACT_MAX = 16  # sign-flip p-values by enumeration up to this many units


def _point(row: Mapping[str, Any], eval_dir: Optional[str] = None) -> dict[str, Any]:
  """One evaluation: its metrics row's values and, from its `summary.json` in
  `eval_dir` when there is one, the site records."""
  out: dict[str, Any] = {"pass_rate": float(row["pass_rate"]),
                         "reward_mean": float(row["reward_mean"])}
  out.update({k: float(row[k]) for k in EXACT if row.get(k) is not None})
  path = os.path.join(eval_dir, "summary.json") if eval_dir else ""
  if path and os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      sites = json.load(f).get("sites")
    if sites:
      out["sites"] = sites
  return out


# Written in a run's directory when its policy diverged (`ablation._run`).
DIVERGED = "diverged.json"


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
      evals = [dict(step=int(r["step"]), rl_seconds=_rl_seconds(rl, int(r["step"])),
                    **_point(r, os.path.join(arm_dir, "eval",
                                             f"rl_{int(r['step']):06d}")))
               for r in rows if r.get("stage") == "eval" and r.get("after") == "rl"]
      diag = {k: float(np.mean([r[k] for r in rl if k in r]))
              for k in DIAGNOSTICS if any(k in r for r in rl)}
      for k in TIMING:
        timing[k] += [float(r[k]) for r in rl if k in r]
      post = _point(sft[-1], os.path.join(sft_dir, "eval",
                                          f"sft_{int(sft[-1]['step']):06d}"))
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


def final(run: Mapping[str, Any], key: str = "pass_rate") -> float:
  """The last evaluation's value (post-SFT when RL has not been evaluated yet)."""
  return run["evals"][-1][key] if run["evals"] else run["post_sft"][key]


def curve(run: Mapping[str, Any], key: str) -> tuple[np.ndarray, np.ndarray]:
  """(steps, values) with the post-SFT evaluation as step 0."""
  steps = [0] + [e["step"] for e in run["evals"]]
  values = [run["post_sft"][key]] + [e[key] for e in run["evals"]]
  return np.asarray(steps), np.asarray(values, np.float64)


def steps_to(run: Mapping[str, Any], threshold: float, key: str = "pass_rate"
             ) -> Optional[int]:
  """First evaluated step (0 = post-SFT) whose value reaches `threshold`."""
  for step, value in zip(*curve(run, key)):
    if value >= threshold - 1e-9:
      return int(step)
  return None


def steps_below(run: Mapping[str, Any], threshold: float, key: str = "bug_prob_mean"
                ) -> Optional[int]:
  """First evaluated step (0 = post-SFT) whose value is below `threshold`; None if
  none is (or the run has no such metric)."""
  if not has_metric(run, key):
    return None
  for step, value in zip(*curve(run, key)):
    if value < threshold:
      return int(step)
  return None


def reaches_fraction(run: Mapping[str, Any], fraction: float = HALF,
                     key: str = "bug_prob_mean") -> Optional[tuple[int, float]]:
  """(RL step, RL wall seconds) of the first evaluation whose `key` is below `fraction`
  of the run's post-SFT value; None if none is within the run (or it lacks `key`, or
  the evaluations carry no `rl_seconds`)."""
  if not has_metric(run, key):
    return None
  threshold = fraction * run["post_sft"][key]
  return _first_rl_point(run, key, lambda v: v < threshold)


def reaches_value(run: Mapping[str, Any], target: float, key: str = "bug_prob_mean"
                  ) -> Optional[tuple[int, float]]:
  """(RL step, RL wall seconds) of the first RL evaluation whose `key` is at or below
  `target` (e.g. the baseline's final value); None if none is (or it lacks `key`)."""
  if not has_metric(run, key):
    return None
  return _first_rl_point(run, key, lambda v: v <= target)


def _first_rl_point(run: Mapping[str, Any], key: str, passes: Any
                    ) -> Optional[tuple[int, float]]:
  for point in run["evals"]:
    if passes(point[key]):
      return (int(point["step"]), float(point.get("rl_seconds", float("nan"))))
  return None


def ratio_test(values: Mapping[int, Optional[float]], base: Mapping[int, Optional[float]]
               ) -> dict[str, Any]:
  """Per-seed ratios values / base over the seeds where both are known and positive,
  their geometric mean and its 95% bootstrap interval (of the mean log ratio), and the
  seeds left out because one side never got there."""
  seeds = sorted(s for s in values if values[s] and base.get(s))
  ratios = [values[s] / base[s] for s in seeds]
  out: dict[str, Any] = {
      "seeds": seeds, "per_seed": ratios,
      "arm_never": sorted(s for s in values if s in base and values[s] is None),
      "baseline_never": sorted(s for s in values if s in base and base[s] is None)}
  if ratios:
    logs = np.log(ratios)
    lo, hi = bootstrap_interval(logs)
    out.update(geomean=float(np.exp(np.mean(logs))),
               interval=(float(np.exp(lo)), float(np.exp(hi))))
  return out


def has_metric(run: Mapping[str, Any], key: str) -> bool:
  """Whether every evaluation of the run (post-SFT included) has `key`."""
  return all(key in p for p in [run["post_sft"], *run["evals"]])


def auc(run: Mapping[str, Any], key: str) -> Optional[float]:
  """Area under the curve: the mean of `key` over the evaluations, post-SFT included
  (None when an evaluation lacks it)."""
  return float(np.mean(curve(run, key)[1])) if has_metric(run, key) else None


def site_aucs(run: Mapping[str, Any]) -> dict[tuple[str, str], float]:
  """(task_id, site) -> mean p_bug over the evaluations, for the bug sites present in
  every evaluation of the run."""
  points = [run["post_sft"], *run["evals"]]
  values: dict[tuple[str, str], list[float]] = {}
  for point in points:
    for rec in point.get("sites") or []:
      if rec.get("kind") == "bug" and rec.get("p_bug") is not None:
        values.setdefault((rec["task_id"], rec["site"]), []).append(float(rec["p_bug"]))
  return {k: float(np.mean(v)) for k, v in values.items() if len(v) == len(points)}


def sign_flip_p(diffs: Sequence[float], strata: Optional[Sequence[Any]] = None, *,
                reps: int = 20000, seed: int = 0) -> float:
  """Two-sided paired sign-flip (permutation) p-value of a mean difference.

  Under the null each difference's sign is equally likely flipped, independently.
  The statistic is |mean| of the differences, or with `strata` (one label per
  difference) the |mean over strata of each stratum's mean|. Exact (all 2^n sign
  vectors) for n <= EXACT_MAX, else `reps` Monte Carlo draws ((1 + hits) / (1 + reps)).
  """
  d = np.asarray(diffs, np.float64)
  n = len(d)
  if n == 0:
    return float("nan")
  labels = list(range(n)) if strata is None else list(strata)
  if len(labels) != n:
    raise ValueError(f"{len(labels)} strata labels for {n} differences")
  groups = {g: labels.count(g) for g in labels}
  weights = np.asarray([1.0 / (len(groups) * groups[g]) for g in labels])
  observed = abs(float(d @ weights))
  tol = 1e-12 * max(1.0, observed)
  if n <= EXACT_MAX:
    signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    return float(np.mean(np.abs(signs @ (d * weights)) >= observed - tol))
  rng = np.random.default_rng(seed)
  signs = rng.choice([-1.0, 1.0], size=(reps, n))
  hits = int(np.sum(np.abs(signs @ (d * weights)) >= observed - tol))
  return (1 + hits) / (1 + reps)


def paired(values: Mapping[int, Optional[float]], base: Mapping[int, Optional[float]]
           ) -> Optional[dict[str, Any]]:
  """Per-seed differences values - base over the seeds both have, their mean, 95%
  bootstrap interval and sign-flip p-value (None without a common seed)."""
  seeds = sorted(s for s in values if values[s] is not None and base.get(s) is not None)
  if not seeds:
    return None
  diffs = [values[s] - base[s] for s in seeds]
  return {"seeds": seeds, "per_seed": diffs, "mean": float(np.mean(diffs)),
          "interval": bootstrap_interval(diffs), "p": sign_flip_p(diffs)}


def site_test(runs: Sequence[Mapping[str, Any]], base_runs: Sequence[Mapping[str, Any]]
              ) -> Optional[dict[str, Any]]:
  """Site-level paired test: units are (seed, task, bug site) present in both runs of
  a seed; each unit's difference is its per-site AUC of p_bug (arm - baseline). The
  p-value is the sign-flip test over units (signs flipped independently per unit),
  with the statistic stratified by seed (mean over seeds of each seed's mean
  difference), so every seed weighs the same. Units of one seed share that seed's
  runs, so they are not independent: read it as a finer-grained companion to the
  seed-level test, not a replacement."""
  base = {r["seed"]: site_aucs(r) for r in base_runs}
  diffs, strata = [], []
  for run in runs:
    if run["seed"] not in base:
      continue
    mine, theirs = site_aucs(run), base[run["seed"]]
    for key in sorted(set(mine) & set(theirs)):
      diffs.append(mine[key] - theirs[key])
      strata.append(run["seed"])
  if not diffs:
    return None
  by_seed = [float(np.mean([d for d, s in zip(diffs, strata) if s == seed]))
             for seed in sorted(set(strata))]
  return {"units": len(diffs), "seeds": len(set(strata)),
          "mean": float(np.mean(by_seed)), "p": sign_flip_p(diffs, strata),
          "exact": len(diffs) <= EXACT_MAX}


def bootstrap_interval(values: Sequence[float], *, reps: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
  """Percentile bootstrap interval of the mean (resampling the values)."""
  x = np.asarray(values, np.float64)
  if len(x) == 0:
    return (float("nan"), float("nan"))
  rng = np.random.default_rng(seed)
  means = x[rng.integers(0, len(x), (reps, len(x)))].mean(axis=1)
  lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
  return (float(lo), float(hi))


def compare(arms: Mapping[str, Sequence[Mapping[str, Any]]], baseline: str = BASELINE
            ) -> dict[str, Any]:
  """Per arm: gain over post-SFT, the AUC of the greedy pass rate, steps to the
  baseline's final pass rate and, against the baseline arm, per-seed paired differences
  of the final values and of the pass-rate AUC."""
  out: dict[str, Any] = {}
  base = {r["seed"]: r for r in arms.get(baseline, [])}
  threshold = (float(np.mean([final(r) for r in base.values()])) if base else None)
  for arm, runs in arms.items():
    if not runs:
      continue
    gains = [final(r) - r["post_sft"]["pass_rate"] for r in runs]
    entry: dict[str, Any] = {
        "seeds": len(runs),
        "post_sft_pass_rate": float(np.mean([r["post_sft"]["pass_rate"] for r in runs])),
        "final_pass_rate": float(np.mean([final(r) for r in runs])),
        "final_reward_mean": float(np.mean([final(r, "reward_mean") for r in runs])),
        "gain": float(np.mean(gains)), "gain_per_seed": gains,
        "gain_interval": bootstrap_interval(gains),
    }
    if threshold is not None:
      reached = [steps_to(r, threshold) for r in runs]
      entry["baseline_final_pass_rate"] = threshold
      entry["steps_to_baseline_final"] = reached
    pairs = [(r, base[r["seed"]]) for r in runs if r["seed"] in base]
    aucs = {r["seed"]: auc(r, "pass_rate") for r in runs}
    entry["auc_pass_rate"] = float(np.mean(list(aucs.values())))
    entry["auc_pass_rate_per_seed"] = [aucs[r["seed"]] for r in runs]
    if arm != baseline and pairs:
      entry["paired_auc_pass_rate"] = paired(
          aucs, {s: auc(r, "pass_rate") for s, r in base.items()})
      for key in ("pass_rate", "reward_mean"):
        diffs = [final(a, key) - final(b, key) for a, b in pairs]
        entry[f"paired_{key}_diff"] = float(np.mean(diffs))
        entry[f"paired_{key}_diff_per_seed"] = diffs
        entry[f"paired_{key}_diff_interval"] = bootstrap_interval(diffs)
    entry.update(_exact_comparison(arm, runs, base, baseline))
    out[arm] = entry
  return out


def _exact_comparison(arm: str, runs: Sequence[Mapping[str, Any]],
                      base: Mapping[int, Mapping[str, Any]], baseline: str = BASELINE
                      ) -> dict[str, Any]:
  """AUCs, final values and steps to bug_prob_mean < 0.1 of the exact metrics the
  runs have, paired against the baseline's (not for the baseline itself)."""
  out: dict[str, Any] = {}
  for key in AUC_KEYS:
    if not any(has_metric(r, key) for r in runs):
      continue
    values = {r["seed"]: auc(r, key) for r in runs}
    out[f"auc_{key}_per_seed"] = [values[r["seed"]] for r in runs]
    known = [v for v in values.values() if v is not None]
    out[f"auc_{key}"] = float(np.mean(known)) if known else None
    out[f"post_sft_{key}"] = float(np.mean([r["post_sft"][key] for r in runs
                                            if key in r["post_sft"]]))
    out[f"final_{key}"] = float(np.mean([final(r, key) for r in runs
                                         if has_metric(r, key)]))
    if arm != baseline:
      test = paired(values, {s: auc(r, key) for s, r in base.items()})
      if test:
        out[f"paired_auc_{key}"] = test
  if any(has_metric(r, "bug_prob_mean") for r in runs):
    out["steps_to_bug_prob"] = {"threshold": BUG_PROB_THRESHOLD, "per_seed": [
        steps_below(r, BUG_PROB_THRESHOLD) for r in runs]}
    out.update(_half_comparison(arm, runs, base, baseline))
    out.update(_match_comparison(arm, runs, base, baseline))
  if arm != baseline and base:
    test = site_test(runs, list(base.values()))
    if test:
      out["site_test"] = test
  return out


def _half_comparison(arm: str, runs: Sequence[Mapping[str, Any]],
                     base: Mapping[int, Mapping[str, Any]], baseline: str = BASELINE
                     ) -> dict[str, Any]:
  """RL steps and wall seconds until mean p_bug is below HALF of post-SFT, per seed,
  and (not for the baseline) their ratios to the baseline's, paired by seed."""
  reached = {r["seed"]: reaches_fraction(r) for r in runs}
  out: dict[str, Any] = {"steps_to_half": {
      "fraction": HALF, **_reached_lists(runs, reached),
      "horizon": [r["evals"][-1]["step"] if r["evals"] else 0 for r in runs]}}
  if arm != baseline and base:
    out.update(_reach_ratios("half", reached,
                             {s: reaches_fraction(r) for s, r in base.items()}))
  return out


def _match_comparison(arm: str, runs: Sequence[Mapping[str, Any]],
                      base: Mapping[int, Mapping[str, Any]], baseline: str = BASELINE
                      ) -> dict[str, Any]:
  """RL steps and wall seconds until mean p_bug is at or below the baseline's final
  value of the same seed (what the baseline reached at its horizon), per seed, and (not
  for the baseline) their ratios to the baseline's own, paired by seed."""
  key = "bug_prob_mean"
  targets = {s: final(r, key) for s, r in base.items() if has_metric(r, key)}
  if not targets:
    return {}
  reached = {r["seed"]: (reaches_value(r, targets[r["seed"]])
                         if r["seed"] in targets else None) for r in runs}
  out: dict[str, Any] = {"steps_to_baseline_bug_prob": {
      "targets": [targets.get(r["seed"]) for r in runs], **_reached_lists(runs, reached)}}
  if arm != baseline:
    out.update(_reach_ratios("match", reached,
                             {s: reaches_value(base[s], t) for s, t in targets.items()}))
  return out


def _reached_lists(runs: Sequence[Mapping[str, Any]],
                   reached: Mapping[int, Optional[tuple[int, float]]]) -> dict[str, list]:
  """Per run, in order: its seed and the (RL step, seconds) it got there (None: never)."""
  points = [reached[r["seed"]] for r in runs]
  return {"seeds": [r["seed"] for r in runs],
          "steps": [None if p is None else p[0] for p in points],
          "seconds": [None if p is None else p[1] for p in points]}


def _reach_ratios(prefix: str, reached: Mapping[int, Optional[tuple[int, float]]],
                  base_reached: Mapping[int, Optional[tuple[int, float]]]
                  ) -> dict[str, Any]:
  """`PREFIX_steps_ratio` and `PREFIX_seconds_ratio`: `ratio_test` of each, paired by seed."""
  out: dict[str, Any] = {}
  for i, unit in enumerate(("steps", "seconds")):
    mine = {s: None if v is None else v[i] for s, v in reached.items()}
    theirs = {s: None if v is None else v[i] for s, v in base_reached.items()}
    out[f"{prefix}_{unit}_ratio"] = ratio_test(mine, theirs)
  return out


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
