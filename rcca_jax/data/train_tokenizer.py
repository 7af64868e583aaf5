"""Trains the project's byte-level BPE tokenizer on its own app corpus.

python -m rcca_jax.data.train_tokenizer [--vocab-size 4096] [--out data/tokenizer]
    [--inputs data/examples/tasks.jsonl data/tasks/*.jsonl] [--kind bpe|sentencepiece]

The corpus is every task's `request` and `reference` from the task files (JSON Lines,
docs/contracts.md#1-task-file). `--kind bpe` (default) writes a
`PreTrainedTokenizerFast` directory that `transformers.AutoTokenizer.from_pretrained`
loads, with character offsets;
`--kind sentencepiece` a SentencePiece `tokenizer.model` (lossless: identity
normalisation, byte fallback) with the same special tokens, which
`train.sections.load_tokenizer` loads (`--config.data.tokenizer=DIR`).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, USER, ASSISTANT = "<|pad|>", "<|end|>", "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = (PAD, EOS, USER, ASSISTANT)
DEFAULT_INPUTS = ("data/examples/tasks.jsonl", "data/tasks/*.jsonl")


class CorpusError(ValueError):
  """A task file line that is not a JSON object with a string `request`."""


def input_files(patterns: Iterable[str]) -> list[str]:
  """Existing files matched by `patterns`, in pattern order, each sorted, no repeats."""
  out: list[str] = []
  for pattern in patterns:
    for path in sorted(glob.glob(pattern)):
      if os.path.isfile(path) and path not in out:
        out.append(path)
  return out


def corpus_texts(paths: Sequence[str]) -> list[str]:
  """Requests and reference apps of all tasks in `paths`, in file order."""
  texts: list[str] = []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      for n, line in enumerate(f, 1):
        if not line.strip():
          continue
        try:
          obj = json.loads(line)
        except json.JSONDecodeError as e:
          raise CorpusError(f"{path}:{n}: invalid JSON: {e.msg}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("request"), str):
          raise CorpusError(f"{path}:{n}: expected a task object with a string 'request'")
        texts.append(obj["request"])
        if isinstance(obj.get("reference"), str):
          texts.append(obj["reference"])
  return texts


def train(texts: Sequence[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
  """A byte-level BPE tokenizer trained on `texts` (deterministic for the same input)."""
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  # trim_offsets=False: a token's offsets cover all of its characters, spaces included.
  tok.post_processor = processors.ByteLevel(trim_offsets=False)
  trainer = trainers.BpeTrainer(
      vocab_size=vocab_size, min_frequency=2, show_progress=False,
      special_tokens=list(SPECIAL_TOKENS),
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  tok.train_from_iterator(texts, trainer=trainer)
  return PreTrainedTokenizerFast(
      tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
      extra_special_tokens=[USER, ASSISTANT], model_max_length=1 << 20)


def train_sentencepiece(texts: Sequence[str], vocab_size: int = 4096):
  """A SentencePiece BPE tokenizer of `texts` with the project's special tokens."""
  from rcca_jax.data import sentencepiece_tokenizer  # pylint: disable=import-outside-toplevel
  return sentencepiece_tokenizer.train(texts, vocab_size, SPECIAL_TOKENS, eos_token=EOS,
                                       pad_token=PAD)


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--vocab-size", type=int, default=4096)
  p.add_argument("--kind", choices=("bpe", "sentencepiece"), default="bpe")
  p.add_argument("--out", default="data/tokenizer")
  p.add_argument("--inputs", nargs="+", default=list(DEFAULT_INPUTS),
                 help="task files or glob patterns (JSON Lines)")
  args = p.parse_args(argv)
  paths = input_files(args.inputs)
  if not paths:
    print(f"error: no task files match {' '.join(args.inputs)}", file=sys.stderr)
    return 2
  try:
    texts = corpus_texts(paths)
  except CorpusError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  trainer = train_sentencepiece if args.kind == "sentencepiece" else train
  tokenizer = trainer(texts, args.vocab_size)
  tokenizer.save_pretrained(args.out)
  chars = sum(len(t) for t in texts)
  print(f"trained on {len(texts)} texts ({chars} chars) from {len(paths)} files; "
        f"vocab {len(tokenizer)} -> {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
