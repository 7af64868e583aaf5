"""Summaries of a benchmark run: means per group, status counts, judge usage, and the
`summary.json` / `summary.md` files."""

from __future__ import annotations

import collections
import json
import os
from typing import Any, Callable, Iterable, Mapping, Sequence


def mean(values: Sequence[float]) -> float | None:
  return sum(values) / len(values) if values else None


def grouped(records: Sequence[Mapping[str, Any]], field: str,
            value: Callable[[Mapping[str, Any]], dict[str, float]]) -> dict[str, dict[str, Any]]:
  """Per value of `field` (unset -> "unknown"): `n` and the mean of each metric."""
  groups: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
  for r in records:
    groups[str(r.get(field) or "unknown")].append(value(r))
  return {name: {"n": len(rows), **{k: mean([row[k] for row in rows]) for k in rows[0]}}
          for name, rows in sorted(groups.items())}


def counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  c = collections.Counter(r["status"] for r in records)
  return {"responses": len(records), **dict(sorted(c.items()))}


def usage_total(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  total: collections.Counter = collections.Counter()
  for r in records:
    total.update(r.get("usage") or {})
  return dict(total)


def _fmt(value: Any) -> str:
  if isinstance(value, float):
    return f"{value:.2f}"
  return "–" if value is None else str(value)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
  return "\n".join(lines)


def summary_markdown(title: str, summary: Mapping[str, Any], metrics: Sequence[str]) -> str:
  """`summary.md`: the overall numbers, then one table per grouping, then the counts."""
  parts = [f"# {title}", "",
           markdown_table(["metric", "value"],
                          [(k, summary[k]) for k in metrics if k in summary])]
  for key, label in (("by_category", "category"), ("by_difficulty", "difficulty")):
    groups = summary.get(key) or {}
    if groups:
      cols = list(next(iter(groups.values())))
      parts += ["", f"## By {label}", "",
                markdown_table([label, *cols], [(g, *(v[c] for c in cols))
                                                for g, v in groups.items()])]
  for key in ("rubrics",):
    if summary.get(key):
      parts += ["", "## RCCA rubric evaluator (same tasks)", "",
                markdown_table(["group", "n", "reward_mean", "pass_rate"],
                               [(g, v["n"], v["reward_mean"], v["pass_rate"])
                                for g, v in summary[key].items()])]
  parts += ["", "## Counts", "", markdown_table(["status", "n"], summary["counts"].items())]
  if summary.get("usage"):
    parts += ["", "## Judge usage", "", markdown_table(["", "n"], summary["usage"].items())]
  return "\n".join(parts) + "\n"


def write_summary(out_dir: str, summary: Mapping[str, Any], title: str,
                  metrics: Sequence[str]) -> None:
  with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1, ensure_ascii=False)
  with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
    f.write(summary_markdown(title, summary, metrics))
