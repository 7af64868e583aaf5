"""Token offsets of one long response: the linear path vs decoding growing prefixes.

    python benchmarks/token_offsets.py [--tokens=16384 --old-tokens=4096 --repeats=5]

Builds a response of `--tokens` tokens (train-split reference apps, with emoji and CJK
mixed in) on the project's tokenizer, times `rollouts.decode_with_offsets` on it, and
times the old path (decode every growing prefix) on its first `--old-tokens` tokens in
the same run (`--old-tokens=16384` runs it on the whole response: minutes). Prints both,
their ratio per token, and whether the new offsets equal the tokenizer's own mapping.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import numpy as np
from transformers import AutoTokenizer

from rcca_jax.data import chat
from rcca_jax.train import rollouts

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXTRA = "\n<!-- 计数器 🎉👍🏽 家族 👨‍👩‍👧 ≤ ≥ ✓ -->\n"


def old_offsets(tokenizer, body: list[int]) -> np.ndarray:
  """The replaced path: token i spans what decoding body[:i+1] adds to body[:i]."""
  offsets, prev = np.zeros((len(body), 2), np.int64), 0
  for i in range(len(body)):
    end = len(tokenizer.decode(body[:i + 1], skip_special_tokens=False,
                               clean_up_tokenization_spaces=False))
    offsets[i] = (prev, max(end, prev))
    prev = max(end, prev)
  return offsets


def response_ids(tokenizer, n: int) -> tuple[str, list[int]]:
  text, ids = "", []
  with open(ROOT / "data" / "tasks" / "train.jsonl", encoding="utf-8") as f:
    for line in f:
      ref = json.loads(line).get("reference")
      if ref:
        text += EXTRA + ref
        ids = tokenizer.encode(chat.format_response(text), add_special_tokens=False)
        if len(ids) >= n:
          break
  return tokenizer.decode(ids[:n], clean_up_tokenization_spaces=False), ids[:n]


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--tokens", type=int, default=16384)
  p.add_argument("--old-tokens", type=int, default=4096)
  p.add_argument("--repeats", type=int, default=5)
  args = p.parse_args()
  tok = AutoTokenizer.from_pretrained(str(ROOT / "data" / "tokenizer"))
  text, ids = response_ids(tok, args.tokens)
  end = chat.eos_ids(tok)
  rollouts.decode_with_offsets(tok, ids[:8], end)  # builds the byte table once
  times = []
  for _ in range(args.repeats):
    start = time.perf_counter()
    decoded, offsets = rollouts.decode_with_offsets(tok, ids + [end[0]], end)
    times.append(time.perf_counter() - start)
  new_s = statistics.median(times)
  mapping = tok(decoded, add_special_tokens=False, return_offsets_mapping=True)
  exact = (mapping["input_ids"] == ids
           and np.array_equal(offsets[:-1], np.asarray(mapping["offset_mapping"])))
  old_n = min(args.old_tokens, len(ids))
  start = time.perf_counter()
  old_offsets(tok, ids[:old_n])
  old_s = time.perf_counter() - start
  print(f"new: {len(ids)} tokens in {1000 * new_s:.1f} ms (median of {args.repeats}); "
        f"equal to the tokenizer's offset mapping: {exact}")
  print(f"old: {old_n} tokens in {1000 * old_s:.1f} ms")
  print(f"ratio old/new, same length: {old_s / max(new_s * old_n / len(ids), 1e-9):.0f}x "
        f"(new scaled linearly to {old_n} tokens; the old path grows quadratically)")


if __name__ == "__main__":
  main()
