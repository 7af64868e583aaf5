"""Forward throughput on CPU: LingForCausalLM (JAX) vs transformers' PyTorch reference.

    python benchmarks/model_forward.py [--batch=4 --length=256 --repeats=5]
    python benchmarks/model_forward.py --compile   # compile time vs depth (scan)

Builds one small random `bailing_hybrid` checkpoint (hybrid KDA/MLA, MoE), loads it into
both implementations in the same run, checks the logits agree, and prints tokens/s of
each and their ratio; then chunked vs recurrent KDA (rcca_jax.models.kda_ops) on the
same inputs. With --compile: jit compile time of the forward for 2 vs 4 scanned layer
groups, and unrolled for contrast.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402
from transformers import BailingHybridConfig, BailingHybridForCausalLM  # noqa: E402

from rcca_jax.models import LingConfig, LingForCausalLM, kda_ops  # noqa: E402

HF_SHAPE = dict(vocab_size=4096, hidden_size=256, intermediate_size=512,
                moe_intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
                num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=None,
                qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=64, head_dim=64,
                n_group=4, topk_group=2, num_experts_per_tok=4, num_local_experts=16,
                first_k_dense_replace=1, layer_group_size=2, num_mtp_layers=0,
                pad_token_id=0, eos_token_id=1)


def _time(fn, repeats: int) -> float:
  fn()  # Warm-up (and compile).
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def forward_benchmark(batch: int, length: int, repeats: int, moe_impl: str) -> None:
  torch.manual_seed(0)
  hf = BailingHybridForCausalLM(BailingHybridConfig(**HF_SHAPE)).eval()
  path = tempfile.mkdtemp()
  hf.save_pretrained(path)
  model = LingForCausalLM.from_hf(path, moe_impl=moe_impl)
  ids = np.random.default_rng(0).integers(2, HF_SHAPE["vocab_size"], (batch, length))
  ids_t, ids_j = torch.tensor(ids), jnp.asarray(ids, jnp.int32)
  forward = nnx.jit(lambda m, x: m(x))

  def run_torch():
    with torch.no_grad():
      return hf(input_ids=ids_t).logits

  def run_jax():
    return forward(model, ids_j).block_until_ready()

  diff = float(np.abs(np.asarray(run_jax()) - run_torch().numpy()).max())
  t_torch, t_jax = _time(run_torch, repeats), _time(run_jax, repeats)
  tokens = batch * length
  print(f"shape: {HF_SHAPE['num_hidden_layers']} layers, hidden {HF_SHAPE['hidden_size']}, "
        f"{HF_SHAPE['num_local_experts']} experts top-{HF_SHAPE['num_experts_per_tok']}, "
        f"batch {batch} x {length} tokens, moe_impl={moe_impl}, torch threads "
        f"{torch.get_num_threads()}; max |logit diff| {diff:.2e}")
  print(f"forward  pytorch {tokens / t_torch:10.0f} tok/s   jax {tokens / t_jax:10.0f} tok/s"
        f"   jax/pytorch = {t_torch / t_jax:.2f}x")


def kda_benchmark(batch: int, length: int, repeats: int) -> None:
  heads, dim = 4, 64
  keys = jax.random.split(jax.random.key(0), 5)
  q = kda_ops.l2_normalize(jax.random.normal(keys[0], (batch, length, heads, dim)))
  k = kda_ops.l2_normalize(jax.random.normal(keys[1], (batch, length, heads, dim)))
  v = jax.random.normal(keys[2], (batch, length, heads, dim))
  g = -5.0 * jax.nn.sigmoid(jax.random.normal(keys[3], (batch, length, heads, dim)))
  beta = jax.nn.sigmoid(jax.random.normal(keys[4], (batch, length, heads)))
  chunked = lambda: kda_ops.kda_chunked(q, k, v, g, beta)[0].block_until_ready()
  recurrent = lambda: kda_ops.kda_recurrent(q, k, v, g, beta)[0].block_until_ready()
  diff = float(jnp.abs(chunked() - recurrent()).max())
  t_c, t_r = _time(chunked, repeats), _time(recurrent, repeats)
  tokens = batch * length
  print(f"kda      recurrent {tokens / t_r:8.0f} tok/s   chunked {tokens / t_c:8.0f} tok/s"
        f"   chunked/recurrent = {t_r / t_c:.2f}x  (max |diff| {diff:.1e})")


def compile_benchmark() -> None:
  base = dict(vocab_size=1024, hidden_size=128, intermediate_size=256,
              moe_intermediate_size=64, num_attention_heads=4, kv_lora_rank=32,
              qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32, linear_head_dim=32,
              n_group=4, topk_group=2, num_experts_per_tok=2, num_local_experts=8,
              first_k_dense_replace=1, layer_group_size=2)
  ids = jnp.ones((2, 64), jnp.int32)
  for layers, scan in ((6, True), (10, True), (6, False), (10, False)):
    cfg = LingConfig(num_hidden_layers=layers, scan_layers=scan, **base)
    model = LingForCausalLM(cfg, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    fn = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))
    start = time.perf_counter()
    fn.lower(state, ids).compile()
    seconds = time.perf_counter() - start
    print(f"compile  {layers:2d} layers, scan={scan!s:5} (unrolled, period, groups) = "
          f"{cfg.layer_schedule()}: {seconds:5.1f} s")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--length", type=int, default=256)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--moe_impl", default="ragged", choices=("ragged", "dense"))
  parser.add_argument("--compile", action="store_true")
  args = parser.parse_args()
  if args.compile:
    compile_benchmark()
    return
  forward_benchmark(args.batch, args.length, args.repeats, args.moe_impl)
  kda_benchmark(args.batch, args.length, args.repeats)


if __name__ == "__main__":
  main()
