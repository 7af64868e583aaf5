"""The exact site metrics and the sampled pass@1 of an SFT checkpoint: values and cost.

  .venv/bin/python benchmarks/eval_metrics.py --workdir DIR [--repeats 2]
      [--samples 8] [--config experiments/ablation_small.py]

DIR holds an SFT run of the config (`DIR/checkpoints/sft/`, `DIR/controlled_tasks.jsonl`;
e.g. `python -m rcca_jax.main --config=experiments/ablation_small.py --workdir=DIR
--config.rl.num_steps=0`). Runs the trainer's evaluation path on the latest SFT
checkpoint `--repeats` times (DIR/eval/metrics_cost_N/; the first pays the
compilations) and prints, per run, the evaluation's seconds and the parts of it the
site metrics (`sites_s`) and the sampled pass@1 (`sampled_s`) took; then, per task,
the teacher-forced p_bug of each bug site against the task's configured rate
(docs/ablation.md#metrics: after SFT they agree to about +-0.03).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import jax
import numpy as np

from rcca_jax.credit import sites as sites_lib
from rcca_jax.train import trainer as trainer_lib


def _config(path: str, workdir: str, samples: int):
  spec = importlib.util.spec_from_file_location("experiment_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  config.data.controlled.path = os.path.join(os.path.abspath(workdir),
                                             "controlled_tasks.jsonl")
  config.eval.samples_per_request = samples
  return config


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--config", default="experiments/ablation_small.py")
  parser.add_argument("--samples", type=int, default=8)
  parser.add_argument("--repeats", type=int, default=2)
  args = parser.parse_args()
  trainer = trainer_lib.Trainer(_config(args.config, args.workdir, args.samples),
                                args.workdir, mode="eval")
  try:
    stage, state = trainer.checkpoints.state_for("sft", trainer.programs.fresh_state)
    step = int(jax.device_get(state.step))
    tasks = trainer.tasks.dev()
    summary = {}
    print(f"{stage} step {step}, {len(tasks)} requests, {args.samples} samples each")
    print("run | eval s | sites_s | sampled_s | greedy pass | pass@1 | bug_prob_mean")
    for i in range(args.repeats):
      print(f"-- run {i} starts", flush=True)  # (a marker for JAX_LOG_COMPILES=1 logs)
      t0 = time.time()
      summary = trainer.dev.run(
          state, tasks, f"metrics_cost_{i}", f"{stage} step {step}", stage, step)
      print(f"{i} | {time.time() - t0:.1f} | {summary.get('sites_s', 0.0):.1f} | "
            f"{summary.get('sampled_s', 0.0):.1f} | {summary['pass_rate']:.3f} | "
            f"{summary.get('pass_at_1', float('nan')):.3f} | "
            f"{summary.get('bug_prob_mean') or float('nan'):.3f}", flush=True)
  finally:
    trainer.close()
  rates = {(t.id, s.name): s.rate for t in tasks for s in sites_lib.sites_of(t)
           if s.kind == "bug"}
  print("\ntask | site | rate | p_bug | p_bug - rate")
  diffs = []
  for rec in summary.get("sites", []):
    if rec["kind"] != "bug":
      continue
    rate = rates[(rec["task_id"], rec["site"])]
    diffs.append(rec["p_bug"] - rate)
    print(f"{rec['task_id']} | {rec['site']} | {rate:.2f} | {rec['p_bug']:.3f} | "
          f"{diffs[-1]:+.3f}")
  if diffs:
    print(f"mean p_bug {summary['bug_prob_mean']:.3f}, mean rate "
          f"{np.mean(list(rates.values())):.3f}, mean |p_bug - rate| "
          f"{np.mean(np.abs(diffs)):.3f}, max {np.max(np.abs(diffs)):.3f}")


if __name__ == "__main__":
  main()
