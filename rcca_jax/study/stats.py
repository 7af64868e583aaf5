"""The statistics of an ablation's runs: pure functions of a summary's `arms`
(`ablation_report.collect`), so `compare(summary["arms"])` recomputes every number of
the comparison from the summary alone.

Exact metrics (docs/ablation.md#metrics): per run, the area under the curve (mean over the
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

from typing import Any, Mapping, Optional, Sequence

import numpy as np

BASELINE = "grpo"
AUC_KEYS = ("bug_prob_mean", "pass_at_1")
BUG_PROB_THRESHOLD = 0.1
# Steps saved: the first evaluation whose mean p_bug is below this fraction of the run's
# post-SFT value (docs/ablation.md#metrics).
HALF = 0.5
EXACT_MAX = 16  # sign-flip p-values by enumeration up to this many units

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
