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


SMALL = dict(num_hidden_layers=2, first_k_dense_replace=0)


def small_model(seed: int = 0):
  """The fastest-compiling tiny Ling: one KDA + MoE and one MLA + MoE layer."""
  return tiny_model(seed, **SMALL)


# float32's unit roundoff: one rounded operation is exact to a relative 2^-24.
U32 = 2.0 ** -24


def reduction_length(config: LingConfig, batch: dict[str, np.ndarray]) -> int:
  """N of the float32 error bound of a gradient of the Ling model on `batch`.

  Each gradient entry is a sum over the batch's B*L positions of products along the
  network, whose factors are themselves dot products nested at most: the vocabulary
  (the softmax normaliser), and per layer the hidden size, the sequence (attention and
  the KDA scan) and the widest MLP (dense, or the routed plus shared experts). A sum
  of n terms in any order is within gamma_n = n*u/(1 - n*u) of exact, relative to the
  sum of the terms' magnitudes, and nested sums add their lengths to first order
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1, §4.2).
  """
  batch_size, length = batch["input_ids"].shape
  mlp = max(config.intermediate_size,
            config.moe_intermediate_size * (config.num_experts_per_tok
                                            + config.n_shared_experts))
  return (batch_size * length + config.vocab_size
          + config.num_hidden_layers * (config.hidden_size + length + mlp))


def gradient_term_scale(fmodel, batch: dict[str, np.ndarray], loss_config) -> list[float]:
  """Per gradient leaf, the largest sum over positions of the terms' magnitudes,
  max over entries of sum_bt |dL/dlogp_bt| * |dlogp_bt/dtheta| (float64 dL/dlogp
  written out in tests/np_reference.py; the Jacobian by `jax.jacrev`).

  This, not the gradient itself, is what float32 rounding is relative to: with
  advantages of both signs the terms cancel, and an entry can be orders of magnitude
  smaller than the terms it sums (see `assert_within_rounding`).
  """
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from np_reference import np_effective_weights, np_loss_and_grad  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl.functional import token_logprobs  # pylint: disable=import-outside-toplevel
  ids = jnp.asarray(batch["input_ids"])
  mask = jnp.asarray(batch["attention_mask"])

  def logp_of(params):
    logits = fmodel.merge(params, fmodel.model_state)(ids, attention_mask=mask)
    return token_logprobs(logits, ids)[0]

  logp = np.asarray(logp_of(fmodel.params), np.float64)
  adv = np.asarray(batch["advantages"], np.float64)
  weights = np_effective_weights(np.asarray(batch["wbar"], np.float64), adv,
                                 loss_config.rcca_c, loss_config.rcca_positive_blamed)
  ref = batch["ref_logp"] if loss_config.kl_beta else None
  _, dlogp = np_loss_and_grad(logp, batch["old_logp"], adv, weights, batch["loss_mask"],
                              loss_config.eps_low, loss_config.eps_high,
                              loss_config.aggregation, ref=ref, beta=loss_config.kl_beta)
  jacobian = jax.jit(jax.jacrev(logp_of))(fmodel.params)
  return [float(np.max(np.einsum("bt,bt...->...", np.abs(dlogp),
                                 np.abs(np.asarray(j, np.float64)))))
          for j in jax.tree.leaves(jacobian)]


def assert_within_rounding(got, want, scale: list[float], n: int) -> None:
  """Raises unless, for every leaf, max|got - want| <= 2 * gamma_n * scale[leaf].

  Two float32 evaluations of the same sums in different orders are each within
  gamma_n * (sum of the terms' magnitudes) of the exact value (`reduction_length`,
  `gradient_term_scale`), so they differ by at most twice that. A wiring error (a
  position off by one, a chunk or micro-batch dropped or counted twice) moves an entry
  by a share of order one of that scale, about 1 / (2 * gamma_n) times the bound.
  """
  gamma = n * U32 / (1 - n * U32)
  leaves = jax.tree_util.tree_leaves_with_path(got)
  for (path, x), y, s in zip(leaves, jax.tree.leaves(want), scale, strict=True):
    diff = float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
    if diff > 2 * gamma * s:
      raise AssertionError(f"gradient {jax.tree_util.keystr(path)}: max difference "
                           f"{diff:.3e} exceeds "
                           f"2 * gamma_{n} * {s:.3e} = {2 * gamma * s:.3e}")


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
