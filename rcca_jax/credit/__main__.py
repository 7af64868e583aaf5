"""Token-level diagnostic weights for evaluated responses (docs/contracts.md#5-credit).

python -m rcca_jax.credit --evaluations O --responses R --tokenizer DIR --out W
    [--html report.html] [--localize]

Writes one JSON object per response of R, in R's order: task_id, sample_id, tokens,
offsets, weights (docs/method.md#5-diagnostic-weights). A response whose evaluation
record is missing, failed (`error`), has no extracted app or does not fit the response
text gets all-1.0 weights; every such case is reported, and the exit status is then 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from transformers import AutoTokenizer

from rcca_jax.credit.align import diagnostic_weights
from rcca_jax.credit.localize import localize_record
from rcca_jax.credit.report import ReportItem, render_report
from rcca_jax.data import jsonl
from rcca_jax.data.responses import BadResponseLine, load_responses


def _spans_fit(record: dict[str, Any], length: int) -> str | None:
  """Why the record's spans cannot belong to a response of `length` chars, or None."""
  spans = [("html_span", record.get("html_span"))]
  for k, issue in enumerate(record.get("issues") or []):
    for key in ("direct", "context"):
      spans.extend((f"issues[{k}].{key}", s) for s in issue.get(key) or [])
  for name, span in spans:
    if span is None:
      continue
    if (not isinstance(span, (list, tuple)) or len(span) != 2
        or not all(isinstance(v, int) for v in span) or not 0 <= span[0] <= span[1] <= length):
      return f"{name} {span!r} does not fit the response ({length} chars)"
  return None


def load_evaluations(path: str, problems: list[str]) -> dict[tuple[str, int], tuple[str, dict]]:
  """(task_id, sample_id) -> (FILE:LINE, record); bad lines and duplicates go to problems."""
  out: dict[tuple[str, int], tuple[str, dict]] = {}
  for line in jsonl.read_lines(path):
    if line.obj is None:
      problems.append(line.error)
      continue
    tid, sid = line.obj.get("task_id"), line.obj.get("sample_id")
    if not isinstance(tid, str) or not isinstance(sid, int) or isinstance(sid, bool):
      problems.append(f"{line.where}: evaluation record needs a string task_id and an "
                      f"integer sample_id")
      continue
    if (tid, sid) in out:
      problems.append(f"{line.where}: duplicate evaluation record for {tid}#{sid} "
                      f"(first at {out[(tid, sid)][0]})")
      continue
    out[(tid, sid)] = (line.where, line.obj)
  return out


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m rcca_jax.credit", description=__doc__.splitlines()[0])
  p.add_argument("--evaluations", required=True, help="evaluation records (JSON Lines)")
  p.add_argument("--responses", required=True, help="responses (JSON Lines)")
  p.add_argument("--tokenizer", required=True, help="a transformers tokenizer directory")
  p.add_argument("--out", required=True, help="where to write the weights (JSON Lines)")
  p.add_argument("--html", help="also write a report page here")
  p.add_argument("--localize", action="store_true",
                 help="recompute direct/context spans from the evidence first")
  p.add_argument("--direct", type=float, default=3.0)
  p.add_argument("--context", type=float, default=1.5)
  p.add_argument("--cap", type=float, default=4.0)
  args = p.parse_args(argv)

  start = time.monotonic()
  problems: list[str] = []
  evaluations = load_evaluations(args.evaluations, problems)
  tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, use_fast=True)
  if not tokenizer.is_fast:
    print(f"error: {args.tokenizer}: no fast tokenizer (tokenizer.json), so no character "
          "offsets to align spans with", file=sys.stderr)
    return 2
  used: set[tuple[str, int]] = set()
  rows, report = [], []
  for item in load_responses(args.responses):
    if isinstance(item, BadResponseLine):
      problems.append(item.error)
      continue
    key = (item.task_id, item.sample_id)
    where = f"{args.responses}:{item.line}"
    enc = tokenizer(item.response, add_special_tokens=False, return_offsets_mapping=True)
    offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    found = evaluations.get(key)
    record, note = None, None
    if found is None:
      note = f"{where}: no evaluation record for {item.task_id}#{item.sample_id}"
      problems.append(note)
    else:
      used.add(key)
      record = found[1]
      if record.get("error"):
        note = f"evaluation failed: {record['error']}"
      elif record.get("html_span") is None:
        note = "no app was extracted"
      elif (why := _spans_fit(record, len(item.response))) is not None:
        note = f"{found[0]}: record does not match {where}: {why}"
        problems.append(note)
      elif args.localize:
        record = localize_record(record, item.response)
    issues = (record.get("issues") or []) if record is not None and note is None else []
    weights = diagnostic_weights(offsets, issues, direct=args.direct, context=args.context,
                                 cap=args.cap)
    rows.append({"task_id": item.task_id, "sample_id": item.sample_id,
                 "tokens": [int(t) for t in enc["input_ids"]],
                 "offsets": offsets.tolist(), "weights": [float(w) for w in weights]})
    if args.html:
      report.append(ReportItem(item.task_id, item.sample_id, item.response, offsets, weights,
                               record, note))
  for key in sorted(set(evaluations) - used):
    problems.append(f"{evaluations[key][0]}: evaluation record {key[0]}#{key[1]} has no response")
  jsonl.write_lines(args.out, rows)
  if args.html:
    with open(args.html, "w", encoding="utf-8") as f:
      f.write(render_report(report, cap=args.cap))
  for msg in problems:
    print(f"warning: {msg}", file=sys.stderr)
  all_w = np.concatenate([np.asarray(r["weights"]) for r in rows]) if rows else np.zeros(0)
  share = float(np.mean(all_w > 1.0)) if len(all_w) else 0.0
  print(f"credit: {len(rows)} responses, {len(all_w)} tokens, {100 * share:.1f}% weighted, "
        f"mean weight {float(np.mean(all_w)) if len(all_w) else 1.0:.3f}, "
        f"{len(problems)} problems, {time.monotonic() - start:.1f}s -> {args.out}")
  return 0 if not problems else 1


if __name__ == "__main__":
  sys.exit(main())
