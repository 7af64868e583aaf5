"""The one-step instrument's statistics and report (experiments/credit_onestep.py
measures; this reads its pairs): numpy only, so a committed `summary.json` is
rebuilt without JAX.

A pair is one (batch, bug site) with the margin `logp(bug) − logp(reference)` before
and after each arm's update. Pooled means over pairs; paired differences between arms
on the same pairs; 95% percentile bootstrap intervals that resample batches (the
independent units: a batch's sites share its update). Differences: focus − placebo
(and focus − the mean of its layouts, `PLACEBO_MEAN`), every other arm X − X_placebo
present (the location contrasts of credit study 3's grid, experiments/credit_study3.py)
and every arm − grpo, at blamed, unblamed and all sites, in margin and in p_bug.

Resolution: the half-width of focus − placebo's interval. For study 2's scale, the
all-sites Δp_bug half-width is multiplied by the mean RL step of study 2's evaluations
(18 for evaluations every 3 steps to 36): the AUC difference that a constant per-step
effect would build up if it added linearly, an extrapolation, not a measurement. Unit
free: the half-width as a share of |focus − grpo| in p_bug, beside study 2's own.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from rcca_jax.train import site_metrics

FOCUS, PLACEBO, BASELINE = "rcca_focus", "rcca_focus_placebo", "grpo"
# The placebo averaged over its independent layouts (PLACEBO and PLACEBO_dK measured).
PLACEBO_MEAN = PLACEBO + "_mean"
CATEGORIES = ("blamed", "unblamed", "all")
MEASURES = ("margin", "p_bug")
# Credit study 2 (its README, 5 seeds): focus − placebo's Δ AUC p_bug (head to head)
# and focus − grpo's, the effect its resolution is compared with.
STUDY2 = {"s1_0": {"mean": -0.006, "interval": [-0.035, 0.028], "focus_grpo": -0.095},
          "s3_4": {"mean": -0.007, "interval": [-0.024, 0.013], "focus_grpo": -0.059}}


# ---- batch shapes --------------------------------------------------------------------

PROPERTY_SHARES = {  # share: (numerator, denominator) of credit_onestep.batch_properties
    "response_tokens": ("tokens", "responses"),
    "located": ("located", "responses"),
    "failed_blamed_token_share": ("failed_blamed_tokens", "failed_tokens"),
    "bug_token_share": ("bug_tokens", "failed_with_bug_tokens"),
    "positive_clean": ("positive_clean", "positive"),
    "groups_without_clean": ("groups_without_clean", "groups_with_signal"),
    "fix": ("fix", "fix_pairs"),
    "fix_same_place": ("fix_same_place", "fix_pairs"),
    "token_overlap": ("token_overlap", "overlap_pairs"),
}


def property_shares(counts: Iterable[Mapping[str, float]]) -> dict[str, Any]:
  """The batches' `batch_properties` summed, and each share of `PROPERTY_SHARES` (None
  where its denominator is 0)."""
  total: collections.Counter = collections.Counter()
  for one in counts:
    total.update(one)
  shares = {k: (total[a] / total[b] if total[b] else None)
            for k, (a, b) in PROPERTY_SHARES.items()}
  return {"shares": shares, "counts": dict(total)}


# ---- statistics ----------------------------------------------------------------------

def in_category(pair: Mapping[str, Any], category: str) -> bool:
  return category == "all" or pair["blamed"] == (category == "blamed")


def draws_of(arm: str, arms: Iterable[str]) -> list[str]:
  """The measured arms that `arm` stands for: X_mean is X and its draws X_dK present in
  `arms`; any other name is itself."""
  if not arm.endswith("_mean"):
    return [arm]
  base = arm[:-len("_mean")]
  return [base] + sorted((a for a in arms if re.fullmatch(re.escape(base) + r"_d\d+", a)),
                         key=lambda a: int(a.rsplit("_d", 1)[1]))


def changes(pairs: Sequence[Mapping[str, Any]], arm: str, what: str) -> np.ndarray:
  """Per pair, the arm's Δmargin (`what` "margin") or Δp_bug ("p_bug"); for X_mean the
  mean of the changes of X and its draws (`draws_of`)."""
  if pairs and arm.endswith("_mean"):
    members = draws_of(arm, pairs[0]["after"])
    return np.mean([changes(pairs, m, what) for m in members], axis=0)
  before = np.asarray([p["before"] for p in pairs], np.float64)
  after = np.asarray([p["after"][arm] for p in pairs], np.float64)
  if what == "margin":
    return after - before
  return p_bugs(after) - p_bugs(before)


def p_bugs(margins: np.ndarray) -> np.ndarray:
  """sigmoid of each margin: the site's p_bug (`site_metrics.p_bug`)."""
  return np.asarray([site_metrics.p_bug(m, 0.0) for m in margins], np.float64)


def cluster_stat(values: np.ndarray, clusters: Sequence[int], *, reps: int, seed: int,
                 level: float = 0.95) -> dict[str, Any]:
  """Pooled mean of `values` and its percentile bootstrap interval, resampling the
  clusters (batches) with replacement; also the half-width and the counts."""
  if len(values) == 0:
    return {"mean": None, "interval": [None, None], "half_width": None, "pairs": 0,
            "batches": 0}
  ids = sorted(set(clusters))
  index = np.searchsorted(ids, clusters)
  sums = np.bincount(index, weights=values, minlength=len(ids))
  counts = np.bincount(index, minlength=len(ids)).astype(np.float64)
  draw = np.random.default_rng(seed).integers(0, len(ids), (reps, len(ids)))
  means = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
  lo, hi = (float(q) for q in np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))
  return {"mean": float(values.sum() / len(values)), "interval": [lo, hi],
          "half_width": (hi - lo) / 2, "pairs": len(values), "batches": len(ids)}


def arm_stat(pairs: Sequence[Mapping[str, Any]], arm: str, base: Optional[str],
             category: str, what: str, *, reps: int, seed: int) -> dict[str, Any]:
  """`cluster_stat` of the arm's change (minus `base`'s on the same pair, if given)
  over the pairs of `category`."""
  chosen = [p for p in pairs if in_category(p, category)]
  values = changes(chosen, arm, what)
  if base is not None:
    values = values - changes(chosen, base, what)
  return cluster_stat(values, [p["step"] for p in chosen], reps=reps, seed=seed)


def comparisons(arms: Sequence[str]) -> list[tuple[str, str]]:
  """focus − placebo (both present) and, with placebo draws, focus − their mean
  (`PLACEBO_MEAN`), then every other arm X − X_placebo (both present, in the order of
  `arms`: the location contrasts), then every measured arm − grpo (present; the draws
  only as their mean)."""
  out = [(FOCUS, PLACEBO)] if FOCUS in arms and PLACEBO in arms else []
  draws = len(draws_of(PLACEBO_MEAN, arms)) > 1
  if out and draws:
    out.append((FOCUS, PLACEBO_MEAN))
  out += [(a, a + "_placebo") for a in arms
          if a != FOCUS and a + "_placebo" in arms]
  if BASELINE in arms:
    own = [a for a in arms if a != BASELINE and not re.search(r"_d\d+$", a)]
    out += [(a, BASELINE) for a in own + ([PLACEBO_MEAN] if out and draws else [])]
  return out


def statistics(pairs: Sequence[Mapping[str, Any]], arms: Sequence[str], *, reps: int,
               seed: int) -> dict[str, Any]:
  """Per-arm means and the paired differences of `comparisons`, every category and
  measure."""
  def block(arm: str, base: Optional[str]) -> dict[str, Any]:
    return {c: {w: arm_stat(pairs, arm, base, c, w, reps=reps, seed=seed)
                for w in MEASURES} for c in CATEGORIES}
  return {"arm_means": {a: block(a, None) for a in arms},
          "differences": [{"arm": a, "against": b, **block(a, b)}
                          for a, b in comparisons(arms)]}



def find_difference(stats: Mapping[str, Any], arm: str, against: str
                    ) -> Optional[dict[str, Any]]:
  found = [d for d in stats["differences"] if (d["arm"], d["against"]) == (arm, against)]
  return found[0] if found else None


def resolution(stats: Mapping[str, Any], auc_steps: float, setting: str
               ) -> Optional[dict[str, Any]]:
  """focus − placebo's half-widths, their study-2 scale (`auc_equivalent`) and, unit
  free, as a share of |focus − grpo| in p_bug at all sites (`relative`) and at blamed
  sites (`relative_blamed`), beside study 2's own (None without focus and placebo)."""
  d = find_difference(stats, FOCUS, PLACEBO)
  if d is None:
    return None
  all_p = d["all"]["p_bug"]["half_width"]
  effect = find_difference(stats, FOCUS, BASELINE)
  scale = effect and effect["all"]["p_bug"]["mean"]
  blamed_p = d["blamed"]["p_bug"]["half_width"]
  blamed_scale = effect and effect["blamed"]["p_bug"]["mean"]
  out = {"blamed_margin": d["blamed"]["margin"]["half_width"],
         "blamed_p_bug": d["blamed"]["p_bug"]["half_width"],
         "all_p_bug": all_p, "auc_steps_mean": auc_steps,
         "auc_equivalent": None if all_p is None else all_p * auc_steps,
         "relative": all_p / abs(scale) if all_p is not None and scale else None,
         "relative_blamed": (blamed_p / abs(blamed_scale)
                             if blamed_p is not None and blamed_scale else None)}
  mean = find_difference(stats, FOCUS, PLACEBO_MEAN)
  if mean is not None:
    all_mean = mean["all"]["p_bug"]["half_width"]
    out["placebo_mean"] = {
        "draws": len(draws_of(PLACEBO_MEAN, stats["arm_means"])),
        "blamed_margin": mean["blamed"]["margin"]["half_width"],
        "blamed_p_bug": mean["blamed"]["p_bug"]["half_width"], "all_p_bug": all_mean,
        "relative": all_mean / abs(scale) if all_mean is not None and scale else None}
  if setting in STUDY2:
    s = STUDY2[setting]
    half = (s["interval"][1] - s["interval"][0]) / 2
    out["study2"] = {"setting": setting, **s, "half_width": half,
                     "relative": half / abs(s["focus_grpo"])}
  return out


def summarize(lines: Sequence[Mapping[str, Any]], arms: Sequence[str], *, reps: int,
              seed: int, auc_steps: float, setting: str = "",
              info: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
  """The summary: `info`, the raw pairs and update metrics, counts, statistics and
  resolution."""
  pairs = [p for line in lines for p in line["pairs"]]
  stats = statistics(pairs, arms, reps=reps, seed=seed)
  return {**dict(info or {}), "setting": setting, "arms": list(arms),
          "auc_steps_mean": auc_steps,
          "steps": [line["step"] for line in lines],
          "bootstrap": {"reps": reps, "seed": seed, "level": 0.95, "unit": "batch"},
          "counts": {"batches": len(lines), "pairs": len(pairs),
                     "blamed": sum(p["blamed"] for p in pairs),
                     "unblamed": sum(not p["blamed"] for p in pairs)},
          **stats, "resolution": resolution(stats, auc_steps, setting),
          "properties": property_shares(line["properties"] for line in lines
                                        if "properties" in line),
          "measure_s": sum(line["measure_s"] for line in lines),
          "updates": [{"step": line["step"], **line["updates"]} for line in lines],
          "pairs": pairs}


def recompute(summary: Mapping[str, Any]) -> dict[str, Any]:
  """Statistics and resolution rebuilt from the summary's raw pairs alone."""
  b = summary["bootstrap"]
  stats = statistics(summary["pairs"], summary["arms"], reps=b["reps"], seed=b["seed"])
  return {**stats, "resolution": resolution(stats, summary["auc_steps_mean"],
                                            summary["setting"])}


# ---- report --------------------------------------------------------------------------

def cell(stat: Mapping[str, Any], digits: int = 4) -> str:
  if stat["mean"] is None:
    return "-"
  lo, hi = stat["interval"]
  return f"{stat['mean']:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def table(summary: Mapping[str, Any]) -> str:
  """The printed report: counts, per-arm means, differences and resolution."""
  c = summary["counts"]
  lines = [f"one update per arm on {c['batches']} batches: {c['pairs']} (batch, bug site) "
           f"pairs, {c['blamed']} blamed, {c['unblamed']} unblamed; mean [95% CI, "
           "bootstrap over batches]; margin = logp(bug) - logp(reference) in nats",
           "", "per arm: Δmargin (blamed | unblamed); Δp_bug (blamed | unblamed)"]
  width = max(len(a) for a in summary["arms"]) + 2
  for arm, s in summary["arm_means"].items():
    lines.append(f"  {arm:<{width}}{cell(s['blamed']['margin'])} | "
                 f"{cell(s['unblamed']['margin'])};  {cell(s['blamed']['p_bug'])} | "
                 f"{cell(s['unblamed']['p_bug'])}")
  lines += ["", "paired differences (pairs / batches): category, Δmargin; Δp_bug"]
  for d in summary["differences"]:
    lines.append(f"  {d['arm']} - {d['against']}")
    for category in CATEGORIES:
      m, p = d[category]["margin"], d[category]["p_bug"]
      lines.append(f"    {category:<9}{cell(m)};  {cell(p)}  ({m['pairs']} / {m['batches']})")
  r = summary["resolution"]
  if r:
    lines += ["", resolution_text(r)]
  shares = (summary.get("properties") or {}).get("shares") or {}
  if any(v is not None for v in shares.values()):
    lines += ["", "batches: " + ", ".join(
        f"{k} {v:.4g}" for k, v in shares.items() if v is not None)]
  return "\n".join(lines)


def resolution_text(r: Mapping[str, Any]) -> str:
  if r["blamed_margin"] is None:
    return "resolution: no blamed site measured"
  text = (f"resolution (half-width of {FOCUS} - {PLACEBO}): blamed sites "
          f"{r['blamed_margin']:.4f} nats of margin, {r['blamed_p_bug']:.4f} in p_bug per "
          f"update; all sites {r['all_p_bug']:.4f} in p_bug per update, x "
          f"{r['auc_steps_mean']:g} (mean evaluated RL step) = {r['auc_equivalent']:.4f} "
          "in AUC p_bug if the per-step effect added up linearly (an extrapolation)")
  if "study2" in r:
    s = r["study2"]
    text += (f"; credit study 2 ({s['setting']}, 5 seeds): Δ AUC p_bug {s['mean']:+.3f} "
             f"[{s['interval'][0]:+.3f}, {s['interval'][1]:+.3f}], half-width "
             f"{s['half_width']:.4f}")
  if r["relative"] is not None:
    text += (f". Unit free, as a share of |{FOCUS} - {BASELINE}| (all sites, p_bug): "
             f"{r['relative']:.2f} here")
    if "study2" in r:
      text += (f", {r['study2']['relative']:.2f} in study 2 (half-width / "
               f"|{r['study2']['focus_grpo']:.3f}|)")
  if r.get("relative_blamed") is not None:
    text += f"; at blamed sites {r['relative_blamed']:.2f}"
  m = r.get("placebo_mean")
  if m and m["blamed_margin"] is not None:
    text += (f". Against the mean of {m['draws']} placebo layouts ({FOCUS} - "
             f"{PLACEBO_MEAN}): blamed sites {m['blamed_margin']:.4f} nats, "
             f"{m['blamed_p_bug']:.4f} in p_bug; all sites {m['all_p_bug']:.4f}")
    if m["relative"] is not None:
      text += f", a share {m['relative']:.2f} of |{FOCUS} - {BASELINE}|"
  return text

