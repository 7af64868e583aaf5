"""The sweep's outputs across settings: `credit_sweep.png` and `sweep.md`.

Pure functions of the settings' summaries ({setting: `ablation_report.collect(...)`},
in sweep order): every number comes from the summaries' `arms` alone, through
`stats.compare`, so the README's paired differences can be recomputed from
the committed `summary.json` files.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import numpy as np

from rcca_jax.study import ablation_report
from rcca_jax.study import stats

fmt = ablation_report.fmt
KEY = "bug_prob_mean"  # the primary metric: AUC of mean p_bug, lower is better
# Head-to-head pairs (arm, against) that answer why focus wins (docs/ablation.md#controls):
# location (focus against its placebo, the oracle against focus), magnitude (focus
# against the same negative total spread evenly), the model-free localizers, and the
# blame-free constant scale against the two magnitude arms that use the blame.
CONTROLS = (("rcca_focus", "rcca_focus_placebo"), ("rcca_focus_oracle", "rcca_focus"),
            ("rcca_focus", "grpo_neg_scaled"), ("sibling_diff_focus", "rcca_focus"),
            ("entropy_top20", "rcca_focus"), ("grpo_neg_const", "rcca_focus"),
            ("grpo_neg_const", "grpo_neg_scaled"))


def mean_band(runs, key: str) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
  """Steps, mean over seeds and its standard error, on the steps every run has
  (None when a run lacks the metric)."""
  if not runs or not all(stats.has_metric(r, key) for r in runs):
    return None
  curves = [stats.curve(r, key) for r in runs]
  n = min(len(s) for s, _ in curves)
  values = np.stack([v[:n] for _, v in curves])
  sem = (values.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1
         else np.zeros(n))
  return curves[0][0][:n], values.mean(axis=0), sem


def paired_auc(summary: Mapping[str, Any], key: str = KEY) -> dict[str, dict[str, Any]]:
  """{arm: paired test of AUC(key), arm - baseline} recomputed from `summary["arms"]`."""
  comp = stats.compare(summary["arms"])
  return {arm: c[f"paired_auc_{key}"] for arm, c in comp.items()
          if f"paired_auc_{key}" in c}


def half_ratios(summary: Mapping[str, Any], unit: str = "steps", measure: str = "half"
                ) -> dict[str, dict[str, Any]]:
  """{arm: paired ratio to the baseline of the RL steps (or `unit="seconds"`) until mean
  p_bug is below half its post-SFT value (`measure="match"`: at or below the baseline's
  final value)}, recomputed from `summary["arms"]`."""
  comp = stats.compare(summary["arms"])
  return {arm: c[f"{measure}_{unit}_ratio"] for arm, c in comp.items()
          if "geomean" in c.get(f"{measure}_{unit}_ratio", {})}


def head_to_head(summary: Mapping[str, Any], arm: str, other: str
                 ) -> Optional[dict[str, Any]]:
  """`arm` against `other`, paired by seed, from `summary["arms"]`: the AUC of p_bug
  (`auc`: arm - other, interval, sign-flip p), the RL steps until p_bug is below half
  its post-SFT value (`steps_ratio`: arm / other) and until it is at or below `other`'s
  final value (`match_ratio`); None when either arm has no run."""
  if not summary["arms"].get(arm) or not summary["arms"].get(other):
    return None
  comp = stats.compare({a: summary["arms"][a] for a in (arm, other)},
                       baseline=other)[arm]
  return {"auc": comp.get(f"paired_auc_{KEY}"), "steps_ratio": comp.get("half_steps_ratio"),
          "match_ratio": comp.get("match_steps_ratio")}


def controls_markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
  """Per setting, each pair of CONTROLS both of whose arms ran: the paired AUC
  difference of p_bug, the steps-to-half ratio and the steps to the other arm's final
  p_bug."""
  lines = ["| setting | arm − against | Δ AUC p_bug [95% CI] | p | "
           "steps ratio, arm / against (baseline = against) [95% CI] | "
           "steps to against's final p_bug, ratio [95% CI] |",
           "|---|---|---|---|---|---|"]
  for setting, summary in summaries.items():
    for arm, other in CONTROLS:
      test = head_to_head(summary, arm, other)
      if test is None or test["auc"] is None:
        continue
      lo, hi = test["auc"]["interval"]
      lines.append(f"| {setting} | {arm} − {other} | {test['auc']['mean']:+.3f} "
                   f"[{fmt(lo)}, {fmt(hi)}] | {fmt(test['auc']['p'])} | "
                   f"{ablation_report.ratio_cell(test['steps_ratio'])} | "
                   f"{ablation_report.ratio_cell(test['match_ratio'])} |")
  return "\n".join(lines) + "\n"


def baseline_half_step(summary: Mapping[str, Any]) -> Optional[int]:
  """The first evaluated RL step at which the baseline's mean p_bug over seeds is below
  HALF of its mean post-SFT value (None: not within the runs)."""
  band = mean_band(summary["arms"].get(stats.BASELINE, []), KEY)
  if band is None:
    return None
  steps, mean, _ = band
  below = [int(s) for s, v in zip(steps[1:], mean[1:])
           if v < stats.HALF * mean[0]]
  return below[0] if below else None


def _per_seed(entry: Optional[Mapping[str, Any]]) -> str:
  if not entry:
    return "–"
  return ", ".join("never" if x is None else str(x) for x in entry["steps"])


def half_markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
  """Per setting and arm, the steps-saved ratios to the baseline (steps and seconds) to
  half the post-SFT p_bug and to the baseline's final p_bug, and where the baseline's
  mean curve crossed half its post-SFT p_bug."""
  lines = ["| setting | arm | steps to half, per seed | steps ratio [95% CI] | "
           f"seconds ratio [95% CI] | steps to {stats.BASELINE}'s final p_bug, per seed | "
           "steps ratio [95% CI] | seconds ratio [95% CI] |",
           "|---|---|---|---|---|---|---|---|"]
  for setting, summary in summaries.items():
    comp = stats.compare(summary["arms"])
    for arm, c in comp.items():
      if not c.get("steps_to_half"):
        continue
      cell = ablation_report.ratio_cell
      lines.append(f"| {setting} | {arm} | {_per_seed(c['steps_to_half'])} | "
                   f"{cell(c.get('half_steps_ratio'))} | "
                   f"{cell(c.get('half_seconds_ratio'))} | "
                   f"{_per_seed(c.get('steps_to_baseline_bug_prob'))} | "
                   f"{cell(c.get('match_steps_ratio'))} | "
                   f"{cell(c.get('match_seconds_ratio'))} |")
  crossings = ", ".join(f"{name}: {'never' if step is None else f'step {step}'}"
                        for name, step in ((n, baseline_half_step(s))
                                           for n, s in summaries.items()))
  return ("\n".join(lines) + f"\n\n`{stats.BASELINE}`'s mean p_bug over seeds "
          f"first below {stats.HALF} x post-SFT: {crossings}.\n")


def markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
  """One table: per setting and arm, seeds, post-SFT and AUC of p_bug and pass@1, and
  the paired differences against the baseline with 95% intervals and sign-flip p."""
  lines = ["| setting | arm | seeds | post-SFT p_bug | AUC p_bug | Δ AUC p_bug [95% CI] | "
           "p | AUC pass@1 | Δ AUC pass@1 [95% CI] | p |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for setting, summary in summaries.items():
    comp = stats.compare(summary["arms"])
    for arm, c in comp.items():
      cells = []
      for key in stats.AUC_KEYS:
        test = c.get(f"paired_auc_{key}")
        if test:
          lo, hi = test["interval"]
          cells += [f"{test['mean']:+.3f} [{fmt(lo)}, {fmt(hi)}]", fmt(test["p"])]
        else:
          cells += ["–", "–"]
      lines.append(f"| {setting} | {arm} | {c['seeds']} | "
                   f"{fmt(c.get('post_sft_bug_prob_mean'))} | "
                   f"{fmt(c.get('auc_bug_prob_mean'))} | {cells[0]} | {cells[1]} | "
                   f"{fmt(c.get('auc_pass_at_1'))} | {cells[2]} | {cells[3]} |")
  return "\n".join(lines) + "\n"


def plot(summaries: Mapping[str, Mapping[str, Any]], path: str) -> None:
  """A row per setting: mean p_bug and sampled pass@1 against the RL step per arm (mean
  and ± one standard error over seeds), the paired Δ AUC of p_bug (arm - baseline)
  with its 95% bootstrap interval, and the paired ratio of RL steps until mean p_bug is
  below half its post-SFT value (where some pair of runs got there; else until it is at
  or below the baseline's final value)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  names = list(summaries)
  arms = list(dict.fromkeys(a for s in summaries.values() for a in s["arms"]))
  colours = {a: f"C{i}" for i, a in enumerate(arms)}
  ratios = {name: steps_ratios(summary) for name, summary in summaries.items()}
  columns = 4 if any(r[1] for r in ratios.values()) else 3
  fig, axes = plt.subplots(len(names), columns, figsize=(5 * columns, 3.6 * len(names)),
                           squeeze=False)
  for row, name in zip(axes, names):
    summary = summaries[name]
    for ax, (key, label) in zip(row, ((KEY, "mean p_bug (exact)"),
                                      ("pass_at_1", "sampled pass@1"))):
      for arm, runs in summary["arms"].items():
        band = mean_band(runs, key)
        if band is None:
          continue
        steps, mean, sem = band
        ax.plot(steps, mean, marker="o", color=colours[arm],
                label=f"{arm} ({len(runs)} seeds)")
        ax.fill_between(steps, mean - sem, mean + sem, alpha=0.2, color=colours[arm])
      ax.set_xlabel("RL step")
      ax.set_ylabel(label)
      ax.set_title(name)
      ax.grid(alpha=0.3)
    row[0].legend(loc="best", fontsize=8)
    tests = paired_auc(summary)
    ax = row[2]
    for i, (arm, test) in enumerate(tests.items()):
      lo, hi = test["interval"]
      ax.errorbar([test["mean"]], [i], xerr=[[test["mean"] - lo], [hi - test["mean"]]],
                  fmt="o", color=colours[arm], capsize=4)
    ax.axvline(0.0, color="grey", lw=1)
    ax.set_yticks(range(len(tests)), [f"{a} (p={test['p']:.3f})"
                                      for a, test in tests.items()])
    ax.set_xlabel(f"Δ AUC p_bug vs {stats.BASELINE} (lower is better), 95% CI")
    ax.set_title(name)
    ax.grid(alpha=0.3, axis="x")
    if columns == 4:
      _plot_ratios(row[3], *ratios[name], colours, name)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def steps_ratios(summary: Mapping[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
  """The steps-saved ratios a setting's figure shows: to half p_bug where some pair of
  runs got there, else to the baseline's final p_bug; (x-axis label, ratios)."""
  half = half_ratios(summary)
  if half:
    return f"RL steps to half p_bug / {stats.BASELINE}'s, 95% CI", half
  return (f"RL steps to {stats.BASELINE}'s final p_bug / its own, 95% CI",
          half_ratios(summary, measure="match"))


def _plot_ratios(ax, label: str, ratios: Mapping[str, Mapping[str, Any]],
                 colours: Mapping[str, str], name: str) -> None:
  """Steps-saved ratios to the baseline (geometric mean, 95% interval), log scale."""
  from matplotlib import ticker  # pylint: disable=import-outside-toplevel
  for i, (arm, test) in enumerate(ratios.items()):
    lo, hi = test["interval"]
    ax.errorbar([test["geomean"]], [i], xerr=[[test["geomean"] - lo],
                                              [hi - test["geomean"]]],
                fmt="o", color=colours[arm], capsize=4)
  ax.axvline(1.0, color="grey", lw=1)
  ax.set_xscale("log")
  # Plain labels at powers of two (the log axis's default 3x10^-1 labels overlap).
  ax.xaxis.set_major_locator(ticker.LogLocator(base=2.0))
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())
  ax.set_yticks(range(len(ratios)), [f"{a} ({len(t['seeds'])} seeds)"
                                     for a, t in ratios.items()])
  ax.set_xlabel(label)
  ax.set_title(name)
  ax.grid(alpha=0.3, axis="x")


def write_all(workdir: str, summaries: Mapping[str, Mapping[str, Any]]) -> None:
  """DIR/sweep.md and DIR/credit_sweep.png of the settings that have runs."""
  done = {n: s for n, s in summaries.items() if any(s["arms"].values())}
  if not done:
    return
  with open(os.path.join(workdir, "sweep.md"), "w", encoding="utf-8") as f:
    f.write(markdown(done) + "\n" + half_markdown(done) + "\nHead to head (the "
            "controls of focus, paired by seed):\n\n" + controls_markdown(done))
  plot(done, os.path.join(workdir, "credit_sweep.png"))
