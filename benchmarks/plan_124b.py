"""Ahead-of-time memory plan of experiments/moe_124b.py on its 256-device mesh.

  .venv/bin/python benchmarks/plan_124b.py [--config.FIELD=VALUE ...]

A thin caller of `python -m rcca_jax.main --mode=plan --config=experiments/moe_124b.py`
(rcca_jax/train/plan.py: fake CPU devices, the SFT step, the RL step and the log-prob
function compiled with the trainer's shardings, XLA's per-device memory of each; about
3 minutes on 2 CPU cores). Extra arguments are passed on, e.g.
`--config.rl.max_new_tokens=8192` or `--config.mesh.fsdp=64 --config.mesh.expert=4`.
The last stdout line is the plan's JSON object; the exit status is main's (2: the
config is invalid for its mesh).
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
  return subprocess.call([sys.executable, "-m", "rcca_jax.main", "--mode=plan",
                          "--config=experiments/moe_124b.py", *sys.argv[1:]], cwd=ROOT)


if __name__ == "__main__":
  sys.exit(main())
