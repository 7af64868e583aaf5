"""Builds the project's task corpus and retrains its tokenizer.

python -m rcca_jax.data.build [--seed 0] [--out data/tasks] [--tokenizer data/tokenizer]
    [--no-tokenizer]

Writes `train.jsonl`, `dev.jsonl` and `test.jsonl` (docs/contracts.md#1-task-file)
deterministically:
the same seed gives the same bytes. `test` holds the families in `TEST_FAMILIES`, never
seen in training; `dev` holds further parameter draws of the training families, with no
request identical to a training request. The tokenizer is then retrained on the
training split plus `data/examples/tasks.jsonl` (never on dev/test requests).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Sequence

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.draws import CORPUS_STREAM, draw_unique
from rcca_jax.data import train_tokenizer
from rcca_jax.data.families import FAMILIES

TEST_FAMILIES = ("bmi_calculator", "poll", "countdown_timer", "carousel")
TRAIN_PER_FAMILY = 88
DEV_PER_FAMILY = 5
TEST_PER_FAMILY = 55
EXAMPLES = "data/examples/tasks.jsonl"
def build_splits(seed: int = 0, train_per_family: int = TRAIN_PER_FAMILY,
                 dev_per_family: int = DEV_PER_FAMILY,
                 test_per_family: int = TEST_PER_FAMILY) -> dict[str, list[tasks_lib.Task]]:
  """The three splits; `train` is shuffled across families, the others grouped by family."""
  unknown = sorted(set(TEST_FAMILIES) - set(FAMILIES))
  if unknown:
    raise ValueError(f"unknown test families: {', '.join(unknown)}")
  splits: dict[str, list[tasks_lib.Task]] = {"train": [], "dev": [], "test": []}
  for name, family in FAMILIES.items():
    if family.split_aware:
      continue  # drawn fresh by the jobs that use them (data.fresh), never committed
    if name in TEST_FAMILIES:
      splits["test"] += draw_unique(FAMILIES[name], seed, test_per_family)
    else:
      drawn = draw_unique(FAMILIES[name], seed, train_per_family + dev_per_family)
      splits["train"] += drawn[:train_per_family]
      splits["dev"] += drawn[train_per_family:]
  random.Random(f"{CORPUS_STREAM}:{seed}:shuffle").shuffle(splits["train"])
  return splits


def retrain_tokenizer(train_path: str, out_dir: str, vocab_size: int = 4096) -> int:
  """Retrains the byte-level BPE tokenizer; returns its vocabulary size."""
  paths = train_tokenizer.input_files([EXAMPLES, train_path])
  tokenizer = train_tokenizer.train(train_tokenizer.corpus_texts(paths), vocab_size)
  tokenizer.save_pretrained(out_dir)
  return len(tokenizer)


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", default="data/tasks")
  p.add_argument("--tokenizer", default="data/tokenizer", help="tokenizer output directory")
  p.add_argument("--vocab-size", type=int, default=4096)
  p.add_argument("--no-tokenizer", action="store_true", help="only write the task files")
  args = p.parse_args(argv)
  start = time.monotonic()
  splits = build_splits(args.seed)
  os.makedirs(args.out, exist_ok=True)
  for split, items in splits.items():
    tasks_lib.write_tasks(os.path.join(args.out, f"{split}.jsonl"), items)
  built = time.monotonic()
  sizes = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
  print(f"tasks: {sizes} -> {args.out} ({built - start:.1f} s)")
  if not args.no_tokenizer:
    vocab = retrain_tokenizer(os.path.join(args.out, "train.jsonl"), args.tokenizer,
                              args.vocab_size)
    print(f"tokenizer: vocab {vocab} -> {args.tokenizer} ({time.monotonic() - built:.1f} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
