"""Chooses the RL start of the natural setting by measurement (issue 54, item 3): for
each kept SFT checkpoint, the three conditions an RL start must meet, then packs the
chosen one's parameters into the repository.

    python -m experiments.natural_v2_select W --steps=3000,4000,5000 [--json OUT]
        [--config=experiments/natural_v2.py:curriculum --set=init_from_hf=DIR]
    python -m experiments.natural_v2_select W --policy=HF_DIR [--config=...]
    python -m experiments.natural_v2_select W --pack=4000 --out=DIR [--canon=4]

Per step, two evaluations (`python -m rcca_jax.main --mode=eval --checkpoint=sft:STEP`,
8 samples per request at the RL temperature): the dev requests, and a dry sampling
round on `--dry` train requests (the RL preset's prompts, `rl.group_size` samples each):

1. greedy dev pass in [0.15, 0.6];
2. dev pass@8 - pass@1 >= 0.15 (unbiased estimator, `eval_loop.pass_at_k`);
3. at least half of the dry round's groups have a reward difference.

`--pack=STEP` writes that checkpoint's parameters as a Hugging Face Llama directory
(config.json, model.safetensors: what `init_from_hf` loads) to `--out`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from typing import Any, Sequence

CONFIG = "experiments/natural_v2.py:pilot"
BAND = (0.15, 0.6)
MIN_PASS_GAP = 0.15
MIN_SIGNAL_SHARE = 0.5


def _eval(workdir: str, step: int | str, tasks: str | None, samples: int,
          config: str = CONFIG, overrides: Sequence[str] = ()) -> str:
  """Runs one evaluation (unless its summary exists) of SFT step `step`, or of the
  run's starting policy for `step == "base"`; its output directory."""
  stem = os.path.splitext(os.path.basename(tasks))[0] if tasks else ""
  name, checkpoint = (("base_000000", "base") if step == "base"
                      else (f"sft_{int(step):06d}", f"sft:{step}"))
  out = os.path.join(workdir, "eval", f"{name}_{stem}")
  if not os.path.exists(os.path.join(out, "summary.json")):
    cmd = [sys.executable, "-m", "rcca_jax.main", f"--config={config}",
           f"--workdir={workdir}", "--mode=eval", f"--checkpoint={checkpoint}",
           f"--config.eval.samples_per_request={samples}",
           *(f"--config.{o}" for o in overrides)]
    subprocess.run(cmd + ([f"--tasks={tasks}"] if tasks else []), check=True)
  return out


def dry_tasks(workdir: str, count: int) -> str:
  """The first `count` of the RL preset's train draws (its prompts' tasks, its
  families), as a task file."""
  from experiments import natural_v2  # pylint: disable=import-outside-toplevel
  from rcca_jax.data import draws  # pylint: disable=import-outside-toplevel
  from rcca_jax.data import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
  config = natural_v2.get_config("rl")
  f = draws.FreshSpec(**config.data.fresh)
  fresh = draws.fresh_splits(tuple(config.data.families), f.train_per_family,
                             f.dev_per_family, f.seed, frozenset(), f.novel_dev_per_family,
                             f.drafting)
  path = os.path.join(workdir, "dry_round_tasks.jsonl")
  if not os.path.exists(path):
    tasks_lib.write_tasks(path, fresh["train"][:count])
  return path


def signal_share(sampled_path: str) -> float:
  """Share of requests whose sampled rewards are not all equal."""
  rewards = collections.defaultdict(list)
  with open(sampled_path, encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      if row["reward"] is not None:
        rewards[row["task_id"]].append(row["reward"])
  return sum(max(r) - min(r) > 1e-9 for r in rewards.values()) / max(len(rewards), 1)


def split_passes(dev_dir: str, split: str) -> tuple[float, float, float]:
  """(greedy pass, pass@1, pass@8) over the dev requests of `split`: "dev" (ids of train
  words) or "novel" (ids of never-trained words, task ids `NAME-fSEED-nNNNNNN`)."""
  from rcca_jax.train import eval_loop  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import rollouts  # pylint: disable=import-outside-toplevel
  def of_split(task_id: str) -> bool:
    return (task_id.rsplit("-", 1)[-1].startswith("n")) == (split == "novel")
  greedy = []
  with open(os.path.join(dev_dir, "evaluations.jsonl"), encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      if of_split(row["task_id"]):
        greedy.append(rollouts.passed_all(row))
  passes = collections.defaultdict(list)
  with open(os.path.join(dev_dir, "sampled.jsonl"), encoding="utf-8") as f:
    for line in f:
      row = json.loads(line)
      if of_split(row["task_id"]):
        passes[row["task_id"]].append(bool(row["passed"]))
  if not greedy or not passes:
    raise ValueError(f"{dev_dir}: no dev request of split {split!r}")
  p1 = sum(sum(v) / len(v) for v in passes.values()) / len(passes)
  p8 = sum(eval_loop.pass_at_k(len(v), sum(v), 8) for v in passes.values()) / len(passes)
  return sum(greedy) / len(greedy), p1, p8


def conditions(dev_dir: str, dry_dir: str, split: str = "") -> dict[str, Any]:
  """The three conditions' values and verdicts, on every dev request or on `split`'s."""
  with open(os.path.join(dev_dir, "summary.json"), encoding="utf-8") as f:
    dev = json.load(f)
  greedy, p1, p8 = ((dev["pass_rate"], dev["pass_at_1"], dev["pass_at_8"]) if not split
                    else split_passes(dev_dir, split))
  share = signal_share(os.path.join(dry_dir, "sampled.jsonl"))
  return {"split": split or "all", "greedy_pass": greedy, "pass_at_1": p1, "pass_at_8": p8,
          "pass_gap": p8 - p1, "signal_share": share,
          "dev_reward": dev["reward_mean"], "dev_gates": dev["gates_pass"],
          "splits": {k: v["pass_rate"] for k, v in dev.get("splits", {}).items()},
          "in_band": BAND[0] <= greedy <= BAND[1], "gap_ok": p8 - p1 >= MIN_PASS_GAP,
          "signal_ok": share >= MIN_SIGNAL_SHARE,
          "meets_all": (BAND[0] <= greedy <= BAND[1] and p8 - p1 >= MIN_PASS_GAP
                        and share >= MIN_SIGNAL_SHARE)}


def pack(workdir: str, step: int, out: str, canon: int = 0) -> None:
  """Writes SFT checkpoint `step`'s parameters as a Hugging Face Llama directory, with
  a zero canon convolution of width `canon` added when > 0 (`llama_checkpoint.
  with_canon`: the same policy, able to learn one in the SFT that starts from it)."""
  import ml_collections  # pylint: disable=import-outside-toplevel
  from rcca_jax.models import llama_checkpoint  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import workdir_guard  # pylint: disable=import-outside-toplevel
  # The run's own config: its model (or its init_from_hf's) is the checkpoint's shape.
  with open(os.path.join(workdir, workdir_guard.CONFIG_FILE), encoding="utf-8") as f:
    config = ml_collections.ConfigDict(json.load(f))
  with trainer_lib.Trainer(config, workdir, mode="eval") as trainer:
    _, state = trainer.checkpoints.state_for(f"sft:{step}", trainer.programs.fresh_state)
    model = trainer.programs.fmodel.merge(state.params, state.model_state)
    llama_checkpoint.write(llama_checkpoint.with_canon(model, canon) if canon else model, out)


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("workdir")
  p.add_argument("--steps", default="", help="comma-separated SFT steps to measure")
  p.add_argument("--policy", default="",
                 help="measure this Hugging Face policy directory instead (the run's "
                      "`base` checkpoint with init_from_hf=DIR; W holds its evaluations)")
  p.add_argument("--dry", type=int, default=24, help="train requests of the dry round")
  p.add_argument("--samples", type=int, default=8)
  p.add_argument("--config", default=CONFIG, help="the SFT run's config (its preset)")
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="a config override of the SFT run (repeatable), e.g. "
                      "init_from_hf=DIR")
  p.add_argument("--split", default="", choices=("", "dev", "novel"),
                 help="judge the conditions on this split's dev requests only (dev: ids "
                      "of train words, where issue 54's gain target holds)")
  p.add_argument("--json", default="", help="write the table as JSON here")
  p.add_argument("--pack", type=int, default=0, help="SFT step to pack")
  p.add_argument("--out", default="experiments/results/natural_v2/sft_policy")
  p.add_argument("--canon", type=int, default=0,
                 help="with --pack: add a zero canon convolution of this width")
  args = p.parse_args(argv)
  if args.pack:
    pack(args.workdir, args.pack, args.out, args.canon)
    print(f"SFT step {args.pack}: parameters written to {args.out}")
    return 0
  os.makedirs(args.workdir, exist_ok=True)
  dry = dry_tasks(args.workdir, args.dry)
  table = {}
  steps: list[int | str] = [int(s) for s in args.steps.split(",") if s]
  if args.policy:
    steps, args.set = ["base"], [*args.set, f"init_from_hf={args.policy}"]
  for step in steps:
    table[step] = conditions(
        _eval(args.workdir, step, None, args.samples, args.config, args.set),
        _eval(args.workdir, step, dry, args.samples, args.config, args.set), args.split)
    row = table[step]
    print(f"step {step}: greedy {row['greedy_pass']:.3f} pass@1 {row['pass_at_1']:.3f} "
          f"pass@8 {row['pass_at_8']:.3f} groups with a difference "
          f"{row['signal_share']:.2f} splits {row['splits']} -> "
          f"{'meets all' if row['meets_all'] else 'fails'}", flush=True)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(table, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
