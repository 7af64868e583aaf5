"""The one-step instrument's measured lines on disk (experiments/credit_onestep.py):
`pairs.jsonl` (one line per measured batch), `meta.json` (the checkpoint, arms and
layout they measure), and how measurements join: `merge_lines` (other arms on the same
batches), `join_lines` (other batches), `joined_output` (a directory, or a committed
`summary.json` whose `pairs.jsonl` is on another machine)."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence


def read_lines(path: str) -> dict[int, dict]:
  """The measured batches of a `pairs.jsonl` (step -> line; {} without the file)."""
  if not os.path.exists(path):
    return {}
  with open(path, encoding="utf-8") as f:
    lines = [json.loads(text) for text in f if text.strip()]
  return {line["step"]: line for line in lines}


def summary_lines(summary: Mapping[str, Any]) -> dict[int, dict]:
  """A summary's measured batches (step -> line) rebuilt from its raw pairs and update
  metrics: what a committed `summary.json` gives to `--join` on a machine without its
  `pairs.jsonl`. The lines carry no per-batch properties (the summary keeps their
  shares only) and share its measuring seconds evenly."""
  steps = summary["steps"]
  lines = {s: {"step": s, "pairs": [], "updates": {},
               "measure_s": summary["measure_s"] / max(len(steps), 1)} for s in steps}
  for pair in summary["pairs"]:
    lines[pair["step"]]["pairs"].append(pair)
  for update in summary["updates"]:
    lines[update["step"]]["updates"] = {k: v for k, v in update.items() if k != "step"}
  return lines


def joined_output(path: str) -> tuple[dict[str, Any], dict[int, dict]]:
  """The meta and lines (step -> line) of a `--join` path: a directory's `meta.json`
  and `pairs.jsonl`; for a committed summary `DIR/summarySUFFIX.json`, the
  `DIR/metaSUFFIX.json` beside it (a relabelled summary has its own) with the summary's
  own arms (a merged summary holds more arms than its last invocation's meta), and
  `summary_lines` of the summary."""
  if not path.endswith(".json"):
    return read_meta(path), read_lines(os.path.join(path, "pairs.jsonl"))
  folder, name = os.path.split(path)
  if not name.startswith("summary"):
    raise ValueError(f"--join: {path} is not a summary*.json")
  with open(os.path.join(folder, "meta" + name[len("summary"):]), encoding="utf-8") as f:
    meta = json.load(f)
  with open(path, encoding="utf-8") as f:
    summary = json.load(f)
  meta["arms"] = summary["arms"]
  return meta, summary_lines(summary)


# How far two measurements' margins before the update may differ and still be of one
# checkpoint: a margin is the difference of two sums of at most ~2,000 answer tokens'
# log-probs, and another scoring layout (rows, width) reorders the float32 sums inside
# each token's logits and softmax, moving each log-prob by a few units of float32
# rounding at |logits| <~ 10 (<~ 1e-6), so a margin by 2e-3 at the very worst (1.7e-6
# measured between low_overlap's first layout and the fitted rows); another checkpoint
# (one update of lr 2e-4 moves margins by 0.05-0.9) differs by far more.
MERGE_BEFORE_ATOL = 2e-3


def merge_lines(lines: Mapping[int, dict], others: Sequence[Mapping[int, dict]]
                ) -> dict[int, dict]:
  """`lines` joined with other measurements of the same batches (other arms, other
  invocations): per step measured in all of them, each pair's `after` holds every
  arm, each other arm's shifted by the two margins before so that its change is the
  one it measured; a pair's `before` must agree within `MERGE_BEFORE_ATOL` (the same
  checkpoint and sites), else ValueError."""
  steps = sorted(set(lines).intersection(*others))
  out = {}
  for step in steps:
    line = json.loads(json.dumps(lines[step]))
    keyed = {(p["task_id"], p["site"]): p for p in line["pairs"]}
    for other in others:
      theirs = {(p["task_id"], p["site"]): p for p in other[step]["pairs"]}
      if set(theirs) != set(keyed):
        raise ValueError(f"step {step}: the measurements hold different sites")
      for key, pair in theirs.items():
        shift = keyed[key]["before"] - pair["before"]
        if abs(shift) > MERGE_BEFORE_ATOL:
          raise ValueError(f"step {step}, site {key}: margins before the update differ "
                           f"({pair['before']} vs {keyed[key]['before']}): not the same "
                           "checkpoint")
        keyed[key]["after"].update({a: m + shift for a, m in pair["after"].items()})
      line["updates"].update(other[step]["updates"])
      line["measure_s"] += other[step]["measure_s"]
    out[step] = line
  return out


def join_lines(lines: Mapping[int, dict], others: Sequence[Mapping[int, dict]]
               ) -> dict[int, dict]:
  """`lines` with the steps of other measurements of the same checkpoint added (other
  invocations over other batches, e.g. with fewer arms); a step in both keeps `lines`'."""
  out = {}
  for other in others:
    out.update(other)
  out.update(lines)
  return dict(sorted(out.items()))


def read_meta(out: str) -> dict[str, Any]:
  with open(os.path.join(out, "meta.json"), encoding="utf-8") as f:
    return json.load(f)


def claim_out(out: str, meta: Mapping[str, Any]) -> None:
  """`out/meta.json` says which checkpoint and arms its lines measure; another run's
  directory is refused."""
  os.makedirs(out, exist_ok=True)
  path = os.path.join(out, "meta.json")
  if os.path.exists(path):
    have = read_meta(out)
    if have != json.loads(json.dumps(meta)):
      raise ValueError(f"{out} holds measurements of {have}, not {dict(meta)}")
    return
  with open(path, "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1)

