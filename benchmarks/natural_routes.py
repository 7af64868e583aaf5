"""What a step costs on this machine for the two routes to a natural setting (issue 38),
measured by the real job in the same run: (a) `experiments/natural_small.py`'s small
Llama trained from scratch, (b) SmolLM2-135M-Instruct (`experiments/smollm2_natural.py`).

  .venv/bin/python benchmarks/natural_routes.py [--sft-steps 4] [--rl-steps 3]
      [--routes a,b] [--workdir DIR]

Each route runs `python -m rcca_jax.main` with the same families
(`natural_small.FAMILIES`), SFT batches of 2 examples, RL steps of 2 prompts x 8
samples at 352 new tokens and no dev evaluation. Per route it prints the median SFT
seconds per example and the median RL sample / grade / train / step seconds, leaving
out each stage's first step (compilation); then route b's ratios to route a. The
policies are barely trained, so responses run to the token limit (the worst case for
sampling, the same for both) and grading is of broken apps (not representative:
grading is a property of the apps, not of the route).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from rcca_jax.train import run_log

REPO = pathlib.Path(__file__).resolve().parent.parent
ROUTES = {"a": "experiments/natural_small.py", "b": "experiments/smollm2_natural.py"}
RL_PHASES = ("sample_s", "eval_s", "train_s", "step_s")


def run_route(route: str, workdir: str, sft_steps: int, rl_steps: int) -> dict[str, float]:
  """Runs one route's job; its medians (SFT seconds per example, RL phases)."""
  flags = [f"--config={REPO / ROUTES[route]}", f"--workdir={workdir}",
           "--config.data.families=('dark_mode','char_counter','counter')",
           f"--config.sft.num_steps={sft_steps}", "--config.sft.batch_size=2",
           "--config.sft.log_every=1", f"--config.rl.num_steps={rl_steps}",
           "--config.rl.group_size=8", "--config.rl.prompts_per_step=2",
           "--config.rl.max_new_tokens=352", "--config.eval.enabled=False",
           "--config.checkpoint.keep_best=False", "--config.eval.workers=2"]
  if route == "a":
    flags += ["--config.data.fresh.train_per_family=100"]
  else:
    flags += ["--config.micro_batches=1", "--config.rl.max_prompt_len=256"]
  env = dict(os.environ, JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false")
  start = time.time()
  subprocess.run([sys.executable, "-m", "rcca_jax.main", *flags], cwd=REPO, env=env,
                 check=True)
  rows = run_log.read_rows(workdir)
  sft = [r["step_s"] for r in rows if r["stage"] == "sft"][1:]
  rl = [r for r in rows if r["stage"] == "rl"][1:]
  out = {"wall_s": time.time() - start,
         "sft_s_per_example": statistics.median(sft) / 2 if sft else float("nan")}
  for phase in RL_PHASES:
    out[phase] = statistics.median(r[phase] for r in rl) if rl else float("nan")
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--sft-steps", type=int, default=4)
  parser.add_argument("--rl-steps", type=int, default=3)
  parser.add_argument("--routes", default="a,b")
  parser.add_argument("--workdir", default=None, help="default: a temporary directory")
  args = parser.parse_args()
  root = args.workdir or tempfile.mkdtemp(prefix="natural_routes_")
  results = {}
  for route in args.routes.split(","):
    results[route] = run_route(route, os.path.join(root, route), args.sft_steps,
                               args.rl_steps)
    cells = " ".join(f"{k} {v:.2f}" for k, v in results[route].items())
    print(f"route {route} ({ROUTES[route]}): {cells}", flush=True)
  if "a" in results and "b" in results:
    ratios = " ".join(f"{k} {results['b'][k] / results['a'][k]:.1f}x"
                      for k in ("sft_s_per_example", "sample_s", "train_s", "step_s"))
    print(f"route b / route a: {ratios}")


if __name__ == "__main__":
  main()
