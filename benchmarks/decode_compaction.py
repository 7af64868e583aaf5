"""Sampling with finished rows moved out of the batch against sampling without (issue 50).

    .venv/bin/python benchmarks/decode_compaction.py --policy HF_DIR [--rounds 6]

RL sampling rounds as natural_v2's RL step draws them (2 requests of its curriculum
families x 8 samples, 320 new tokens at most, temperature 1, the policy's end token):
`generate(..., compact=False)` and `compact=True` on the same rounds and seeds, every
shape compiled first, then alternated. Prints seconds per pass of `rounds` rounds for
each, the speed-up, whether the tokens agree and the rounds' response lengths (the gain
grows with their spread: a batch pays for its longest row). `--policy` is a Hugging Face
Llama directory (a packed SFT policy: `experiments/natural_v2_select.py --pack`);
without one the untrained model of natural_v2 samples until `max_new_tokens` and
nothing is saved.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import numpy as np
from flax import nnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# pylint: disable=wrong-import-position
from rcca_jax.data import chat
from rcca_jax.data.families import FAMILIES
from rcca_jax.models import families
from rcca_jax.models import llama_checkpoint
from rcca_jax.sampling import generate
from rcca_jax.train import sections


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--policy", default="")
  parser.add_argument("--rounds", type=int, default=6)
  parser.add_argument("--reps", type=int, default=2)
  args = parser.parse_args(argv)
  from experiments import natural_v2  # pylint: disable=import-outside-toplevel
  job = sections.job_config(natural_v2.get_config("curriculum"))
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  model = (llama_checkpoint.load(args.policy) if args.policy else
           families.build(sections.model_config(job, tokenizer), nnx.Rngs(0)))
  rng = random.Random(0)
  rounds = []
  for _ in range(args.rounds):
    prompts = []
    for _ in range(2):
      draft = FAMILIES[rng.choice(job.data.families)].draft(rng, "train")
      prompts += [chat.format_prompt(tokenizer, draft.request)] * 8
    rounds.append(prompts)

  def run(compact: bool) -> tuple[float, list]:
    t0, outs = time.perf_counter(), []
    for seed, prompts in enumerate(rounds):
      outs.append(generate(model, prompts, max_new_tokens=320, temperature=1.0, seed=seed,
                           eos_ids=[tokenizer.eos_token_id], compact=compact))
    return time.perf_counter() - t0, outs

  for compact in (False, True, True):  # every shape compiled
    run(compact)
  seconds: dict[bool, list[float]] = {False: [], True: []}
  outs = {}
  for _ in range(args.reps):
    for compact in (False, True):
      t, outs[compact] = run(compact)
      seconds[compact].append(t)
  plain, compacted = (statistics.median(seconds[c]) for c in (False, True))
  same = all(np.array_equal(a.tokens, b.tokens) for a, b in zip(outs[False], outs[True]))
  print(f"{args.rounds} rounds of 16 samples: {plain:.2f} s without compaction, "
        f"{compacted:.2f} s with, speed-up {plain / compacted:.2f}x; same tokens: {same}")
  print("response lengths per round:",
        [sorted(set(o.lengths.tolist())) for o in outs[False]])
  return 0


if __name__ == "__main__":
  sys.exit(main())
