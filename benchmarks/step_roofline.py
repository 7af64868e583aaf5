"""Every SFT and RL phase against what this machine's cores can do (issue 50).

    .venv/bin/python benchmarks/step_roofline.py [--config experiments/natural_v2.py:pilot]
        [--batch 8] [--length 448] [--rl_rows 16] [--prompt 96] [--new 256] [--reps 3]
        [--json OUT]

For one config's model it times, in one process: the measured peak (a jitted float32
matmul of the model's own MLP shape, [batch x length, hidden] @ [hidden, intermediate],
and its logits shape), an SFT step of `batch` rows of `length` tokens, sampling
`rl_rows` rows (prefill of `prompt` tokens, then `new` decoded tokens, timed as the
difference of a `new`-token and a 1-token generation), the RL log-prob pass (old
log-probs; the reference pass costs the same) and the GRPO update of that batch. One
line per phase: tokens, XLA's flop count of the compiled program (cost analysis) beside
the 2·N·T (forward) or 6·N·T (training) estimate, the median seconds of `reps`, the
achieved GFLOP/s and that as a share of the measured peak. Times are medians of
interleaved repetitions; the peak is measured in the same run, so the shares hold on
any machine (numbers from a loaded machine are still ratios of the same load).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
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

from rcca_jax.models import families
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step
from rcca_jax.sampling import generate
from rcca_jax.train import sections


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
  fn()  # compiled and warm
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def peak_gflops(rows: int, k: int, n: int, reps: int) -> float:
  """GFLOP/s of a jitted float32 [rows, k] @ [k, n] matmul."""
  a = jnp.asarray(np.random.default_rng(0).standard_normal((rows, k)), jnp.float32)
  b = jnp.asarray(np.random.default_rng(1).standard_normal((k, n)), jnp.float32)
  f = jax.jit(jnp.matmul)
  return 2.0 * rows * k * n / median_seconds(lambda: f(a, b), reps) / 1e9


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
  parser.add_argument("--json", default="")
  parser.add_argument("--baseline", default="",
                      help="a commit: time the same phases there (a git worktree), "
                           "in this run, and print the ratios")
  args = parser.parse_args(argv)
  if args.baseline:
    return compare(args)

  job = sections.job_config(load_config(args.config))
  tokenizer = sections.load_tokenizer(job.data.tokenizer)
  cfg = sections.model_config(job, tokenizer)
  model = families.build(cfg, nnx.Rngs(0))
  fmodel = train_step.FunctionalModel(model)
  n_params = sum(x.size for x in jax.tree.leaves(fmodel.params))
  opt = optim.OptimizerConfig(learning_rate=1e-4, total_steps=100)
  rng = np.random.default_rng(0)
  rows = []

  def report(phase: str, tokens: int, flops: float, estimate: float, seconds: float,
             peak: float) -> None:
    # Sampling runs several programs in a loop: its count is the estimate.
    achieved = (flops or estimate) / seconds / 1e9 if seconds else 0.0
    rows.append(dict(phase=phase, tokens=tokens, xla_gflop=flops / 1e9,
                     estimate_gflop=estimate / 1e9, seconds=seconds,
                     gflops=achieved, share_of_peak=achieved / peak if peak else 0.0))

  tokens = args.batch * args.length
  peak = peak_gflops(tokens, cfg.hidden_size, cfg.intermediate_size, args.reps)
  peak_logits = peak_gflops(tokens, cfg.hidden_size, cfg.vocab_size, args.reps)

  # SFT step.
  sft_step = jax.jit(train_step.make_train_step(
      fmodel, sft_lib.NextTokenObjective(), opt, train_step.StepConfig()))
  state = train_step.init_state(fmodel, opt, 0)
  batch = sft_batch(rng, args.batch, args.length, cfg.vocab_size, args.prompt)
  report("sft step", tokens, xla_flops(sft_step, state, batch), 6.0 * n_params * tokens,
         median_seconds(lambda: sft_step(state, batch), args.reps), peak)

  # Sampling: prefill and decode.
  prompts = [list(rng.integers(3, cfg.vocab_size, args.prompt)) for _ in range(args.rl_rows)]
  def sample(n: int):
    return generate(model, prompts, max_new_tokens=n, temperature=1.0,
                                 seed=0).tokens
  tokens_sampled = np.asarray(sample(args.new))
  one = median_seconds(lambda: sample(1), args.reps)
  full = median_seconds(lambda: sample(args.new), args.reps)
  prefill_tokens = args.rl_rows * args.prompt
  decode_tokens = args.rl_rows * (args.new - 1)
  # Prefill computes no logits (the LM head's 2 * hidden * vocab per token is skipped).
  head = cfg.hidden_size * cfg.vocab_size
  report("prefill", prefill_tokens, 0.0, 2.0 * (n_params - head) * prefill_tokens, one,
         peak)
  report("decode", decode_tokens, 0.0, 2.0 * n_params * decode_tokens, full - one, peak)

  # RL: the log-prob pass (old log-probs; the reference pass is the same program) and
  # the GRPO update.
  length = args.prompt + args.new
  rl_batch = sft_batch(rng, args.rl_rows, length, cfg.vocab_size, args.prompt)
  logp = jax.jit(logprobs_lib.make_logprob_fn(fmodel))
  rl_tokens = args.rl_rows * length
  report("rl log-probs", rl_tokens, xla_flops(logp, state.params, state.model_state,
                                              rl_batch),
         2.0 * n_params * rl_tokens,
         median_seconds(lambda: logp(state.params, state.model_state, rl_batch),
                        args.reps), peak)
  rewards = rng.uniform(0, 1, args.rl_rows)
  rl_batch.update(
      old_logp=jnp.asarray(logp(state.params, state.model_state, rl_batch)),
      advantages=jnp.asarray((rewards - rewards.mean()) / (rewards.std() + 1e-6),
                             jnp.float32),
      wbar=jnp.ones((args.rl_rows, length), jnp.float32))
  objective = train_step.PolicyObjective(objective_lib.LossConfig(policy_loss="grpo"),
                                         group_size=8)
  rl_step = jax.jit(train_step.make_train_step(fmodel, objective, opt,
                                               train_step.StepConfig()))
  report("rl update", rl_tokens, xla_flops(rl_step, state, rl_batch),
         6.0 * n_params * rl_tokens,
         median_seconds(lambda: rl_step(state, rl_batch), args.reps), peak)

  print(f"{args.config}: {n_params / 1e6:.2f}M parameters, {jax.device_count()} device(s),"
        f" measured peak {peak:.1f} GFLOP/s (MLP shape), {peak_logits:.1f} (logits shape)")
  print(f"{'phase':<14}{'tokens':>8}{'XLA GFLOP':>11}{'est GFLOP':>11}{'seconds':>9}"
        f"{'GFLOP/s':>9}{'of peak':>9}")
  for r in rows:
    print(f"{r['phase']:<14}{r['tokens']:>8}{r['xla_gflop']:>11.2f}"
          f"{r['estimate_gflop']:>11.2f}{r['seconds']:>9.3f}{r['gflops']:>9.1f}"
          f"{r['share_of_peak']:>9.1%}")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(config=args.config, params=n_params, peak_gflops=peak,
                     peak_logits_gflops=peak_logits, phases=rows,
                     sampled_tokens=tokens_sampled.tolist()), f, indent=1)
  return 0


def compare(args: argparse.Namespace) -> int:
  """Runs this script here and at `args.baseline` (a worktree), alternately
  `args.reps` times each, and prints the per-phase time ratios and whether the
  fixed-seed samples agree."""
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  base = tempfile.mkdtemp(prefix="roofline_base_")
  subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", base, args.baseline],
                 check=True, capture_output=True)
  own = [f"--{name}={value}" for name, value in vars(args).items()
         if name not in ("baseline", "json")]
  script = os.path.abspath(__file__)
  try:
    runs = {"baseline": [], "this": []}
    for _ in range(2):
      for name, cwd in (("baseline", base), ("this", repo)):
        out = os.path.join(base, f"{name}_{len(runs[name])}.json")
        subprocess.run([sys.executable, script, *own, f"--json={out}"], cwd=cwd,
                       check=True, env={**os.environ, "PYTHONPATH": cwd})
        with open(out) as f:
          runs[name].append(json.load(f))
  finally:
    subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", base],
                   capture_output=True)
  best = {name: {p["phase"]: min(r["phases"][i]["seconds"] for r in rs)
                 for i, p in enumerate(rs[0]["phases"])} for name, rs in runs.items()}
  print(f"\nbaseline {args.baseline} vs this tree (best of 2 runs each, interleaved)")
  print(f"{'phase':<14}{'baseline s':>11}{'this s':>9}{'speed-up':>10}")
  for phase, seconds in best["this"].items():
    print(f"{phase:<14}{best['baseline'][phase]:>11.3f}{seconds:>9.3f}"
          f"{best['baseline'][phase] / seconds:>9.2f}x")
  a = np.asarray(runs["baseline"][0]["sampled_tokens"])
  b = np.asarray(runs["this"][0]["sampled_tokens"])
  print(f"fixed-seed samples: {int((a == b).all(axis=1).sum())} of {len(a)} rows identical")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(dict(baseline=args.baseline, runs=runs), f)
  return 0


if __name__ == "__main__":
  sys.exit(main())
