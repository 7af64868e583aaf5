"""Copy pretraining: the first stage of the natural setting's copy curriculum (issue 54).

    python -m experiments.copy_pretrain --out=DIR [--steps=800] [--json=HISTORY]

Trains the natural setting's policy (`experiments/natural_v2.py`'s model, from scratch)
on bare copy sequences, `ids: `#ROLE-W1-W2`, ...` followed by one `<div id="...">` line
per id, with one or two ids of train-split compounds, the loss on the div lines alone,
then writes it as a Hugging Face Llama directory for `init_from_hf`
(`natural_v2.py:curriculum` starts SFT on the apps from it).

Why a stage of its own: trained from scratch on the apps, on the 2-6-id drill or on the
1-2-id drill inside the chat and HTML frame, the policy sits at its no-copy floor for
thousands of steps; on these short sequences it copies dev ids' words (compounds never
seen in training) after a few hundred steps. Every `--every` steps it prints the
teacher-forced share of dev id words whose first token is the argmax (`w1`, `w2`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from rcca_jax.data import chat
from rcca_jax.data.families import FAMILIES
from rcca_jax.data.families import copying
from rcca_jax.models import families
from rcca_jax.models import llama_checkpoint
from rcca_jax.train import sections

BUCKET = 16  # rows are padded to a multiple of this (few compiled shapes)


# Filler between the request's parts: template words, none a pool word, so that where an
# id stands varies and only its content says where to copy from.
FILLER = ("the", "page", "with", "and", "one", "for", "each", "shows", "a", "div", "it",
          "of")
Row = tuple[list[int], list[int], list[int]]  # token ids, loss mask, id word positions


def example(rng: random.Random, split: str, most: int, filler: int
            ) -> tuple[str, str, list[str]]:
  """(request, div lines, ids) of one bare copy sequence with 1..`most` ids and up to
  `filler` filler words before, between and after them."""
  c = copying.Copier(rng, split)
  ids = [c.ident(role) for role in c.choose(copying.ROLES, rng.randint(1, most))]
  def fill() -> str:
    return " ".join(rng.choice(FILLER) for _ in range(rng.randint(0, filler)))
  request = " ".join([fill(), "ids:", ", ".join(f"{fill()} `#{i}`" for i in ids), fill()])
  return request + "\n", "\n".join(f'<div id="{i}"></div>' for i in ids), ids


def framed(rng: random.Random, split: str, tokenizer: Any) -> Row:
  """`echo_short_copy`'s SFT example (chat prompt, fenced HTML page) as a row."""
  draft = FAMILIES["echo_short_copy"].draft(rng, split)
  tokens, mask = chat.format_sft_example(tokenizer, draft.request,
                                         chat.format_response(draft.reference))
  ids = [v for v, _ in draft.copied if v.count("-") == 2]
  start = mask.index(1)
  return list(tokens), list(mask), sites(tokenizer, tokens[start:], ids, start)


def sites(tokenizer: Any, answer: Sequence[int], ids: Sequence[str], offset: int
          ) -> list[int]:
  """Positions (from `offset`) of the two pool words of each id's first occurrence."""
  pieces = tokenizer.convert_ids_to_tokens(list(answer))
  out = []
  for ident in ids:
    _, w1, w2 = ident.split("-")  # the role may be several pieces (`g re et`)
    for j in range(len(pieces) - 3):
      if pieces[j:j + 4] == ["-", w1, "-", w2]:
        out += [offset + j + 1, offset + j + 3]
        break
  return out


def encode(tokenizer: Any, request: str, response: str, ids: Sequence[str]) -> Row:
  """A bare sequence's token ids, loss mask (the div lines) and id word positions."""
  prompt = tokenizer.encode(request, add_special_tokens=False)
  answer = tokenizer.encode(response, add_special_tokens=False)
  return (prompt + answer, [0] * len(prompt) + [1] * len(answer),
          sites(tokenizer, answer, ids, len(prompt)))


def batch(rows: Sequence[Row], pad_id: int
          ) -> tuple[np.ndarray, np.ndarray]:
  length = -(-max(len(r[0]) for r in rows) // BUCKET) * BUCKET
  ids = np.full((len(rows), length), pad_id, np.int32)
  mask = np.zeros((len(rows), length), np.float32)
  for i, (tokens, loss_mask, _) in enumerate(rows):
    ids[i, :len(tokens)], mask[i, :len(tokens)] = tokens, loss_mask
  return ids, mask


def loss_fn(model: nnx.Module, ids: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean next-token negative log-likelihood over the response tokens."""
  logp = jax.nn.log_softmax(model(ids)[:, :-1].astype(jnp.float32))
  nll = -jnp.take_along_axis(logp, ids[:, 1:, None], -1)[..., 0]
  return (nll * mask[:, 1:]).sum() / mask[:, 1:].sum()


@nnx.jit
def train_step(model: nnx.Module, opt: nnx.Optimizer, ids: jax.Array, mask: jax.Array
               ) -> jax.Array:
  loss, grads = nnx.value_and_grad(loss_fn)(model, ids, mask)
  opt.update(model, grads)
  return loss


@nnx.jit
def argmax_next(model: nnx.Module, ids: jax.Array) -> jax.Array:
  return jnp.argmax(model(ids), -1)


def copy_rates(model: nnx.Module, rows: Sequence[Row],
               pad_id: int) -> tuple[float, float]:
  """Teacher-forced share of first (w1) and second (w2) id words predicted exactly."""
  ids, _ = batch(rows, pad_id)
  best = np.asarray(argmax_next(model, jnp.asarray(ids)))
  hits: list[list[bool]] = [[], []]
  for i, (tokens, _, sites) in enumerate(rows):
    for k, pos in enumerate(sites):
      hits[k % 2].append(bool(best[i, pos - 1] == tokens[pos]))
  return float(np.mean(hits[0])), float(np.mean(hits[1]))


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="the Hugging Face directory to write")
  parser.add_argument("--steps", type=int, default=800)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--lr", type=float, default=3e-3)
  parser.add_argument("--most", type=int, default=2, help="ids per sequence: 1..most")
  parser.add_argument("--filler", type=int, default=8, help="filler words per gap: 0..N")
  parser.add_argument("--framed_share", type=float, default=0.5,
                      help="share of rows that are echo_short_copy's SFT examples")
  parser.add_argument("--every", type=int, default=100)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default="", help="write the copy curve here")
  args = parser.parse_args(argv)

  from experiments import natural_v2  # pylint: disable=import-outside-toplevel
  job = sections.job_config(natural_v2.get_config("pilot"))
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  pad_id = tokenizer.pad_token_id or 0
  model = families.build(sections.model_config(job, tokenizer), nnx.Rngs(args.seed))
  warmup = min(100, args.steps // 2)
  schedule = optax.warmup_cosine_decay_schedule(0.0, args.lr, warmup, args.steps,
                                                args.lr * 0.05)
  opt = nnx.Optimizer(model, optax.chain(optax.clip_by_global_norm(1.0),
                                         optax.adamw(schedule, weight_decay=0.0)),
                      wrt=nnx.Param)
  rng, dev_rng = random.Random(args.seed), random.Random(10_000 + args.seed)
  def row(r: random.Random, split: str, frame: bool) -> Row:
    if frame:
      return framed(r, split, tokenizer)
    return encode(tokenizer, *example(r, split, args.most, args.filler))
  dev = {name: [row(dev_rng, "dev", name == "framed") for _ in range(48)]
         for name in ("bare", "framed")}
  history, losses, start = [], [], time.time()
  for step in range(1, args.steps + 1):
    rows = [row(rng, "train", rng.random() < args.framed_share) for _ in range(args.batch)]
    ids, mask = batch(rows, pad_id)
    losses.append(float(train_step(model, opt, jnp.asarray(ids), jnp.asarray(mask))))
    if step % args.every == 0 or step == args.steps:
      point = dict(step=step, loss=round(float(np.mean(losses[-args.every:])), 4))
      for name, rows in dev.items():
        w1, w2 = copy_rates(model, rows, pad_id)
        point.update({f"{name}_w1": round(w1, 3), f"{name}_w2": round(w2, 3)})
      point["seconds"] = round(time.time() - start, 1)
      history.append(point)
      print(json.dumps(point), flush=True)
  llama_checkpoint.write(model, args.out)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(args=vars(args), history=history), f, indent=1)
  print(f"wrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
