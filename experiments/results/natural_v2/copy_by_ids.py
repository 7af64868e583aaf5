"""Teacher-forced copy of every id word the reference writes, by the number of ids the
request states and by where the word's nearest earlier copy stands (the request, or
the app already written): the analysis behind the sixth session's table.

    python experiments/results/natural_v2/copy_by_ids.py HF_DIR [FAMILIES] [REQUESTS]

Dev requests of each family (ids of train words, ids last, every request insisting:
`Drafting(1.0, 0.0, True)`), drawn from seed 10,000; a word counts as copied when it
is the argmax after the reference's prefix.
"""

import collections
import random
import re
import sys

import jax.numpy as jnp
import numpy as np

from experiments import copy_pretrain
from rcca_jax.data import chat
from rcca_jax.data.families import FAMILIES, copying
from rcca_jax.models import llama_checkpoint
from rcca_jax.train import sections

_ID = re.compile(r"`#([a-z]+)-([a-z]+)-([a-z]+)`")


def rows_of(tokenizer, family: str, count: int) -> list[tuple[list[int], list[int], list]]:
  """(token ids, loss mask, [(word kind, id count, position)]) per dev request."""
  rng, out = random.Random(10_000), []
  for _ in range(count):
    draft = FAMILIES[family].draft(rng, "dev", copying.Drafting(1.0, 0.0, True))
    answer = chat.format_response(draft.reference)
    ids, mask = chat.format_sft_example(tokenizer, draft.request, answer)
    start = mask.index(1)
    enc = tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
    starts = {s: i for i, (s, e) in enumerate(enc["offset_mapping"]) if e > s}
    idents = _ID.findall(draft.request)
    sites = []
    for role, w1, w2 in idents:
      for kind, before, word in (("w1", f"{role}-", w1), ("w2", f"{role}-{w1}-", w2)):
        pattern = rf"(?<=[\"'#]){re.escape(before)}({re.escape(word)})(?=[-\"'\s{{])"
        sites += [(kind, len(idents), start + starts[m.start(1)])
                  for m in re.finditer(pattern, answer) if m.start(1) in starts]
    out.append((ids, mask, sites))
  return out


def main(path: str, families: str = "counter_copy,char_counter_copy,dark_mode_copy,"
         "echo_short_copy,echo_label_copy", count: str = "48") -> None:
  tokenizer = sections.load_tokenizer("data/tokenizer")
  model = llama_checkpoint.load(path)
  for family in families.split(","):
    rows = rows_of(tokenizer, family, int(count))
    ids, _ = copy_pretrain.batch(rows, tokenizer.pad_token_id or 0)
    best = np.asarray(copy_pretrain.argmax_next(model, jnp.asarray(ids)))
    hits = collections.defaultdict(list)
    for i, (tokens, mask, sites) in enumerate(rows):
      for _, n_ids, pos in sites:
        source = max(j for j in range(pos) if tokens[j] == tokens[pos])
        where = "request" if source < mask.index(1) else "app"
        hits[(n_ids, where)].append(bool(best[i, pos - 1] == tokens[pos]))
    print(family, " ".join(f"{n} ids from the {where}: {np.mean(h):.2f} (n={len(h)})"
                           for (n, where), h in sorted(hits.items())))


if __name__ == "__main__":
  main(*sys.argv[1:])
