"""Every SFT and RL phase against what this machine's cores can do (issue 50).

    .venv/bin/python benchmarks/step_roofline.py [--config experiments/natural_v2.py:pilot]
        [--batch 8] [--length 448] [--rl_rows 16] [--prompt 96] [--new 256] [--reps 3]
        [--rl_max_len N] [--rl_lengths P:R,P:R,...] [--policy HF_DIR [--rounds 6]]
        [--sft_examples 128 --sft_group 0 --sft_bucket 64] [--no_rl] [--json OUT]
        [--model_set FIELD=VALUE,...] [--sft_head_on_loss] [--rollout_dtype bfloat16]
        [--baseline REF]
        [--baseline_env NAME=VALUE,...]

For one config's model it times, in one process: the measured peak (a jitted float32
matmul of the model's own MLP shape, [batch x length, hidden] @ [hidden, intermediate]
with at least 4,096 rows, and its logits shape; the best of 10), an SFT step of
`batch` rows of `length` tokens, the mean SFT step over `sft_examples` of the config's
own examples laid out as the tree's trainer lays them out (in this tree: `sft.length_grouped` = `sft_group`, 0 for one window of
all the steps, and `sft.length_bucket` = `sft_bucket`; an older tree pads every row
to `sft.max_len`; the same examples in every tree), sampling
`rl_rows` rows (prefill of `prompt` tokens, then `new` decoded tokens, timed as the
difference of a `new`-token and a 1-token generation), the RL log-prob pass (old
log-probs; the reference pass costs the same) and the GRPO update of `rl_rows` full
rows of `prompt + new` tokens (the programs' own rate), and the same two on the batch
the trainer builds from rollouts of `rl_lengths` (prompt:response tokens per row,
default a natural_v2 RL round sampled by its stage-2 policy) with `rl_max_len`
(`rl.max_prompt_len + rl.max_new_tokens`) and the config's `rl.length_bucket` (rows
padded to `rl_max_len` in a tree without it). With `--policy`, also the time per RL
sampling round of that policy (natural_v2's: 2 requests x 8 samples, 320 new tokens at
most, rows ending at the policy's end token), the same prompts and seeds in every tree:
where finished rows and empty cache slots cost, the fixed-length decode line does not
show it. `--model_set` overrides model fields of the config (for example
`attention_block_size=64`); with `--baseline` it applies to this tree's runs only (the
baseline runs its config as it was). `--baseline_env` sets environment variables for the
baseline's runs: `--baseline HEAD --baseline_env RCCA_ALLOCATOR=system` times the host
allocator alone (this tree's runs re-execute with tcmalloc, `base/host_allocator.py`).
`--rollout_dtype bfloat16` samples (prefill, decode, the policy's rounds) with the
sampler's rounded copy (`rl.rollout_dtype`, this tree's runs only) and prints how far
its log-probs of the decoded tokens lie from the float32 model's full forward.

One line per phase: tokens computed (rows x padded length), XLA's flop count of the
compiled program (cost analysis: it counts the body of a `lax.scan`, the layer stack,
once, so it is about a layer's share of the model short), the model's flop count (the
matmuls' 2·N per token, N the parameters that multiply, and the dense attention's
4·d·T per token and layer for rows of T tokens; x3 for a training step), the median
seconds of `reps`, the achieved GFLOP/s of the model count and that as a share of the
measured peak. Times are medians of interleaved repetitions; the peak is measured in
the same run, so the shares hold on any machine (numbers from a loaded machine are
still ratios of the same load).
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from flax import nnx

try:
  from rcca_jax.base import host_allocator
except ImportError:  # an older tree (`--baseline`): glibc's malloc, as it ran then
  host_allocator = None
from rcca_jax.data import batching
from rcca_jax.models import families
from rcca_jax.models import llama_checkpoint
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import optim
from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step
from rcca_jax.sampling import generate
from rcca_jax.sampling import sampler as sampler_lib
from rcca_jax.train import programs as programs_lib
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import sections

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The GRPO objective, where this tree keeps it (`--baseline` runs this script on older
# trees: before house order 4 the loss configs were in rl/losses.py and the objective
# in rl/objectives.py).
# The old names are imported by string so that this tree's own code never names them.
try:
  from rcca_jax.rl.objective import LossConfig, PolicyObjective
except ImportError:
  LossConfig = importlib.import_module("rcca_jax.rl.losses").LossConfig
  PolicyObjective = importlib.import_module("rcca_jax.rl.objectives").PolicyObjective

# A natural_v2 RL round (2 prompts x 8 samples) sampled by its stage-2 policy (mix1):
# (prompt, response) tokens per row; its longest row is 315 tokens (12 rounds: 186-385,
# median 300).
NATURAL_V2_ROUND = ([(143, n) for n in (167, 172, 172, 171, 170, 171, 172, 171)]
                    + [(145, n) for n in (170, 167, 167, 169, 169, 169, 169, 170)])


def load_config(spec: str) -> Any:
  """`path/to/config.py[:preset]` -> the job config."""
  path, _, preset = spec.partition(":")
  sys.path.insert(0, os.getcwd())  # the tree being measured (see `compare`)
  module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
  return module.get_config(preset) if preset else module.get_config()


def xla_flops(jitted: Any, *args) -> float:
  """XLA's flop count of `jitted` compiled for `args` (0 when it gives none)."""
  cost = jitted.lower(*args).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float((cost or {}).get("flops", 0.0))


def median_seconds(fn: Callable[[], Any], reps: int) -> float:
  """The median of `reps` timed calls of `fn`, after one call that compiles and warms
  it (waited for: JAX dispatches asynchronously, so an unwaited warm-up would still run
  inside the first timed call)."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


PEAK_ROWS, PEAK_REPS = 4096, 10


def peak_gflops(rows: int, k: int, n: int) -> float:
  """GFLOP/s of a jitted float32 [rows, k] @ [k, n] matmul, `rows` at least PEAK_ROWS
  (fewer rows leave the cores idle part of the time), the best of PEAK_REPS: a peak,
  which noise from other processes can only lower."""
  rows = max(rows, PEAK_ROWS)
  a = jnp.asarray(np.random.default_rng(0).standard_normal((rows, k)), jnp.float32)
  b = jnp.asarray(np.random.default_rng(1).standard_normal((k, n)), jnp.float32)
  f = jax.jit(jnp.matmul)
  jax.block_until_ready(f(a, b))
  best = float("inf")
  for _ in range(PEAK_REPS):
    t0 = time.perf_counter()
    jax.block_until_ready(f(a, b))
    best = min(best, time.perf_counter() - t0)
  return 2.0 * rows * k * n / best / 1e9


def model_flops(cfg: Any, n_matmul: int, rows: int, length: int, train: bool) -> float:
  """FLOPs of `rows` rows of `length` tokens: 2·N per token for the matmuls and, per
  layer, 4·d·T per token for the dense attention's scores and weighted values over
  all T keys (d = heads x head dim); three times that for a training step."""
  heads = cfg.num_attention_heads
  attn_dim = heads * (getattr(cfg, "head_dim", 0) or cfg.hidden_size // heads)
  forward = rows * length * (2.0 * n_matmul
                             + 4.0 * attn_dim * length * cfg.num_hidden_layers)
  return 3.0 * forward if train else forward


def trainer_rl_batch(job: Any, lengths: list[tuple[int, int]], max_len: int, vocab: int,
                     rng: np.random.Generator, shared_prefix: bool = False
                     ) -> dict[str, Any]:
  """The trainer's RL batch (`rollouts.rl_batch`) of rollouts of `lengths` (each
  group's prompt one draw, of its first row's length), with the job's
  `rl.length_bucket` where this tree has one; with `shared_prefix`, each group's
  prompt stored once (`rl.shared_prefix`, where this tree has it)."""
  items, group = [], job.rl.group_size
  prompts = {i // group: [int(t) for t in rng.integers(3, vocab, p)]
             for i, (p, _) in enumerate(lengths) if i % group == 0}
  for i, (_, n) in enumerate(lengths):
    items.append(rollouts_lib.Rollout(
        task=None, sample_id=i % group, prompt=prompts[i // group],
        tokens=[int(t) for t in rng.integers(3, vocab, n)],
        logprobs=-rng.uniform(0.0, 2.0, n).astype(np.float32), text="",
        offsets=np.zeros((n, 2), np.int64), record={"reward": float(rng.uniform())},
        wbar=np.ones(n, np.float32)))
  if not hasattr(rollouts_lib, "group_advantages"):  # an older tree: rows of max_len
    batch, _ = rollouts_lib.rl_batch(items, group_size=job.rl.group_size,
                                     max_len=max_len, pad_id=0)
    return {k: jnp.asarray(v) for k, v in batch.items()}
  advantages = rollouts_lib.group_advantages(items, job.rl.group_size)
  bucket = getattr(job.rl, "length_bucket", 0)
  extra = {"length_bucket": bucket} if bucket else {}
  if shared_prefix:
    extra["shared_prefix"] = (group, job.rl.max_prompt_len)
  batch = rollouts_lib.rl_batch(items, advantages, max_len=max_len, pad_id=0, **extra)
  return {k: jnp.asarray(v) for k, v in batch.items()}


def natural_v2_rounds(path: str, rounds: int) -> None:
  """Writes `rounds` natural_v2 RL sampling rounds (2 train requests of its five
  families x 8, drafted as its `rl` preset drafts them, the chat prompt's tokens) to
  `path` as JSON, so that every tree samples the same prompts (older trees lack the
  families). Drawn with this script's own tree."""
  sys.path.insert(0, REPO)
  from experiments import natural_v2  # pylint: disable=import-outside-toplevel
  from rcca_jax.data import chat  # pylint: disable=import-outside-toplevel
  from rcca_jax.data.families import FAMILIES  # pylint: disable=import-outside-toplevel
  job = sections.job_config(natural_v2.get_config("rl"))
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  rng, out = np.random.default_rng(0), []
  for _ in range(rounds):
    prompts = []
    for _ in range(2):
      family = FAMILIES[job.data.families[rng.integers(len(job.data.families))]]
      draft = family.draft(random.Random(int(rng.integers(1 << 30))), "train",
                           job.data.fresh.drafting)
      prompts += [chat.format_prompt(tokenizer, draft.request)] * 8
    out.append(prompts)
  with open(path, "w") as f:
    json.dump(dict(eos_id=tokenizer.eos_token_id, max_new_tokens=job.rl.max_new_tokens,
                   rounds=out), f)


def sft_examples(path: str, config: str, n: int) -> None:
  """Writes `n` SFT examples of `config`'s families (train drafts: the chat prompt and
  the reference app as the trainer tokenizes them, at most `sft.max_len` tokens) to
  `path` as JSON (token ids and loss masks), so that every tree trains on the same
  examples. Drawn with this script's own tree."""
  sys.path.insert(0, REPO)
  job = sections.job_config(load_config(config))
  tokenizer = (programs_lib.Programs(job).tokenizer if job.pretrained_source
               else sections.load_tokenizer(job.data.tokenizer))
  out = draw_sft_examples(job, tokenizer, n, random.Random(0))
  with open(path, "w") as f:
    json.dump(dict(max_len=job.sft.max_len, examples=out), f)


def draw_sft_examples(job: Any, tokenizer: Any, n: int, rng: random.Random
                      ) -> list[tuple[list[int], list[int]]]:
  """`n` (token ids, loss mask) SFT examples of `job`'s families (train drafts, the chat
  prompt and the reference app as the trainer formats them), at most `sft.max_len`."""
  from rcca_jax.data import chat  # pylint: disable=import-outside-toplevel
  from rcca_jax.data.families import FAMILIES  # pylint: disable=import-outside-toplevel
  out = []
  while len(out) < n:
    draft = FAMILIES[rng.choice(list(job.data.families))].draft(rng, "train")
    ids, mask = chat.format_sft_example(tokenizer, draft.request,
                                        chat.format_response(draft.reference))
    if len(ids) <= job.sft.max_len:
      out.append((list(map(int, ids)), list(map(int, mask))))
  return out


def sft_steps(examples: list, batch_size: int, max_len: int, group: int,
              bucket: int, head_on_loss: bool = False) -> list[dict[str, Any]]:
  """The examples' SFT steps as this tree's trainer lays them out: the stream's batches
  of `batch_size`, and where the tree has them, grouped by length (`group` steps per
  window, `sft.length_grouped`) in rows of the step's bucket (`sft.length_bucket`),
  with `head_on_loss` their `loss_positions` (`sft.head_on_loss_positions`); an older
  tree pads every row to `max_len`."""
  steps = len(examples) // batch_size
  if not hasattr(batching, "grouped_batch_indices"):
    idx = [list(range(k * batch_size, (k + 1) * batch_size)) for k in range(steps)]
    return [{k: jnp.asarray(v) for k, v in batching.sft_batch(
        [examples[i] for i in ix], max_len=max_len, pad_id=0).items()} for ix in idx]
  lengths = [len(ids) for ids, _ in examples]
  out = []
  for k in range(steps):
    ix = batching.grouped_batch_indices(lengths, batch_size, k, 0, group or steps)
    batch = batching.sft_batch([examples[i] for i in ix], max_len=max_len, pad_id=0,
                               bucket=bucket)
    if head_on_loss:
      batch["loss_positions"] = batching.loss_positions(batch["loss_mask"], bucket)
    out.append({n: jnp.asarray(v) for n, v in batch.items()})
  return out


def rollout_gap(model: Any, prompts: list, out: Any) -> str:
  """How far a sampler's log-probs of its decoded tokens (`out`, `generate`'s output for
  `prompts`) lie from `model`'s full forward over prompt + sample (one line)."""
  new = out.tokens.shape[1]
  start = len(prompts[0]) - 1  # equal prompt lengths; logits at t predict token t + 1
  forward = nnx.jit(lambda m, ids: jax.nn.log_softmax(
      m(ids)[:, start:start + new].astype(jnp.float32)))
  full = []
  for i in range(0, len(prompts), 8):  # 8 rows of [T, vocab] log-probs at a time
    ids = jnp.asarray([list(p) + out.tokens[i + j].tolist()
                       for j, p in enumerate(prompts[i:i + 8])], jnp.int32)
    full.append(np.take_along_axis(np.asarray(forward(model, ids)),
                                   out.tokens[i:i + 8, :, None], -1)[..., 0])
  full = np.concatenate(full)
  gap = np.abs(full - out.logprobs)[np.arange(new)[None] < out.lengths[:, None]]
  return (f"log-prob gap over {len(gap)} decoded tokens: mean {gap.mean():.2e}, "
          f"99th percentile {np.quantile(gap, 0.99):.2e}, max {gap.max():.2e}")


def sft_batch(rng: np.random.Generator, rows: int, length: int, vocab: int,
              prompt: int) -> dict[str, Any]:
  ids = rng.integers(3, vocab, (rows, length)).astype(np.int32)
  loss_mask = np.zeros((rows, length), np.float32)
  loss_mask[:, prompt:] = 1.0
  return {"input_ids": jnp.asarray(ids),
          "attention_mask": jnp.ones((rows, length), jnp.float32),
          "loss_mask": jnp.asarray(loss_mask)}


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default="experiments/natural_v2.py:pilot")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--length", type=int, default=448)
  parser.add_argument("--rl_rows", type=int, default=16)
  parser.add_argument("--prompt", type=int, default=96)
  parser.add_argument("--new", type=int, default=256)
  parser.add_argument("--reps", type=int, default=3)
  parser.add_argument("--rl_max_len", type=int, default=0,
                      help="the trainer's RL row limit (0: the config's rl.max_prompt_len "
                           "+ rl.max_new_tokens, natural_v2's 160 + 320)")
  parser.add_argument("--rl_lengths", default="",
                      help="prompt:response tokens of each trainer RL row, comma-separated "
                           "(default: a natural_v2 round, NATURAL_V2_ROUND)")
  parser.add_argument("--policy", default="",
                      help="a Hugging Face Llama policy (natural_v2_select --pack): also "
                           "time its RL sampling rounds (`--rounds` natural_v2 rounds of "
                           "16 samples, its end token ending rows)")
  parser.add_argument("--rounds", type=int, default=6)
  parser.add_argument("--rounds_file", default="",
                      help="the rounds' prompts (JSON, `natural_v2_rounds`; default: drawn)")
  parser.add_argument("--sft_examples", type=int, default=128,
                      help="also time SFT steps of `batch` of this many of the config's "
                           "own examples (0: not), laid out as the tree's trainer does")
  parser.add_argument("--sft_group", type=int, default=0,
                      help="sft.length_grouped for them (0: all the steps one window)")
  parser.add_argument("--sft_bucket", type=int, default=64,
                      help="sft.length_bucket for them")
  parser.add_argument("--sft_file", default="",
                      help="the examples (JSON, `sft_examples`; default: drawn)")
  parser.add_argument("--no_rl", action="store_true",
                      help="leave out the RL log-prob and update phases (a large model's)")
  parser.add_argument("--model_set", default="",
                      help="model config overrides, FIELD=VALUE comma-separated (this "
                           "tree's runs only with --baseline)")
  parser.add_argument("--sft_head_on_loss", action="store_true",
                      help="sft.head_on_loss_positions for the examples' steps (this "
                           "tree's runs only with --baseline)")
  parser.add_argument("--rollout_dtype", default="",
                      help="sample with `sampler.rollout_copy` in this dtype (this "
                           "tree's runs only with --baseline)")
  parser.add_argument("--json", default="")
  parser.add_argument("--baseline", default="",
                      help="a commit: time the same phases there (a git worktree), "
                           "in this run, and print the ratios")
  parser.add_argument("--baseline_env", default="",
                      help="environment of the baseline's runs, NAME=VALUE "
                           "comma-separated (e.g. RCCA_ALLOCATOR=system with --baseline "
                           "HEAD: the host allocator alone)")
  args = parser.parse_args(argv)
  if args.baseline:
    return compare(args)

  config = load_config(args.config)
  for item in filter(None, args.model_set.split(",")):
    field, _, value = item.partition("=")
    config.model[field] = ast.literal_eval(value)
  job = sections.job_config(config)
  if job.pretrained_source:  # a pretrained policy (SmolLM2's GGUF file): the run's own
    progs = programs_lib.Programs(job)
    fmodel, cfg = progs.fmodel, progs.model_cfg
    model = fmodel.merge(fmodel.params, fmodel.model_state)
  else:
    tokenizer = sections.load_tokenizer(job.data.tokenizer)
    cfg = sections.model_config(job, tokenizer)
    model = families.build(cfg, nnx.Rngs(0))
    fmodel = train_step.FunctionalModel(model)
  n_params = sum(x.size for x in jax.tree.leaves(fmodel.params))
  opt = optim.OptimizerConfig(learning_rate=1e-4, total_steps=100)
  rng = np.random.default_rng(0)
  rows = []

  # Parameters that multiply activations: all but an untied embedding table (looked up).
  n_matmul = n_params - (0 if getattr(cfg, "tie_word_embeddings", True)
                         else cfg.vocab_size * cfg.hidden_size)

  def report(phase: str, tokens: int, flops: float, estimate: float, seconds: float,
             peak: float) -> None:
    achieved = estimate / seconds / 1e9 if seconds else 0.0
    rows.append(dict(phase=phase, tokens=tokens, xla_gflop=flops / 1e9,
                     estimate_gflop=estimate / 1e9, seconds=seconds,
                     gflops=achieved, share_of_peak=achieved / peak if peak else 0.0))

  tokens = args.batch * args.length
  peak = peak_gflops(tokens, cfg.hidden_size, cfg.intermediate_size)
  peak_logits = peak_gflops(tokens, cfg.hidden_size, cfg.vocab_size)

  # SFT step.
  sft_step = jax.jit(train_step.make_train_step(
      fmodel, sft_lib.NextTokenObjective(), opt, train_step.StepConfig()))
  state = train_step.init_state(fmodel, opt, 0)
  batch = sft_batch(rng, args.batch, args.length, cfg.vocab_size, args.prompt)
  report("sft step", tokens, xla_flops(sft_step, state, batch),
         model_flops(cfg, n_matmul, args.batch, args.length, True),
         median_seconds(lambda: sft_step(state, batch), args.reps), peak)

  # SFT steps of the config's own examples, laid out by this tree's trainer: the
  # mean step over the examples (the same examples in every tree).
  if args.sft_examples:
    if not args.sft_file:
      args.sft_file = os.path.join(tempfile.mkdtemp(), "sft_examples.json")
      sft_examples(args.sft_file, args.config, args.sft_examples)
    with open(args.sft_file) as f:
      spec = json.load(f)
    steps = sft_steps(spec["examples"], args.batch, spec["max_len"], args.sft_group,
                      args.sft_bucket, args.sft_head_on_loss)
    examples_step = sft_step
    if args.sft_head_on_loss:
      examples_step = jax.jit(train_step.make_train_step(
          fmodel, sft_lib.NextTokenObjective(sft_lib.SFT_KEYS + sft_lib.POSITION_KEYS),
          opt, train_step.StepConfig()))
    def run_steps():
      return [examples_step(state, b) for b in steps]
    slots = sum(b["input_ids"].size for b in steps)
    report(f"sft step ({len(spec['examples'])} examples)", slots // len(steps), 0.0,
           sum(model_flops(cfg, n_matmul, *b["input_ids"].shape, True) for b in steps)
           / len(steps), median_seconds(run_steps, args.reps) / len(steps), peak)

  # Sampling: prefill and decode.
  prompts = [list(rng.integers(3, cfg.vocab_size, args.prompt)) for _ in range(args.rl_rows)]
  sampler_model = (sampler_lib.rollout_copy(model, args.rollout_dtype) if args.rollout_dtype
                   else model)
  def sample(n: int, sampler_model=sampler_model):
    return generate(sampler_model, prompts, max_new_tokens=n, temperature=1.0, seed=0)
  first = sample(args.new)
  tokens_sampled = np.asarray(first.tokens)
  gap_note = (f"{args.rollout_dtype} sampler: {rollout_gap(model, prompts, first)}; "
              f"float32 sampler: {rollout_gap(model, prompts, sample(args.new, model))}"
              if args.rollout_dtype else "")
  one = median_seconds(lambda: sample(1), args.reps)
  full = median_seconds(lambda: sample(args.new), args.reps)
  prefill_tokens = args.rl_rows * args.prompt
  decode_tokens = args.rl_rows * (args.new - 1)
  # Prefill computes no logits (the LM head's 2 * hidden * vocab per token is skipped);
  # decoded token i attends to the prompt and the i tokens before it.
  head = cfg.hidden_size * cfg.vocab_size
  attn_per_key = model_flops(cfg, 0, 1, 1, False)  # 4·d·layers per (token, key)
  report("prefill", prefill_tokens, 0.0,
         model_flops(cfg, n_matmul - head, args.rl_rows, args.prompt, False), one, peak)
  keys = sum(args.prompt + i for i in range(1, args.new))
  report("decode", decode_tokens, 0.0,
         2.0 * n_matmul * decode_tokens + attn_per_key * args.rl_rows * keys,
         full - one, peak)

  # A policy's RL sampling rounds: prefill and decode as RL runs them, rows ending at
  # the policy's end token (the time per round; tokens are those sampled).
  rounds_sampled = []
  if args.policy:
    if not args.rounds_file:
      args.rounds_file = os.path.join(tempfile.mkdtemp(), "rounds.json")
      natural_v2_rounds(args.rounds_file, args.rounds)
    with open(args.rounds_file) as f:
      spec = json.load(f)
    policy = llama_checkpoint.load(args.policy)
    if args.rollout_dtype:
      policy = sampler_lib.rollout_copy(policy, args.rollout_dtype)
    def sample_rounds():
      return [generate(policy, prompts, max_new_tokens=spec["max_new_tokens"],
                       temperature=1.0, seed=seed, eos_ids=[spec["eos_id"]])
              for seed, prompts in enumerate(spec["rounds"])]
    outs = sample_rounds()  # every shape compiled
    seconds = median_seconds(sample_rounds, args.reps)
    rounds_sampled = [o.tokens.tolist() for o in outs]
    new = [int(n) for o in outs for n in o.lengths]
    prompt_lens = [len(p) for r in spec["rounds"] for p in r]
    estimate = sum(2.0 * (n_matmul - head) * p + 2.0 * n_matmul * n
                   + attn_per_key * sum(p + i for i in range(1, n + 1))
                   for p, n in zip(prompt_lens, new))
    report(f"sampling a round ({len(spec['rounds'])})", sum(new) // len(outs), 0.0,
           estimate / len(outs), seconds / len(outs), peak)

  trainer_note = ""
  if not args.no_rl:
    # RL: the log-prob pass (old log-probs; the reference pass is the same program) and
    # the GRPO update, on full rows and on the trainer's batch of natural_v2 rollouts.
    logp = jax.jit(logprobs_lib.make_logprob_fn(fmodel))
    objective = PolicyObjective(LossConfig(policy_loss="grpo"), group_size=job.rl.group_size)
    rl_step = jax.jit(train_step.make_train_step(fmodel, objective, opt,
                                                 train_step.StepConfig()))

    def rl_phases(name: str, rl_batch: dict[str, Any], rl_step=rl_step) -> None:
      b, length = rl_batch["input_ids"].shape
      if "prompt_ids" in rl_batch:  # the shared prompts' tokens, once per group
        length += rl_batch["prompt_ids"].size // b
      report(f"rl log-probs{name}", b * length,
             xla_flops(logp, state.params, state.model_state, rl_batch),
             model_flops(cfg, n_matmul, b, length, False),
             median_seconds(lambda: logp(state.params, state.model_state, rl_batch),
                            args.reps), peak)
      rl_batch = dict(rl_batch)
      rl_batch["old_logp"] = jnp.asarray(logp(state.params, state.model_state, rl_batch))
      report(f"rl update{name}", b * length, xla_flops(rl_step, state, rl_batch),
             model_flops(cfg, n_matmul, b, length, True),
             median_seconds(lambda: rl_step(state, rl_batch), args.reps), peak)

    length = args.prompt + args.new
    full_rows = sft_batch(rng, args.rl_rows, length, cfg.vocab_size, args.prompt)
    rewards = rng.uniform(0, 1, args.rl_rows)
    full_rows.update(
        advantages=jnp.asarray((rewards - rewards.mean()) / (rewards.std() + 1e-6),
                               jnp.float32),
        wbar=jnp.ones((args.rl_rows, length), jnp.float32))
    rl_phases("", full_rows)
    lengths = ([tuple(int(x) for x in pair.split(":")) for pair in args.rl_lengths.split(",")]
               if args.rl_lengths else NATURAL_V2_ROUND)
    max_len = args.rl_max_len or job.rl.max_prompt_len + job.rl.max_new_tokens
    twin = copy.deepcopy(rng)  # the same rollouts again, laid out with shared prompts
    trainer_batch = trainer_rl_batch(job, lengths, max_len, cfg.vocab_size, rng)
    real = int(np.asarray(trainer_batch["attention_mask"]).sum())
    rl_phases(" (trainer)", trainer_batch)
    if hasattr(batching, "prefix_batch"):  # this tree stores a group's prompt once
      shared = trainer_rl_batch(job, lengths, max_len, cfg.vocab_size, twin,
                                shared_prefix=True)
      rl_phases(" (trainer, prefix)", shared, jax.jit(train_step.make_train_step(
          fmodel, PolicyObjective(LossConfig(policy_loss="grpo"), job.rl.group_size, True),
          opt, train_step.StepConfig())))
    trainer_note = (f"trainer RL batch: {len(lengths)} rollouts, {real} real tokens, "
                    f"rows padded to {trainer_batch['input_ids'].shape[1]} (rl.length_bucket="
                    f"{getattr(job.rl, 'length_bucket', 'none')}, at most {max_len})")

  print(f"{args.config}: {n_params / 1e6:.2f}M parameters, {jax.device_count()} device(s),"
        f" measured peak {peak:.1f} GFLOP/s (MLP shape), {peak_logits:.1f} (logits shape)")
  if trainer_note:
    print(trainer_note)
  if gap_note:
    print(gap_note)
  print(f"{'phase':<24}{'tokens':>8}{'XLA GFLOP':>11}{'GFLOP':>9}{'seconds':>9}"
        f"{'GFLOP/s':>9}{'of peak':>9}")
  for r in rows:
    print(f"{r['phase']:<24}{r['tokens']:>8}{r['xla_gflop']:>11.2f}"
          f"{r['estimate_gflop']:>9.2f}{r['seconds']:>9.3f}{r['gflops']:>9.1f}"
          f"{r['share_of_peak']:>9.1%}")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(config=args.config, params=n_params, peak_gflops=peak,
                     peak_logits_gflops=peak_logits, phases=rows,
                     sampled_tokens=tokens_sampled.tolist(),
                     rounds_sampled=rounds_sampled), f, indent=1)
  return 0


def compare(args: argparse.Namespace) -> int:
  """Runs this script here and at `args.baseline` (a worktree), alternately
  `args.reps` times each, and prints the per-phase time ratios and whether the
  fixed-seed samples agree."""
  base = tempfile.mkdtemp(prefix="roofline_base_")
  subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", base, args.baseline],
                 check=True, capture_output=True)
  if args.policy:  # one policy for both trees; its rounds drawn here (older trees lack
    args.policy = os.path.abspath(args.policy)  # the families)
    if not args.rounds_file:
      args.rounds_file = os.path.join(base, "rounds.json")
      natural_v2_rounds(args.rounds_file, args.rounds)
  if args.sft_examples and not args.sft_file:  # the same examples in both trees
    args.sft_file = os.path.join(base, "sft_examples.json")
    sft_examples(args.sft_file, args.config, args.sft_examples)
  own = [f"--{name}" if value is True else f"--{name}={value}"
         for name, value in vars(args).items()
         if name not in ("baseline", "baseline_env", "json", "model_set",
                         "sft_head_on_loss", "rollout_dtype")
         and value is not False]
  here = (([f"--model_set={args.model_set}"] if args.model_set else [])
          + (["--sft_head_on_loss"] if args.sft_head_on_loss else [])
          + ([f"--rollout_dtype={args.rollout_dtype}"] if args.rollout_dtype else []))
  script = os.path.abspath(__file__)
  base_env = dict(item.split("=", 1) for item in filter(None, args.baseline_env.split(",")))
  try:
    runs = {"baseline": [], "this": []}
    for _ in range(2):
      for name, cwd in (("baseline", base), ("this", REPO)):
        out = os.path.join(base, f"{name}_{len(runs[name])}.json")
        extra = here if name == "this" else []
        env = {**os.environ, "PYTHONPATH": cwd, **(base_env if name == "baseline" else {})}
        subprocess.run([sys.executable, script, *own, *extra, f"--json={out}"], cwd=cwd,
                       check=True, env=env)
        with open(out) as f:
          runs[name].append(json.load(f))
  finally:
    subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base],
                   capture_output=True)
  best = {name: {p["phase"]: min(r["phases"][i]["seconds"] for r in rs)
                 for i, p in enumerate(rs[0]["phases"])} for name, rs in runs.items()}
  print(f"\nbaseline {args.baseline} vs this tree (best of 2 runs each, interleaved)")
  print(f"{'phase':<24}{'baseline s':>11}{'this s':>9}{'speed-up':>10}")
  for phase, seconds in best["this"].items():
    base_s = best["baseline"].get(phase)  # None: a phase the baseline tree lacks
    print(f"{phase:<24}" + (f"{base_s:>11.3f}" if base_s else f"{'–':>11}")
          + f"{seconds:>9.3f}" + (f"{base_s / seconds:>9.2f}x" if base_s else ""))
  a = np.asarray(runs["baseline"][0]["sampled_tokens"])
  b = np.asarray(runs["this"][0]["sampled_tokens"])
  print(f"fixed-seed samples: {int((a == b).all(axis=1).sum())} of {len(a)} rows identical")
  if args.policy:
    pairs = [(np.asarray(x), np.asarray(y)) for x, y in
             zip(runs["baseline"][0]["rounds_sampled"], runs["this"][0]["rounds_sampled"])]
    same = sum(int((x == y).all(axis=1).sum()) for x, y in pairs)
    print(f"the policy's rounds: {same} of {sum(len(x) for x, _ in pairs)} rows identical")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(baseline=args.baseline, runs=runs), f)
  return 0


if __name__ == "__main__":
  if host_allocator is not None:
    host_allocator.preload_tcmalloc()
  sys.exit(main())
