"""Decode time per token with the written-out Gumbel noise against `jax.random`'s, in
one process, alternated (issue 50; docs/performance.md, "Decode: the Gumbel noise
written out").

    .venv/bin/python benchmarks/decode_noise.py [--config experiments/tiny_cpu.py]
        [--rows 24 --prompt 192 --new 256 --rounds 4]

A randomly initialised model of the config (the time per token does not depend on the
weights) samples `--rows` random prompts at temperature 1, `--new` tokens each, with
`noise.gumbel_rows` and then with the same noise drawn by `jax.random` (the decode
loop's noise before), each compiled afresh every round. Prints the ms per decoded
token of each round (a `--new`-token call minus a 1-token call), the best of each and
their ratio, and whether the two sampled the same tokens (they must).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import jax
import numpy as np
from flax import nnx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import step_roofline  # pylint: disable=wrong-import-position
from rcca_jax.models import families  # pylint: disable=wrong-import-position
from rcca_jax.sampling import noise  # pylint: disable=wrong-import-position
from rcca_jax.train import sections  # pylint: disable=wrong-import-position

# `rcca_jax.sampling.generate` is also the name of the function the package exports.
generate_lib = importlib.import_module("rcca_jax.sampling.generate")


VARIANTS = {"jax.random": noise.jax_random_rows, "written out": noise.gumbel_rows}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default="experiments/tiny_cpu.py")
  parser.add_argument("--rows", type=int, default=24)
  parser.add_argument("--prompt", type=int, default=192)
  parser.add_argument("--new", type=int, default=256)
  parser.add_argument("--rounds", type=int, default=4)
  args = parser.parse_args()
  job = sections.job_config(step_roofline.load_config(args.config))
  cfg = sections.model_config(job, sections.load_tokenizer(job.data.tokenizer))
  model = families.build(cfg, nnx.Rngs(0))
  rng = np.random.default_rng(0)
  prompts = [list(rng.integers(3, cfg.vocab_size, args.prompt)) for _ in range(args.rows)]

  def sample(variant: str, new: int) -> np.ndarray:
    generate_lib.noise_lib.gumbel_rows = VARIANTS[variant]  # read when `_decode` traces
    out = generate_lib.generate(model, prompts, max_new_tokens=new, temperature=1.0,
                                seed=0)
    return np.asarray(out.tokens)

  tokens, ms = {}, {name: [] for name in VARIANTS}
  try:
    for _ in range(args.rounds):
      for name in VARIANTS:
        jax.clear_caches()  # `_decode` traces again with this variant's noise
        tokens[name] = sample(name, args.new)
        sample(name, 1)
        t0 = time.perf_counter()
        sample(name, 1)
        t1 = time.perf_counter()
        sample(name, args.new)
        t2 = time.perf_counter()
        ms[name].append(((t2 - t1) - (t1 - t0)) / (args.new - 1) * 1e3)
  finally:
    generate_lib.noise_lib.gumbel_rows = noise.gumbel_rows
  print(f"{args.config}: {args.rows} rows x {args.new} tokens at T = 1, ms per token")
  for name, values in ms.items():
    print(f"{name:<12} " + " ".join(f"{v:.3f}" for v in values) + f"  best {min(values):.3f}")
  print(f"speed-up (best vs best): {min(ms['jax.random']) / min(ms['written out']):.2f}x")
  same = all(np.array_equal(tokens["jax.random"], t) for t in tokens.values())
  print(f"the same tokens: {same}")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
