"""RCCA train-step time vs plain GRPO, measured in the same run on the same batches.

  .venv/bin/python benchmarks/train_step.py [--reps 10] [--batch 8] [--length 128]
      [--micro-batches 2] [--hidden 128] [--layers 4]

Both steps are the same compiled machinery on a small Ling model (KDA + MLA layers,
MoE); they differ only in the policy loss ("rcca" turns the diagnostic weights into
effective weights inside the loss, "grpo" uses weight 1). Reports the compile time of
each, XLA's flop / byte estimates of each compiled step, the median step time over
interleaved repetitions (order alternates every repetition), tokens/s, and the ratio
RCCA / GRPO (target <= 1.02). In the same repetitions it times one rollout batch with
μ = 2 updates (`rl.num_iterations=2`, RCCA, the same compiled step called twice) and
reports its cost relative to μ = 1 (target <= 2.1).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.ling import LingForCausalLM
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts
from rcca_jax.rl import batch_updates


def bench_config(hidden: int, layers: int) -> LingConfig:
  return LingConfig(
      vocab_size=1024, hidden_size=hidden, intermediate_size=2 * hidden,
      moe_intermediate_size=hidden // 2, num_hidden_layers=layers,
      num_attention_heads=4, kv_lora_rank=hidden // 4, qk_nope_head_dim=16,
      qk_rope_head_dim=16, v_head_dim=16, linear_head_dim=hidden // 4,
      num_local_experts=8, num_experts_per_tok=2, n_shared_experts=1, n_group=1,
      topk_group=1, first_k_dense_replace=1, layer_group_size=2, num_mtp_layers=0,
      pad_token_id=0, eos_token_id=1, moe_impl="ragged", kda_chunk_size=32)


def make_batch(rng: np.random.Generator, batch: int, length: int, vocab: int,
               group_size: int) -> dict[str, np.ndarray]:
  """Prompt (1/4) + response rows, diagnostic weights as RCCA produces them."""
  ids = rng.integers(2, vocab, (batch, length)).astype(np.int32)
  loss_mask = np.zeros((batch, length), np.float32)
  loss_mask[:, length // 4:] = 1.0
  rewards = rng.uniform(0, 1, batch).reshape(-1, group_size)
  adv = ((rewards - rewards.mean(1, keepdims=True)) /
         (rewards.std(1, keepdims=True) + 1e-6)).reshape(-1)
  return ts.numpy_batch(dict(
      input_ids=ids, attention_mask=np.ones((batch, length), np.float32),
      loss_mask=loss_mask,
      old_logp=np.log(1.0 / vocab) + 0.1 * rng.standard_normal((batch, length)),
      advantages=adv,
      wbar=rng.choice([1.0, 1.0, 1.0, 1.5, 3.0, 4.0], (batch, length))),
      ts.RL_KEYS)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--reps", type=int, default=10)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--length", type=int, default=128)
  parser.add_argument("--micro-batches", type=int, default=2)
  parser.add_argument("--hidden", type=int, default=128)
  parser.add_argument("--layers", type=int, default=4)
  args = parser.parse_args()

  cfg = bench_config(args.hidden, args.layers)
  fmodel = ts.FunctionalModel(LingForCausalLM(cfg, rngs=nnx.Rngs(0)))
  opt = optim.OptimizerConfig(learning_rate=1e-5, total_steps=1000)
  step_config = ts.StepConfig(micro_batches=args.micro_batches)
  rng = np.random.default_rng(0)
  batches = [make_batch(rng, args.batch, args.length, cfg.vocab_size, 4)
             for _ in range(4)]
  n_params = sum(x.size for x in jax.tree.leaves(fmodel.params))
  print(f"model: {n_params / 1e6:.2f}M params, {cfg.num_hidden_layers} layers; "
        f"batch {args.batch} x {args.length} tokens, {args.micro_batches} micro-batches,"
        f" {jax.device_count()} {jax.devices()[0].platform} device(s)")

  runs = {}
  for name in ("grpo", "rcca"):
    objective = ts.PolicyObjective(objective_lib.preset(name), group_size=4)
    step = ts.make_train_step(fmodel, objective, opt, step_config)
    state = ts.init_state(fmodel, opt)
    start = time.perf_counter()
    compiled = jax.jit(step, donate_argnums=0).lower(state, batches[0]).compile()
    compile_s = time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    state, metrics = compiled(state, batches[0])  # Warm-up.
    jax.block_until_ready(metrics)
    runs[name] = {"step": compiled, "state": state, "times": [],
                  "compile_s": compile_s, "flops": float(cost.get("flops", 0.0)),
                  "bytes": float(cost.get("bytes accessed", 0.0))}
  # μ = 2: the RCCA step twice per rollout batch (its own state, same program).
  mu2 = {"step": runs["rcca"]["step"], "times": [],
         "state": ts.init_state(fmodel, opt)}
  mu2_config = batch_updates.UpdateConfig(num_iterations=2)

  for rep in range(args.reps):
    order = ("grpo", "rcca", "mu2") if rep % 2 == 0 else ("mu2", "rcca", "grpo")
    for name in order:
      run = mu2 if name == "mu2" else runs[name]
      batch = batches[rep % len(batches)]
      start = time.perf_counter()
      if name == "mu2":  # fetches its metrics, as the trainer does
        run["state"], _ = batch_updates.run_updates(run["step"], run["state"], batch,
                                                    mu2_config)
        jax.block_until_ready(run["state"])
      else:
        run["state"], metrics = run["step"](run["state"], batch)
        jax.block_until_ready((run["state"], metrics))
      run["times"].append(time.perf_counter() - start)

  tokens = args.batch * args.length
  for name, run in runs.items():
    median = statistics.median(run["times"])
    print(f"{name}: compile {run['compile_s']:.1f} s, step median {median * 1e3:.1f} ms "
          f"(min {min(run['times']) * 1e3:.1f}, max {max(run['times']) * 1e3:.1f}), "
          f"{tokens / median:,.0f} tokens/s, XLA flops {run['flops']:.4g}, "
          f"bytes {run['bytes']:.4g}")
  time_ratio = (statistics.median(runs["rcca"]["times"]) /
                statistics.median(runs["grpo"]["times"]))
  flop_ratio = runs["rcca"]["flops"] / max(runs["grpo"]["flops"], 1.0)
  print(f"RCCA / GRPO step time (median of {args.reps}): {time_ratio:.3f}  "
        f"(target <= 1.02); XLA flop ratio {flop_ratio:.4f}")
  mu_ratio = statistics.median(mu2["times"]) / statistics.median(runs["rcca"]["times"])
  print(f"μ = 2 / μ = 1 time per rollout batch (RCCA, median of {args.reps}): "
        f"{mu_ratio:.3f}  (target <= 2.1)")
  # Minima are less sensitive to other processes on a shared machine.
  print(f"ratios of the fastest repetitions: RCCA / GRPO "
        f"{min(runs['rcca']['times']) / min(runs['grpo']['times']):.3f}, μ = 2 / μ = 1 "
        f"{min(mu2['times']) / min(runs['rcca']['times']):.3f}")


if __name__ == "__main__":
  main()
