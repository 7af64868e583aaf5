"""One SFT step at several `model.attention_block_size` values, alternated in one process.

    .venv/bin/python benchmarks/attention_block_ab.py \
        [--config experiments/smollm2_natural.py:smoke] [--rows 1] [--length 512] \
        [--blocks 512,128] [--reps 6]

Builds the config's model once per block size (the same weights), times the jitted SFT
step on one batch of random tokens, the sizes alternating (each repetition reversed),
and measures the matmul peak (`step_roofline.peak_gflops`) before each repetition.
Prints each size's times, median, achieved GFLOP/s (`step_roofline.model_flops`) and
its share of the best peak of the run (the conservative reading on a noisy machine),
and the losses (blockwise and dense attention differ by float32 rounding only).
docs/performance.md, "SmolLM2's train step", has its numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import step_roofline  # pylint: disable=wrong-import-position
from rcca_jax.base import host_allocator
from rcca_jax.rl import optim, sft, train_step
from rcca_jax.train import programs as programs_lib
from rcca_jax.train import sections


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default="experiments/smollm2_natural.py:smoke")
  parser.add_argument("--rows", type=int, default=1)
  parser.add_argument("--length", type=int, default=512)
  parser.add_argument("--blocks", default="512,128")
  parser.add_argument("--reps", type=int, default=6)
  args = parser.parse_args()
  opt = optim.OptimizerConfig(learning_rate=1e-4, total_steps=100)
  steps, states = {}, {}
  for block in (int(b) for b in args.blocks.split(",")):
    config = step_roofline.load_config(args.config)
    config.model.attention_block_size = block
    progs = programs_lib.Programs(sections.job_config(config))
    steps[block] = jax.jit(train_step.make_train_step(
        progs.fmodel, sft.NextTokenObjective(), opt, train_step.StepConfig()))
    states[block] = train_step.init_state(progs.fmodel, opt, 0)
    cfg = progs.model_cfg
  batch = step_roofline.sft_batch(np.random.default_rng(0), args.rows, args.length,
                                  cfg.vocab_size, 8)
  n_params = sum(x.size for x in jax.tree.leaves(next(iter(states.values())).params))
  flops = step_roofline.model_flops(cfg, n_params, args.rows, args.length, True)
  for block, step in steps.items():
    _, metrics = jax.block_until_ready(step(states[block], batch))
    print(f"block {block}: loss {float(metrics['loss']):.8f}")
  times, peaks = {b: [] for b in steps}, []
  for rep in range(args.reps):
    peaks.append(step_roofline.peak_gflops(args.rows * args.length, cfg.hidden_size,
                                           cfg.intermediate_size))
    for block in (list(steps) if rep % 2 == 0 else list(steps)[::-1]):
      t0 = time.perf_counter()
      jax.block_until_ready(steps[block](states[block], batch))
      times[block].append(time.perf_counter() - t0)
  peak = max(peaks)
  print(f"peak {peak:.1f} GFLOP/s (median {statistics.median(peaks):.1f})")
  for block, seconds in times.items():
    median = statistics.median(seconds)
    print(f"block {block}: {[round(s, 3) for s in seconds]} median {median:.3f} s, "
          f"{flops / median / 1e9:.1f} GFLOP/s, {flops / median / 1e9 / peak:.1%} of the "
          "best peak")


if __name__ == "__main__":
  host_allocator.preload_tcmalloc()
  main()
