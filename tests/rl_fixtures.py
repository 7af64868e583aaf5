"""Tiny Ling model and random RL batches shared by the rl tests."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.ling import LingForCausalLM

VOCAB = 64


def tiny_config(**overrides) -> LingConfig:
  """4 layers (KDA, MLA, KDA, MLA), one dense then MoE with 4 experts, top-2."""
  fields = dict(
      vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
      moe_intermediate_size=16, num_hidden_layers=4, num_attention_heads=2,
      kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
      linear_head_dim=8, num_local_experts=4, num_experts_per_tok=2,
      n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1,
      layer_group_size=2, num_mtp_layers=0, pad_token_id=0, eos_token_id=1,
      moe_impl="dense", kda_chunk_size=8)
  fields.update(overrides)
  return LingConfig(**fields)


def tiny_model(seed: int = 0, **overrides) -> LingForCausalLM:
  return LingForCausalLM(tiny_config(**overrides), rngs=nnx.Rngs(seed))


def rl_batch(batch: int = 8, length: int = 16, group_size: int = 4,
             seed: int = 0) -> dict[str, np.ndarray]:
  """Right-padded prompt+response rows with one empty response and one equal group."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(2, VOCAB, (batch, length)).astype(np.int32)
  prompt = rng.integers(2, 6, batch)
  total = rng.integers(length // 2, length + 1, batch)
  total[1] = prompt[1]  # An empty response.
  pos = np.arange(length)[None]
  attention = (pos < total[:, None]).astype(np.float32)
  loss_mask = ((pos >= prompt[:, None]) & (pos < total[:, None])).astype(np.float32)
  ids = np.where(attention > 0, ids, 0).astype(np.int32)
  rewards = rng.uniform(0, 1, batch)
  rewards[:group_size] = 0.5  # A group with all-equal rewards.
  grouped = rewards.reshape(-1, group_size)
  adv = ((grouped - grouped.mean(1, keepdims=True)) /
         (grouped.std(1, keepdims=True) + 1e-6)).reshape(-1)
  return dict(
      input_ids=ids, attention_mask=attention, loss_mask=loss_mask,
      old_logp=(np.log(1 / VOCAB) + 0.3 * rng.standard_normal((batch, length))
                ).astype(np.float32),
      advantages=adv.astype(np.float32),
      wbar=rng.choice([1.0, 1.5, 3.0, 4.0], (batch, length)).astype(np.float32),
      ref_logp=(np.log(1 / VOCAB) + 0.3 * rng.standard_normal((batch, length))
                ).astype(np.float32))


def small_model(seed: int = 0):
  """The fastest-compiling tiny Ling: one KDA + MoE and one MLA + MoE layer."""
  return tiny_model(seed, num_hidden_layers=2, first_k_dense_replace=0)


def max_scaled_diff(a, b) -> float:
  """max over leaves of max|a - b| / max|a| (0 for leaves that are all zero)."""
  worst = 0.0
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    scale = np.max(np.abs(x), initial=0.0)
    diff = np.max(np.abs(x - y), initial=0.0)
    worst = max(worst, diff / scale if scale else diff)
  return worst


def run_child(script: str, *args: str, devices: int = 8, timeout: int = 900) -> dict:
  """Runs `python script --child ARGS` with `devices` fake CPU devices; returns the
  JSON object it prints on its last stdout line."""
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                       f"--xla_force_host_platform_device_count={devices}",
             PYTHONPATH=os.pathsep.join(
                 [os.path.dirname(os.path.abspath(__file__)),
                  os.environ.get("PYTHONPATH", "")]))
  proc = subprocess.run([sys.executable, script, "--child", *args], env=env,
                        capture_output=True, text=True, timeout=timeout, check=False)
  if proc.returncode:
    raise AssertionError(f"child {script} {args} failed ({proc.returncode}):\n"
                         f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])
