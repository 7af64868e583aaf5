"""Result folders side by side, as the paper's table (markdown and CSV).

Each folder holds a `summary.json` written by `python -m rcca_jax.bench ...`, or by
`python -m rcca_jax.main --mode=eval` (DIR/eval/NAME/; its pass rate, in percent, is the
row's `overall`). Columns: overall, the benchmark's own extra numbers, then per
difficulty and per category (the union over all rows; missing cells stay empty).
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any, Sequence

from rcca_jax.bench import summary as summary_lib

_EXTRA = ("official_overall", "intention", "static", "dynamic")


def _percent(value: Any) -> float | None:
  return None if value is None else 100.0 * float(value)


def row(summary: dict[str, Any]) -> dict[str, float | None]:
  """One table row (column -> value) from either kind of summary."""
  if "overall" in summary:  # a benchmark run
    out = {"overall": summary["overall"]}
    out.update({k: summary[k] for k in _EXTRA if k in summary})
    for key, prefix in (("by_difficulty", "difficulty"), ("by_category", "category")):
      for name, stats in (summary.get(key) or {}).items():
        out[f"{prefix}: {name}"] = stats.get("score")
    return out
  out = {"overall": _percent(summary.get("pass_rate")),
         "reward_mean": summary.get("reward_mean")}
  for key, prefix in (("difficulties", "difficulty"), ("categories", "category")):
    for name, stats in (summary.get(key) or {}).items():
      out[f"{prefix}: {name}"] = _percent(stats.get("pass_rate"))
  return out


def build(dirs: Sequence[str], names: Sequence[str] = ()) -> tuple[list[str], list[list[Any]]]:
  """(header, rows); raises ValueError naming a folder without a readable summary."""
  rows, columns = [], []
  for k, d in enumerate(dirs):
    path = os.path.join(d, "summary.json")
    try:
      with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
      raise ValueError(f"{path}: cannot read the summary: {e}") from e
    if not isinstance(summary, dict):
      raise ValueError(f"{path}: expected a JSON object")
    values = row(summary)
    columns += [c for c in values if c not in columns]
    name = names[k] if k < len(names) else os.path.basename(os.path.normpath(d))
    rows.append((name, values))
  return ["run", *columns], [[name, *(values.get(c) for c in columns)]
                             for name, values in rows]


def to_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  for r in rows:
    writer.writerow(["" if v is None else (f"{v:.4f}" if isinstance(v, float) else v)
                     for v in r])
  return buf.getvalue()


def to_markdown(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
  return summary_lib.markdown_table(header, rows) + "\n"
