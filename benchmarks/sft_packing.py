"""SFT packing against one example per row, on a config's own SFT examples (issue 50).

    .venv/bin/python benchmarks/sft_packing.py [--config experiments/natural_v2.py:curriculum]
        [--steps 6] [--reps 2] [--max_len N]

Draws `--examples` SFT examples from the config's families (the chat prompt and the
reference app, tokenized as the trainer does), and times, interleaved in one process,
the SFT step on the same batches of `sft.batch_size` examples laid out two ways: one
example per row padded to `sft.max_len` (`batching.sft_batch`), and packed into the
fewest rows that hold 98% of batches (`batching.packed_rows`, `packed_sft_batch`; a
batch that does not fit falls back to the first layout, as in the trainer). Prints the
rows, the share of token slots holding a real token, seconds per step of each (median
over `reps` passes of `steps` batches), the speed-up and the largest difference of the
two layouts' losses on the same batches (float32 rounding: the sums run in another
order).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import jax
import numpy as np
from flax import nnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.step_roofline import draw_sft_examples, load_config  # pylint: disable=wrong-import-position
from rcca_jax.data import batching  # pylint: disable=wrong-import-position
from rcca_jax.models import families  # pylint: disable=wrong-import-position
from rcca_jax.rl import optim  # pylint: disable=wrong-import-position
from rcca_jax.rl import sft as sft_lib  # pylint: disable=wrong-import-position
from rcca_jax.rl import train_step  # pylint: disable=wrong-import-position
from rcca_jax.train import sections  # pylint: disable=wrong-import-position


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default="experiments/natural_v2.py:curriculum")
  parser.add_argument("--examples", type=int, default=400)
  parser.add_argument("--steps", type=int, default=6)
  parser.add_argument("--reps", type=int, default=2)
  parser.add_argument("--max_len", type=int, default=0, help="override sft.max_len")
  args = parser.parse_args(argv)

  config = load_config(args.config)
  if args.max_len:
    config.sft.max_len = args.max_len
  config.init_from_hf = ""  # the architecture from config.model; weights do not matter
  job = sections.job_config(config)
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  examples = draw_sft_examples(job, tokenizer, args.examples, random.Random(0))
  size, max_len = job.sft.batch_size, job.sft.max_len
  rows = batching.packed_rows([len(e[0]) for e in examples], size, max_len)
  batches = [examples[i * size:(i + 1) * size] for i in range(args.steps)]
  layouts = {
      "one per row": [batching.sft_batch(b, max_len=max_len, pad_id=0) for b in batches],
      "packed": [batching.sft_rows(b, rows=rows, max_len=max_len, pad_id=0)
                 for b in batches]}

  fmodel = train_step.FunctionalModel(families.build(sections.model_config(job, tokenizer),
                                                     nnx.Rngs(0)))
  opt = optim.OptimizerConfig(learning_rate=1e-4, total_steps=100)
  step = jax.jit(train_step.make_train_step(fmodel, sft_lib.NextTokenObjective(), opt,
                                            train_step.StepConfig()))
  state = train_step.init_state(fmodel, opt, 0)
  losses = {name: [float(step(state, b)[1]["loss"]) for b in bs]  # compiles every shape
            for name, bs in layouts.items()}
  seconds: dict[str, list[float]] = {name: [] for name in layouts}
  for _ in range(args.reps):
    for name, bs in layouts.items():
      t0 = time.perf_counter()
      for b in bs:
        jax.block_until_ready(step(state, b))
      seconds[name].append((time.perf_counter() - t0) / len(bs))

  real = sum(len(e[0]) for b in batches for e in b)
  print(f"{args.config}: {len(batches)} batches of {size} examples, max_len {max_len}, "
        f"mean example {np.mean([len(e[0]) for e in examples]):.0f} tokens")
  base = statistics.median(seconds["one per row"])
  for name, bs in layouts.items():
    slots = sum(b["input_ids"].size for b in bs)
    s = statistics.median(seconds[name])
    print(f"{name:<12} rows {bs[0]['input_ids'].shape[0]:>2}  real tokens "
          f"{real / slots:6.1%} of slots  {s:6.3f} s/step  speed-up {base / s:5.2f}x")
  diff = max(abs(a - b) for a, b in zip(losses["one per row"], losses["packed"]))
  print(f"largest loss difference, same batches: {diff:.2e} (losses ~"
        f"{np.mean(losses['packed']):.2f})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
