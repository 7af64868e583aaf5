"""The pilot's copy curve: SFT loss beside the no-copy floor, and at each dev evaluation
the teacher-forced copy rates and greedy pass (issue 54, item 2).

    python -m experiments.natural_v2_curve W [--json OUT]

The floor (`copying.no_copy_floor`) is the loss per response token a policy pays when it
writes everything but the request's values perfectly: measured on `--drafts` train
draws of the run's families (equal shares, as the SFT mixes them). A loss under it
means the policy copies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import Any, Sequence

import numpy as np

from rcca_jax.data.families import FAMILIES
from rcca_jax.data.families import copying
from rcca_jax.train import sections

KINDS = ("w1", "w2", "label", "number")


def floor(families: Sequence[str], tokenizer: Any, drafts: int = 300) -> dict[str, float]:
  """The no-copy floor of each family and of their equal mixture, and the mixture's
  floor for a policy that copies nothing even within its own app."""
  count = copying.sft_token_counter(tokenizer)
  out, mixed = {}, []
  for name in families:
    rng = random.Random(f"floor:{name}")
    ds = [FAMILIES[name].draft(rng, "train") for _ in range(drafts)]
    out[name] = copying.no_copy_floor(ds, count)
    mixed += ds
  out["all"] = copying.no_copy_floor(mixed, count)
  out["all, no copy even within the app"] = copying.no_copy_floor(mixed, count, True)
  return out


def curve(workdir: str, every: int = 250) -> list[dict[str, Any]]:
  """Per evaluation step: the mean SFT loss since the previous one, greedy pass, gates,
  and the copy metrics."""
  rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"),
                                             encoding="utf-8")]
  sft = [(r["step"], r["loss"]) for r in rows if r.get("stage") == "sft" and "loss" in r]
  out = []
  for r in rows:
    if r.get("stage") != "eval" or r.get("after") != "sft":
      continue
    losses = [l for s, l in sft if r["step"] - every < s <= r["step"]]
    row = {"step": r["step"], "loss": float(np.mean(losses)) if losses else None,
           "pass": r["pass_rate"], "gates": r["gates_pass"], "reward": r["reward_mean"]}
    for split in ("dev", "novel"):
      row[f"{split}_pass"] = r.get(f"split/{split}/pass_rate")
      for kind in KINDS:
        row[f"{split}_{kind}"] = r.get(f"copy/{split}/copied_{kind}")
        row[f"{split}_p_{kind}"] = r.get(f"copy/{split}/p_{kind}")
      row[f"{split}_entropy_w1"] = r.get(f"copy/{split}/entropy_w1")
      row[f"{split}_entropy_tokens"] = r.get(f"copy/{split}/entropy_tokens")
    out.append(row)
  return out


def _fmt(x: Any) -> str:
  return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("workdir")
  p.add_argument("--json", default="")
  p.add_argument("--drafts", type=int, default=300)
  args = p.parse_args(argv)
  with open(os.path.join(args.workdir, "job_config.json"), encoding="utf-8") as f:
    job = json.load(f)
  families = job["data"]["families"]
  floors = floor(families, sections.load_tokenizer(job["data"]["tokenizer"]), args.drafts)
  rows = curve(args.workdir)
  print("no-copy floor (nats/token): " + ", ".join(f"{k} {v:.3f}" for k, v in floors.items()))
  cols = ["step", "loss", "pass", "gates"] + [f"dev_{k}" for k in KINDS] + [
      "dev_pass", "novel_w1", "novel_w2", "novel_pass", "dev_entropy_w1",
      "dev_entropy_tokens"]
  print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
  for row in rows:
    print("| " + " | ".join(_fmt(row.get(c)) for c in cols) + " |")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"floor": floors, "curve": rows}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
