"""`make demo`'s job here and at another commit, in one run (issue 50).

    .venv/bin/python benchmarks/demo_step.py --baseline c0b9a51 [--workdir DIR]
        [--this_set rl.shared_prefix=True ...]

Runs the demo's command (`python -m rcca_jax.main --config=experiments/tiny_cpu.py`, a
fresh workdir and grading cache each) at `--baseline` (a git worktree), then in this
tree, nothing else of this script's running beside them. Prints per tree the wall
time, the median SFT step and the medians of the RL step's phases (sampling, grading,
training, the whole step; each stage's first step, which compiles, left out), the
ratios, and both runs' pass rate by RL step: the demo's outcome must not change. A tree
whose RL rows count their compiles (`compiles`, `base/compile_count.py`) also gets
`steady_step_s`, the median step over the steps that compiled nothing.
`--this_set` adds `--config.KEY=VALUE` overrides to this tree's run only.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from rcca_jax.train import outcome
from rcca_jax.train import run_log

REPO = pathlib.Path(__file__).resolve().parent.parent
PHASES = ("sample_s", "eval_s", "train_s", "step_s")


def run_demo(tree: str, workdir: str, overrides: tuple[str, ...] = ()
             ) -> dict[str, float]:
  """The demo's job in `tree` (with `--config.` overrides); its wall seconds, median SFT
  step and RL phases."""
  env = dict(os.environ, PYTHONPATH=tree)
  start = time.time()
  subprocess.run([sys.executable, "-m", "rcca_jax.main",
                  "--config=experiments/tiny_cpu.py", f"--workdir={workdir}",
                  f"--config.eval.grading_cache={workdir}/grading_cache",
                  *(f"--config.{o}" for o in overrides)],
                 cwd=tree, env=env, check=True)
  rows = run_log.read_rows(workdir)
  out = {"wall_s": time.time() - start,
         "sft_step_s": statistics.median(r["step_s"] for r in rows
                                         if r["stage"] == "sft" and "step_s" in r)}
  rl = [r for r in rows if r["stage"] == "rl"][1:]
  for phase in PHASES:
    out[phase] = statistics.median(r[phase] for r in rl)
  steady = [r["step_s"] for r in rl if r.get("compiles") == 0]
  out["steady_step_s"] = statistics.median(steady) if steady else float("nan")
  print("RL steps compiling:", {r["step"]: (int(r["compiles"]), round(r["compile_s"], 1))
                               for r in rows if r["stage"] == "rl" and r.get("compiles")},
        flush=True)
  print(outcome.pass_curve(rows), flush=True)
  return out


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--baseline", required=True, help="a commit")
  parser.add_argument("--workdir", default="", help="default: a temporary directory")
  parser.add_argument("--this_set", nargs="*", default=[],
                      help="KEY=VALUE config overrides for this tree's run")
  args = parser.parse_args()
  root = args.workdir or tempfile.mkdtemp(prefix="demo_step_")
  base = os.path.join(root, "baseline_tree")
  subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", base,
                  args.baseline], check=True, capture_output=True)
  try:
    results = {}
    for name, tree in (("baseline", base), ("this", str(REPO))):
      print(f"== {name} ({tree})", flush=True)
      overrides = tuple(args.this_set) if name == "this" else ()
      results[name] = run_demo(tree, os.path.join(root, name), overrides)
  finally:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", base],
                   capture_output=True)
  print(f"\nbaseline {args.baseline} vs this tree (`make demo`'s job, medians)")
  print(f"{'':<12}{'baseline s':>11}{'this s':>9}{'speed-up':>10}")
  for key in ("wall_s", "sft_step_s", *PHASES, "steady_step_s"):
    b, t = results["baseline"][key], results["this"][key]
    ratio = f"{'-':>10}" if math.isnan(b) or math.isnan(t) else f"{b / t:>9.2f}x"
    print(f"{key:<12}{b:>11.2f}{t:>9.2f}{ratio}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
