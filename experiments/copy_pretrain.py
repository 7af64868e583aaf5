"""Copy pretraining: the first stage of the natural setting's copy curriculum (issue 54).

    python -m experiments.copy_pretrain --out=DIR [--steps=800] [--json=HISTORY]
    python -m experiments.copy_pretrain --out=DIR --init=HF_DIR --filler=50 --most=4 \
        --framed_families=counter_copy,char_counter_copy,dark_mode_copy,echo_short_copy

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

Copying is learned at the distances trained: the first stage (up to 8 filler words per
gap) copies ids 50 tokens back, none 100-200 tokens back where the apps' ids stand.
`--filler` sets the distances, `--init` continues from a policy (a stage-2 one, with the
apps among `--framed_families` so that they are kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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
from rcca_jax.train import copy_metrics
from rcca_jax.train import sections

BUCKET = 16  # rows are padded to a multiple of this (few compiled shapes)
KINDS = ("w1", "w2", "label")  # the copied values whose rates are printed


# Filler between the request's parts: template words, none a pool word, so that where an
# id stands varies and only its content says where to copy from.
FILLER = ("the", "page", "with", "and", "one", "for", "each", "shows", "a", "div", "it",
          "of")
# token ids, loss mask, (kind "w1" / "w2", position) of each id word's first copy
Row = tuple[list[int], list[int], list[tuple[str, int]]]


def example(rng: random.Random, split: str, most: int, filler: int, labels: float = 0.0,
            shuffle: bool = False) -> tuple[str, str, list[str], list[str]]:
  """(request, div lines, ids, labels) of one bare copy sequence with 1..`most` ids and
  up to `filler` filler words before, between and after them; each id carries a label
  (`` `#id` reads "word" ``, its div then holds the word) with probability `labels`.
  With `shuffle` the divs come in a random order (ids and labels in the divs' order):
  which id a div copies is found by its role, not by its place in the list."""
  c = copying.Copier(rng, split)
  ids = [c.ident(role) for role in c.choose(copying.ROLES, rng.randint(1, most))]
  words = [c.word() if rng.random() < labels else "" for _ in ids]
  def fill() -> str:
    return " ".join(rng.choice(FILLER) for _ in range(rng.randint(0, filler)))
  def stated(ident: str, word: str) -> str:
    return f"{fill()} `#{ident}`" + (f' reads "{word}"' if word else "")
  request = " ".join([fill(), "ids:", ", ".join(map(stated, ids, words)), fill()])
  if shuffle:
    order = rng.sample(range(len(ids)), len(ids))
    ids, words = [ids[i] for i in order], [words[i] for i in order]
  divs = "\n".join(f'<div id="{i}">{w}</div>' for i, w in zip(ids, words))
  return request + "\n", divs, ids, [w for w in words if w]


def framed(rng: random.Random, split: str, tokenizer: Any,
           family: str = "echo_short_copy", drafting: Any = None) -> Row:
  """A family's SFT example (chat prompt, fenced HTML page) as a row (`drafting`: how
  the request is phrased and its reference taught, `copying.Drafting`)."""
  draft = FAMILIES[family].draft(rng, split, drafting)
  prompt, answer, targets = copy_metrics.copy_targets(tokenizer, draft)
  return (prompt + answer, [0] * len(prompt) + [1] * len(answer),
          [(kind, len(prompt) + i) for kind, i in targets if kind in KINDS])


def sites(tokenizer: Any, answer: Sequence[int], ids: Sequence[str], offset: int,
          labels: Sequence[str] = ()) -> list[tuple[str, int]]:
  """(kind, position from `offset`) of the pool words of each id's first occurrence in
  a bare sequence's div lines ("w1", "w2") and of each label ("label": after `">`)."""
  pieces = tokenizer.convert_ids_to_tokens(list(answer))
  out = []
  for ident in ids:
    _, w1, w2 = ident.split("-")  # the role may be several pieces (`g re et`)
    for j in range(len(pieces) - 3):
      if pieces[j:j + 4] == ["-", w1, "-", w2]:
        out += [("w1", offset + j + 1), ("w2", offset + j + 3)]
        break
  for word in labels:
    out += [("label", offset + j) for j in range(1, len(pieces))
            if pieces[j] == word and pieces[j - 1].endswith(">")][:1]
  return out


def encode(tokenizer: Any, request: str, response: str, ids: Sequence[str],
           labels: Sequence[str] = ()) -> Row:
  """A bare sequence's token ids, loss mask (the div lines) and copy sites."""
  prompt = tokenizer.encode(request, add_special_tokens=False)
  answer = tokenizer.encode(response, add_special_tokens=False)
  return (prompt + answer, [0] * len(prompt) + [1] * len(answer),
          sites(tokenizer, answer, ids, len(prompt), labels))


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


def copy_rates(model: nnx.Module, rows: Sequence[Row], pad_id: int) -> dict[str, float]:
  """Teacher-forced share of each kind of copied value (`KINDS`: first and second id
  words, labels) whose first token is predicted exactly (kinds the rows hold)."""
  ids, _ = batch(rows, pad_id)
  best = np.asarray(argmax_next(model, jnp.asarray(ids)))
  hits: dict[str, list[bool]] = {kind: [] for kind in KINDS}
  for i, (tokens, _, sites) in enumerate(rows):
    for kind, pos in sites:
      hits[kind].append(bool(best[i, pos - 1] == tokens[pos]))
  return {kind: float(np.mean(h)) for kind, h in hits.items() if h}


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="the Hugging Face directory to write")
  parser.add_argument("--steps", type=int, default=800)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--lr", type=float, default=3e-3)
  parser.add_argument("--most", type=int, default=2, help="ids per sequence: 1..most")
  parser.add_argument("--filler", type=int, default=8, help="filler words per gap: 0..N")
  parser.add_argument("--framed_share", type=float, default=0.5,
                      help="share of rows that are the framed families' SFT examples")
  parser.add_argument("--framed_families", default="echo_short_copy",
                      help="comma-separated families of the framed rows (drawn evenly)")
  parser.add_argument("--init", default="",
                      help="a Hugging Face Llama directory to start from (else scratch)")
  parser.add_argument("--labels", type=float, default=0.0,
                      help="chance that a bare sequence's id carries a label to copy")
  parser.add_argument("--shuffle", action="store_true",
                      help="bare sequences' divs in a random order (copy by role, not place)")
  parser.add_argument("--kv_heads", type=int, default=0,
                      help="key-value heads of a fresh model (0: natural_v2's)")
  parser.add_argument("--hidden", type=int, default=0,
                      help="width of a fresh model (0: natural_v2's; heads of dim 32)")
  parser.add_argument("--layers", type=int, default=0,
                      help="decoder layers of a fresh model (0: natural_v2's)")
  parser.add_argument("--teacher_last", action="store_true",
                      help="framed rows drafted as natural_v2.py:teacher_last's (ids last, "
                           "the imperfect teacher; dev rows: ids last)")
  parser.add_argument("--every", type=int, default=100)
  parser.add_argument("--save_every", type=int, default=0,
                      help="also write --out every N steps (0: at the end only)")
  parser.add_argument("--keep_every", type=int, default=0,
                      help="also write OUT/step_N every N steps (snapshots to choose from)")
  parser.add_argument("--canon", type=int, default=0,
                      help="a canon convolution of this width before each attention "
                           "(LlamaConfig.canon_kernel; added at zero to an --init without one)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default="", help="write the copy curve here")
  args = parser.parse_args(argv)

  from experiments import natural_v2  # pylint: disable=import-outside-toplevel
  job = sections.job_config(natural_v2.get_config("pilot"))
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  pad_id = tokenizer.pad_token_id or 0
  config = sections.model_config(job, tokenizer)
  if args.kv_heads:
    config = dataclasses.replace(config, num_key_value_heads=args.kv_heads)
  if args.canon:
    config = dataclasses.replace(config, canon_kernel=args.canon)
  if args.hidden or args.layers:  # a size curve (issue 54): natural_small's shape rules
    from experiments import natural_small  # pylint: disable=import-outside-toplevel
    shape = natural_small.model_config(args.hidden or config.hidden_size,
                                       args.layers or config.num_hidden_layers)
    config = dataclasses.replace(
        config, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads, head_dim=0)
  if args.init:
    model = llama_checkpoint.load(args.init, attention_block_size=config.attention_block_size)
    if args.canon and not model.config.canon_kernel:
      model = llama_checkpoint.with_canon(model, args.canon)
    if model.config != config:
      raise ValueError(f"--init={args.init}: its model is not natural_v2's ({model.config})")
  else:
    model = families.build(config, nnx.Rngs(args.seed))
  framed_families = args.framed_families.split(",")
  unknown = [f for f in framed_families if f not in FAMILIES]
  if unknown:
    raise ValueError(f"--framed_families: unknown {unknown}")
  warmup = min(100, args.steps // 2)
  schedule = optax.warmup_cosine_decay_schedule(0.0, args.lr, warmup, args.steps,
                                                args.lr * 0.05)
  opt = nnx.Optimizer(model, optax.chain(optax.clip_by_global_norm(1.0),
                                         optax.adamw(schedule, weight_decay=0.0)),
                      wrt=nnx.Param)
  rng, dev_rng = random.Random(args.seed), random.Random(10_000 + args.seed)
  drafting = copying.Drafting(**natural_v2.TEACHER_LAST) if args.teacher_last else None
  def row(r: random.Random, split: str, frame: bool) -> Row:
    if frame:
      return framed(r, split, tokenizer, r.choice(framed_families), drafting)
    request, divs, ids, labels = example(r, split, args.most, args.filler, args.labels,
                                         args.shuffle)
    return encode(tokenizer, request, divs, ids, labels)
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
        point.update({f"{name}_{kind}": round(rate, 3)
                      for kind, rate in copy_rates(model, rows, pad_id).items()})
      point["seconds"] = round(time.time() - start, 1)
      history.append(point)
      print(json.dumps(point), flush=True)
    if args.save_every and step % args.save_every == 0 and step < args.steps:
      llama_checkpoint.write(model, args.out)
    if args.keep_every and step % args.keep_every == 0 and step < args.steps:
      llama_checkpoint.write(model, os.path.join(args.out, f"step_{step}"))
  llama_checkpoint.write(model, args.out)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(args=vars(args), history=history), f, indent=1)
  print(f"wrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
