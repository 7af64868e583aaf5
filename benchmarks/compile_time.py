"""XLA:CPU compile time against run time of one RCCA train step, per build setting.

  .venv/bin/python benchmarks/compile_time.py [--reps 5] [--batch 4] [--length 128]
      [--hidden 64] [--layers 2]

Each setting runs in its own process (XLA reads its flags once, at start-up):
- default: XLA's defaults (what training runs use);
- tests: the test suite's fast-compile flags (tests/conftest.py), an unoptimised LLVM
  back end and the elemental fusion emitters;
- and each of those two flags alone.
Each child builds the same small Ling model (KDA + MLA layers, MoE; benchmarks/
train_step.py's config), compiles the RCCA train step, runs it `--reps` times from the
same state on the same batch, and saves the updated weights. Prints per setting the
compile CPU seconds, the median step time, their ratios to the default measured in the
same run, and the largest difference of the updated weights from the default's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETTINGS = {
    "default": "",
    "llvm_O0": "--xla_backend_optimization_level=0",
    "elemental_fusions": "--xla_cpu_use_fusion_emitters=false",
    "tests": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
}


def child(args: argparse.Namespace) -> None:
  """Compile and time one step; write {compile_cpu_s, step_s} and the new weights."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import train_step as bench  # pylint: disable=import-outside-toplevel
  from rcca_jax.models.ling import LingForCausalLM  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import objective as objective_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import optim  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import train_step as ts  # pylint: disable=import-outside-toplevel

  cfg = bench.bench_config(args.hidden, args.layers)
  fmodel = ts.FunctionalModel(LingForCausalLM(cfg, rngs=nnx.Rngs(0)))
  opt = optim.OptimizerConfig(learning_rate=1e-3, total_steps=1000)
  objective = ts.PolicyObjective(objective_lib.preset("rcca"), group_size=4)
  step = ts.make_train_step(fmodel, objective, opt, ts.StepConfig())
  batch = bench.make_batch(np.random.default_rng(0), args.batch, args.length,
                           cfg.vocab_size, 4)
  state = ts.init_state(fmodel, opt)
  start = time.process_time()
  compiled = jax.jit(step).lower(state, batch).compile()
  compile_cpu_s = time.process_time() - start
  new_state, metrics = compiled(state, batch)
  jax.block_until_ready((new_state, metrics))
  times = []
  for _ in range(args.reps):
    start = time.perf_counter()
    jax.block_until_ready(compiled(state, batch))
    times.append(time.perf_counter() - start)
  leaves = [np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(new_state.params)]
  np.save(args.out + ".npy", np.concatenate(leaves))
  with open(args.out + ".json", "w", encoding="utf-8") as f:
    json.dump({"compile_cpu_s": compile_cpu_s, "step_s": statistics.median(times)}, f)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--reps", type=int, default=5)
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--length", type=int, default=128)
  parser.add_argument("--hidden", type=int, default=64)
  parser.add_argument("--layers", type=int, default=2)
  parser.add_argument("--out", help=argparse.SUPPRESS)  # set for the child processes
  args = parser.parse_args()
  if args.out:
    child(args)
    return

  import numpy as np  # pylint: disable=import-outside-toplevel
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for name, flags in SETTINGS.items():
      out = os.path.join(tmp, name)
      env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags,
                 JAX_ENABLE_COMPILATION_CACHE="false")
      subprocess.run([sys.executable, __file__, f"--out={out}", *sys.argv[1:]],
                     env=env, check=True)
      with open(out + ".json", encoding="utf-8") as f:
        results[name] = json.load(f)
      results[name]["weights"] = np.load(out + ".npy")
  base = results["default"]
  print(f"RCCA train step, hidden {args.hidden}, {args.layers} layers, batch "
        f"{args.batch} x {args.length}; ratios against the default in this run")
  for name, res in results.items():
    diff = float(np.abs(res["weights"] - base["weights"]).max())
    print(f"{name:18s} compile {res['compile_cpu_s']:6.2f} CPU-s "
          f"({res['compile_cpu_s'] / base['compile_cpu_s']:.2f}x)  step "
          f"{res['step_s'] * 1e3:8.1f} ms ({res['step_s'] / base['step_s']:.2f}x)  "
          f"max |weights - default| {diff:.2e}  [{SETTINGS[name] or 'no flags'}]")


if __name__ == "__main__":
  main()
