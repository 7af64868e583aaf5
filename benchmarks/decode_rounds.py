"""RL sampling rounds with one decode option off and on (issue 50).

    .venv/bin/python benchmarks/decode_rounds.py --policy HF_DIR [--vary compact|grow]
        [--rounds 6]

RL sampling rounds as natural_v2's RL step draws them (2 requests of its curriculum
families x 8 samples, 320 new tokens at most, temperature 1, the policy's end token),
sampled with the option `--vary` names off and on, the same rounds and seeds, every
shape compiled first, then alternated:
- `compact`: finished rows moved out of the batch (`generate(..., compact=False)`
  against `compact=True`; the gain grows with the spread of a round's lengths: a batch
  pays for its longest row);
- `grow`: the cache grown 64 slots at a time (`grow=0`, all 512 new-token slots at once,
  against `grow=64`; the gain grows with the slots a round leaves empty).
Prints seconds per pass of `rounds` rounds for each, the speed-up, whether the tokens
agree and the rounds' response lengths. `--policy` is a Hugging Face
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
  parser.add_argument("--vary", choices=("compact", "grow"), default="compact")
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

  options = {"compact": ({"compact": False, "grow": 0}, {"compact": True, "grow": 0}),
             "grow": ({"compact": True, "grow": 0}, {"compact": True, "grow": 64})}
  def run(on: bool) -> tuple[float, list]:
    t0, outs = time.perf_counter(), []
    for seed, prompts in enumerate(rounds):
      outs.append(generate(model, prompts, max_new_tokens=320, temperature=1.0, seed=seed,
                           eos_ids=[tokenizer.eos_token_id], **options[args.vary][on]))
    return time.perf_counter() - t0, outs

  for on in (False, True, True):  # every shape compiled
    run(on)
  seconds: dict[bool, list[float]] = {False: [], True: []}
  outs = {}
  for _ in range(args.reps):
    for on in (False, True):
      t, outs[on] = run(on)
      seconds[on].append(t)
  off_s, on_s = (statistics.median(seconds[c]) for c in (False, True))
  same = all(np.array_equal(a.tokens, b.tokens) for a, b in zip(outs[False], outs[True]))
  print(f"{args.rounds} rounds of 16 samples: {off_s:.2f} s without {args.vary}, "
        f"{on_s:.2f} s with, speed-up {off_s / on_s:.2f}x; same tokens: {same}")
  print("response lengths per round:",
        [sorted(set(o.lengths.tolist())) for o in outs[False]])
  return 0


if __name__ == "__main__":
  sys.exit(main())
