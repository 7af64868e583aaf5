"""Decode throughput of `rcca_jax.sampling.generate` vs transformers' `generate`.

Both run greedy decoding of the same tiny random `bailing_hybrid` checkpoint (fp32, on
CPU) for a batch of prompts, in the same process. Decode tokens/s excludes the prefill:
  decode_tps = batch * (N - 1) / (t(N new tokens) - t(1 new token)),
with each timing the best of `--repeats` warm runs (JAX compiled beforehand). Also
prints the decoding-state bytes per sequence at the final length for both, and whether
the greedy tokens agree.

  .venv/bin/python benchmarks/sampler_throughput.py [--batch 8 --new_tokens 128 ...]
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))

import jax  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
import torch  # pylint: disable=wrong-import-position

from hf_tiny import make_hf_model  # pylint: disable=wrong-import-position
from rcca_jax.models import LingForCausalLM  # pylint: disable=wrong-import-position
from rcca_jax.sampling import generate  # pylint: disable=wrong-import-position


def best_time(fn, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return min(times)


def torch_tensor_bytes(obj, seen=None) -> int:
  """Bytes of every distinct tensor reachable from a transformers cache object."""
  seen = set() if seen is None else seen
  if isinstance(obj, torch.Tensor):
    if id(obj) in seen:
      return 0
    seen.add(id(obj))
    return obj.numel() * obj.element_size()
  if isinstance(obj, (list, tuple)):
    return sum(torch_tensor_bytes(x, seen) for x in obj)
  if isinstance(obj, dict):
    return sum(torch_tensor_bytes(x, seen) for x in obj.values())
  if hasattr(obj, "__dict__") and not isinstance(obj, type):
    return sum(torch_tensor_bytes(x, seen) for x in vars(obj).values())
  return 0


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--prompt_len", type=int, default=16)
  parser.add_argument("--new_tokens", type=int, default=128)
  parser.add_argument("--layers", type=int, default=4)
  parser.add_argument("--hidden", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--torch_threads", type=int, default=0,
                      help="torch intra-op threads (0: torch's default)")
  args = parser.parse_args()
  if args.torch_threads:
    torch.set_num_threads(args.torch_threads)

  hf = make_hf_model(0, num_hidden_layers=args.layers, hidden_size=args.hidden)
  with tempfile.TemporaryDirectory() as path:
    hf.save_pretrained(path)
    model = LingForCausalLM.from_hf(path)
  vocab = hf.config.vocab_size
  rng = np.random.default_rng(0)
  prompts = rng.integers(2, vocab, size=(args.batch, args.prompt_len))
  torch_prompts = torch.tensor(prompts)

  def run_hf(n):
    with torch.no_grad():
      return hf.generate(torch_prompts, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0, return_dict_in_generate=True)

  def run_jax(n):
    return generate(model, prompts.tolist(), max_new_tokens=n, temperature=0.0)

  n = args.new_tokens
  for fn in (run_hf, run_jax):  # Warm-up (and JAX compilation).
    fn(1)
    fn(n)
  hf_out = run_hf(n)
  jax_out = run_jax(n)
  agree = np.mean(hf_out.sequences[:, args.prompt_len:].numpy() == jax_out.tokens)

  hf_time = best_time(lambda: run_hf(n), args.repeats) - best_time(lambda: run_hf(1),
                                                                  args.repeats)
  jax_time = best_time(lambda: run_jax(n), args.repeats) - best_time(lambda: run_jax(1),
                                                                    args.repeats)
  decoded = args.batch * (n - 1)
  hf_tps, jax_tps = decoded / hf_time, decoded / jax_time

  context = args.prompt_len + n
  cache = jax.eval_shape(lambda: model.init_cache(1, context))
  jax_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(cache))
  hf_bytes = torch_tensor_bytes(hf_out.past_key_values) / args.batch

  print(f"config: batch={args.batch} prompt_len={args.prompt_len} new_tokens={n} "
        f"layers={args.layers} hidden={args.hidden} ({hf.config.layer_types}) "
        f"torch_threads={torch.get_num_threads()} jax_devices={jax.device_count()}")
  print(f"greedy token agreement with transformers: {agree:.4f}")
  print(f"transformers generate: {hf_tps:9.1f} decode tokens/s "
        f"({1e3 * hf_time / (n - 1):.2f} ms per step)")
  print(f"rcca_jax generate:     {jax_tps:9.1f} decode tokens/s "
        f"({1e3 * jax_time / (n - 1):.2f} ms per step)")
  print(f"speed-up: {jax_tps / hf_tps:.2f}x")
  print(f"decoding state per sequence at {context} tokens: rcca_jax {jax_bytes} bytes, "
        f"transformers {hf_bytes:.0f} bytes")


if __name__ == "__main__":
  main()
