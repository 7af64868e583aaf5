"""What a run did, from its `metrics.jsonl` rows: collapse checks, the before/after
table and the learning-curve plot (`DIR/curves.png`).

Pure functions of the rows (and of eval rows' flat metrics, `eval_loop.flat_metrics`),
so a finished or resumed run gives the same table.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

# The dev metrics a collapse warning watches (higher is better for each).
WATCHED = ("reward_mean", "gate_format", "gate_source", "gate_runtime", "gates_pass")
COLUMNS = (("reward", "reward_mean"), ("format", "gate_format"),
           ("source", "gate_source"), ("runtime", "gate_runtime"),
           ("gates", "gates_pass"), ("pass", "pass_rate"))
GROUP_METRICS = ("reward_mean", "gates_pass", "pass_rate")


def drops(before: Mapping[str, Any], now: Mapping[str, Any], margin: float
          ) -> list[tuple[str, float, float]]:
  """(metric, before, now) of each `WATCHED` metric that fell by more than `margin`."""
  out = []
  for name in WATCHED:
    if name in before and name in now and now[name] < before[name] - margin:
      out.append((name, float(before[name]), float(now[name])))
  return out


def collapse_warning(before: Mapping[str, Any], now: Mapping[str, Any], margin: float,
                     where: str) -> Optional[str]:
  """One line naming every watched metric more than `margin` below the post-SFT
  evaluation `before`, with both values; None when nothing fell that far."""
  fell = drops(before, now, margin)
  if not fell:
    return None
  what = ", ".join(f"{name} {b:.3f} -> {n:.3f}" for name, b, n in fell)
  return (f"WARNING: dev evaluation {where} is more than eval.collapse_margin={margin:g} "
          f"below the post-SFT one: {what}")


def eval_rows(rows: Sequence[Mapping[str, Any]], after: str) -> list[Mapping[str, Any]]:
  """The `eval` rows logged after stage `after` ("sft" or "rl"), in step order."""
  return sorted((r for r in rows if r.get("stage") == "eval" and r.get("after") == after),
                key=lambda r: r["step"])


def groups(row: Mapping[str, Any]) -> list[str]:
  """The families of an eval row (`FAMILY/pass_rate` keys without a `/` prefix)."""
  return sorted(k.split("/")[0] for k in row
                if k.endswith("/pass_rate") and k.count("/") == 1)


def splits(row: Mapping[str, Any]) -> list[str]:
  """The request splits of an eval row (`split/SPLIT/pass_rate` keys: the copying
  families' dev and novel-word requests)."""
  return sorted(k.split("/")[1] for k in row
                if k.startswith("split/") and k.endswith("/pass_rate"))


def pass_curve(rows: Sequence[Mapping[str, Any]]) -> str:
  """Markdown: the dev pass rate (and per split) at the post-SFT evaluation (RL step 0)
  and at every RL evaluation."""
  before, after = eval_rows(rows, "sft"), eval_rows(rows, "rl")
  points = [(0, before[-1])] if before else []
  points += [(int(r["step"]), r) for r in after]
  if not points:
    return ""
  names = [("all", "pass_rate")] + [(f"split {n}", f"split/{n}/pass_rate")
                                    for n in splits(points[-1][1])]
  lines = [_cells(["pass rate by RL step", *(str(step) for step, _ in points)]),
           _cells(["---"] * (len(points) + 1))]
  for label, key in names:
    lines.append(_cells([label, *(f"{r.get(key, float('nan')):.3f}" for _, r in points)]))
  return "\n".join(lines)


def _cells(values: Sequence[str]) -> str:
  return "| " + " | ".join(values) + " |"


def table(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
  """Markdown: the two evaluations' reward, gate rates and pass rate, then per family
  (one row per request in a controlled setting with one task per family) and per
  request split."""
  lines = [_cells(["dev evaluation", *(c for c, _ in COLUMNS)]),
           _cells(["---"] * (len(COLUMNS) + 1))]
  for label, row in ((f"after SFT step {before['step']}", before),
                     (f"after RL step {after['step']}", after)):
    lines.append(_cells([label, *(f"{row.get(k, float('nan')):.3f}" for _, k in COLUMNS)]))
  names = groups(after)
  if names and len(names) <= 12:
    lines += ["", _cells(["family", "reward", "gates", "pass"]), _cells(["---"] * 4)]
    for g in names:
      lines.append(_cells([g, *(f"{before.get(f'{g}/{m}', float('nan')):.2f} -> "
                                f"{after.get(f'{g}/{m}', float('nan')):.2f}"
                                for m in GROUP_METRICS)]))
  names = splits(after)
  if names:
    lines += ["", _cells(["split", "reward", "gates", "pass"]), _cells(["---"] * 4)]
    for n in names:
      lines.append(_cells([n, *(f"{before.get(f'split/{n}/{m}', float('nan')):.2f} -> "
                                f"{after.get(f'split/{n}/{m}', float('nan')):.2f}"
                                for m in GROUP_METRICS)]))
  return "\n".join(lines)


def plot_curves(rows: Sequence[Mapping[str, Any]], path: str) -> str:
  """Dev reward and pass rate (the post-SFT evaluation at RL step 0) and the training
  reward and pass rate against the RL step, saved as a PNG at `path`."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  dev = [(0, r) for r in eval_rows(rows, "sft")[-1:]] + [
      (r["step"], r) for r in eval_rows(rows, "rl")]
  train = sorted(((r["step"], r) for r in rows if r.get("stage") == "rl"),
                 key=lambda x: x[0])
  fig, ax = plt.subplots(figsize=(7, 4))
  for name, label, style in (("reward_mean", "dev reward (greedy)", "o-"),
                             ("pass_rate", "dev pass rate (greedy)", "s-")):
    if dev:
      ax.plot([s for s, _ in dev], [r[name] for _, r in dev], style, label=label)
  for name, label in (("reward_mean", "training reward (T=1)"),
                      ("pass_rate", "training pass rate (T=1)")):
    if train:
      ax.plot([s for s, _ in train], [r[name] for _, r in train], alpha=0.6, lw=1,
              label=label)
  ax.set_xlabel("RL step (0: after SFT)")
  ax.set_ylim(-0.03, 1.03)
  ax.grid(alpha=0.3)
  ax.legend(loc="best", fontsize=8)
  ax.set_title(os.path.basename(os.path.dirname(os.path.abspath(path))) or "run")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
