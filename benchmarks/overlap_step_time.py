"""RL step time on the tiny config with `rl.overlap_steps=1` vs 0, in the same run.

  .venv/bin/python benchmarks/overlap_step_time.py [--sft-steps 300] [--rl-steps 6]
      [--rounds 1] [--workdir DIR]

One SFT run of `experiments/tiny_natural.py` (eval off); its directory is copied for each
arm, which then runs its RL steps in a fresh `python -m rcca_jax.main` process (the
same prompts and seeds). An arm's step time is the median `step_s` of its RL rows
without the first (compilation); with `--rounds` > 1 the arms alternate and the
medians are over all rounds. Prints each arm's median sample / eval / train / step
seconds and the ratio overlap / none (< 1: overlap is faster).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

from rcca_jax.train import run_log

REPO = pathlib.Path(__file__).resolve().parent.parent
PHASES = ("sample_s", "eval_s", "train_s", "step_s")


def _main(workdir: str, *flags: str) -> None:
  cmd = [sys.executable, "-m", "rcca_jax.main", "--config=experiments/tiny_natural.py",
         f"--workdir={workdir}", "--config.eval.enabled=False", *flags]
  env = dict(os.environ, JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false")
  subprocess.run(cmd, cwd=REPO, env=env, check=True)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--sft-steps", type=int, default=300)
  parser.add_argument("--rl-steps", type=int, default=6)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--workdir", default=None, help="default: a temporary directory")
  args = parser.parse_args()
  root = args.workdir or tempfile.mkdtemp(prefix="overlap_bench_")
  sft_dir = os.path.join(root, "sft")
  sft = f"--config.sft.num_steps={args.sft_steps}"
  if not os.path.exists(os.path.join(sft_dir, "checkpoints", "sft")):
    _main(sft_dir, sft, "--config.rl.num_steps=0")
  times: dict[int, dict[str, list[float]]] = {k: {p: [] for p in PHASES} for k in (0, 1)}
  for round_ in range(args.rounds):
    for overlap in (0, 1):
      arm = os.path.join(root, f"overlap{overlap}_round{round_}")
      shutil.rmtree(arm, ignore_errors=True)
      shutil.copytree(sft_dir, arm)
      _main(arm, sft, f"--config.rl.num_steps={args.rl_steps}",
            f"--config.rl.overlap_steps={overlap}")
      rows = [r for r in run_log.read_rows(arm) if r["stage"] == "rl"][1:]
      for phase in PHASES:
        times[overlap][phase] += [r[phase] for r in rows]
  median = {k: {p: statistics.median(v) for p, v in t.items()} for k, t in times.items()}
  for overlap in (0, 1):
    print(f"overlap_steps={overlap}: " + ", ".join(
        f"{p} {median[overlap][p]:.2f}" for p in PHASES) +
          f" (median of {len(times[overlap]['step_s'])} steps)")
  print(f"step time overlap / none: {median[1]['step_s'] / median[0]['step_s']:.3f}")
  print(f"runs under {root}")


if __name__ == "__main__":
  main()
