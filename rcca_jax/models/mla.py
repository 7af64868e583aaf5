"""Multi-head latent attention (DeepSeek-style MLA) with a head-wise output gate.

Keys and values come from a compressed latent (kv_lora_rank) plus one shared rotary
key. Rotary embedding is the interleaved variant on the rope dims, with YaRN when
configured. Decoding caches only the normalised latent and the rotated rope key and
attends in the latent space (the up-projection is absorbed into the query and output).
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.models import flash_attention
from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import Linear, RMSNorm
from rcca_jax.parallel.partitioning import constrain

_NEG = float(np.finfo(np.float32).min)


# ---- rotary embedding ---------------------------------------------------------


def rope_frequencies(cfg: LingConfig) -> tuple[np.ndarray, float]:
  """Inverse frequencies [rope_dim / 2] (float32) and the cos/sin attention factor."""
  dim = cfg.qk_rope_head_dim
  base = cfg.rope_theta
  pos_freqs = np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim))
  inv_freq = (1.0 / pos_freqs).astype(np.float32)
  if cfg.rope_type == "default":
    return inv_freq, 1.0
  return _yarn_frequencies(cfg, pos_freqs)


def _yarn_frequencies(cfg: LingConfig, pos_freqs: np.ndarray) -> tuple[np.ndarray, float]:
  p = cfg.rope_parameters
  dim = cfg.qk_rope_head_dim
  base = cfg.rope_theta
  original = p.get("original_max_position_embeddings", cfg.max_position_embeddings)
  factor = p.get("factor") or cfg.max_position_embeddings / original

  def mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

  attention_factor = p.get("attention_factor")
  if attention_factor is None:
    if p.get("mscale") and p.get("mscale_all_dim"):
      attention_factor = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
    else:
      attention_factor = mscale(factor)
  beta_fast = p.get("beta_fast") or 32
  beta_slow = p.get("beta_slow") or 1

  def correction_dim(rotations):
    return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

  low, high = correction_dim(beta_fast), correction_dim(beta_slow)
  if p.get("truncate", True):
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, dim - 1)
  if low == high:
    high += 0.001
  ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
  extrapolation = (1 - ramp).astype(np.float32)
  inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
  return inv_freq.astype(np.float32), float(attention_factor)


def rope_cos_sin(cfg: LingConfig, positions: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
  """cos, sin of shape [B, T, rope_dim / 2] for integer positions [B, T]."""
  inv_freq, factor = rope_frequencies(cfg)
  freqs = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
  return (jnp.cos(freqs) * factor).astype(dtype), (jnp.sin(freqs) * factor).astype(dtype)


def apply_rope_interleaved(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
  """Rotates interleaved pairs (x0, x1), (x2, x3), ...; output is [evens | odds].

  x: [B, T, H, R]; cos/sin: [B, T, R/2]. Queries and keys get the same output layout,
  so their dot products equal those of the interleaved rotation.
  """
  cos, sin = cos[:, :, None, :], sin[:, :, None, :]
  x1, x2 = x[..., 0::2], x[..., 1::2]
  return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


# ---- decode cache -------------------------------------------------------------


@flax.struct.dataclass
class MLACache:
  """Compressed KV cache of one MLA layer."""
  latent: jax.Array  # [B, S, kv_lora_rank], after kv_a_layernorm.
  rope_key: jax.Array  # [B, S, qk_rope_head_dim], after RoPE.

  @classmethod
  def zeros(cls, cfg: LingConfig, batch: int, max_len: int, dtype) -> "MLACache":
    return cls(latent=jnp.zeros((batch, max_len, cfg.kv_lora_rank), dtype),
               rope_key=jnp.zeros((batch, max_len, cfg.qk_rope_head_dim), dtype))


def _masked_softmax(scores: jax.Array, allowed: jax.Array, dtype) -> jax.Array:
  scores = jnp.where(allowed, scores.astype(jnp.float32), _NEG)
  return jax.nn.softmax(scores, axis=-1).astype(dtype)


# ---- the layer ----------------------------------------------------------------


class MultiHeadLatentAttention(nnx.Module):
  """MLA with interleaved RoPE and a sigmoid head-wise output gate."""

  def __init__(self, cfg: LingConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    pd = jnp.dtype(cfg.param_dtype)
    h, d = cfg.num_attention_heads, cfg.hidden_size
    if cfg.q_lora_rank is None:
      self.q_proj = Linear(d, h * cfg.qk_head_dim, ("embed", "heads"), rngs=rngs,
                           param_dtype=pd)
    else:
      self.q_a_proj = Linear(d, cfg.q_lora_rank, ("embed", "q_lora"), rngs=rngs,
                             use_bias=cfg.attention_bias, param_dtype=pd)
      self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, 1e-6, param_dtype=pd)
      self.q_b_proj = Linear(cfg.q_lora_rank, h * cfg.qk_head_dim, ("q_lora", "heads"),
                             rngs=rngs, param_dtype=pd)
    self.kv_a_proj_with_mqa = Linear(d, cfg.kv_lora_rank + cfg.qk_rope_head_dim,
                                     ("embed", "kv_lora"), rngs=rngs,
                                     use_bias=cfg.attention_bias, param_dtype=pd)
    self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, 1e-6, param_dtype=pd)
    self.kv_b_proj = Linear(cfg.kv_lora_rank, h * (cfg.qk_nope_head_dim + cfg.v_head_dim),
                            ("kv_lora", "heads"), rngs=rngs, param_dtype=pd)
    self.o_proj = Linear(h * cfg.v_head_dim, d, ("heads", "embed"), rngs=rngs,
                         use_bias=cfg.attention_bias, param_dtype=pd)
    self.g_proj = Linear(d, h, ("embed", "heads"), rngs=rngs, param_dtype=pd)

  def _project(self, x, cos, sin):
    """Queries [B,T,H,nope], [B,T,H,rope]; latent [B,T,C]; rotated key [B,T,rope]."""
    cfg = self.cfg
    b, t, _ = x.shape
    if cfg.q_lora_rank is None:
      q = self.q_proj(x)
    else:
      q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
    q = q.reshape(b, t, cfg.num_attention_heads, cfg.qk_head_dim)
    q = constrain(q, ("batch", "length", "act_heads", None))
    q_nope, q_rot = q[..., :cfg.qk_nope_head_dim], q[..., cfg.qk_nope_head_dim:]
    ckv = self.kv_a_proj_with_mqa(x)
    latent = self.kv_a_layernorm(ckv[..., :cfg.kv_lora_rank])
    k_rot = ckv[..., cfg.kv_lora_rank:][:, :, None, :]
    q_rot = apply_rope_interleaved(q_rot, cos, sin)
    k_rot = apply_rope_interleaved(k_rot, cos, sin)[:, :, 0, :]
    return q_nope, q_rot, latent, k_rot

  def _gate_and_project_out(self, x, o):
    b, t = x.shape[:2]
    gate = jax.nn.sigmoid(self.g_proj(x).astype(jnp.float32)).astype(o.dtype)
    o = o * gate[..., None]
    return self.o_proj(o.reshape(b, t, -1))

  def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array,
               attention_mask: jax.Array | None = None) -> jax.Array:
    """Full-sequence attention. x [B,T,D]; attention_mask [B,T] (1 = real token)."""
    cfg = self.cfg
    b, t, _ = x.shape
    h, nope = cfg.num_attention_heads, cfg.qk_nope_head_dim
    q_nope, q_rot, latent, k_rot = self._project(x, cos, sin)
    kv = self.kv_b_proj(latent).reshape(b, t, h, nope + cfg.v_head_dim)
    kv = constrain(kv, ("batch", "length", "act_heads", None))
    k_nope, v = kv[..., :nope], kv[..., nope:]
    block = cfg.attention_block_size
    if block and t > block:
      q = jnp.concatenate([q_nope, q_rot], axis=-1)
      k = jnp.concatenate(
          [k_nope, jnp.broadcast_to(k_rot[:, :, None, :], q_rot.shape).astype(k_nope.dtype)],
          axis=-1)
      key_mask = (jnp.ones((b, t), bool) if attention_mask is None
                  else attention_mask.astype(bool))
      o = flash_attention.causal_attention(q, k, v, key_mask, cfg.attention_scale, block)
      return self._gate_and_project_out(x, constrain(o, ("batch", "length", "act_heads", None)))
    scores = (jnp.einsum("bthd,bshd->bhts", q_nope, k_nope)
              + jnp.einsum("bthr,bsr->bhts", q_rot, k_rot)) * cfg.attention_scale
    allowed = jnp.tril(jnp.ones((t, t), bool))[None, None]
    if attention_mask is not None:
      allowed = allowed & attention_mask.astype(bool)[:, None, None, :]
    probs = _masked_softmax(scores, allowed, x.dtype)
    o = jnp.einsum("bhts,bshd->bthd", probs, v)
    return self._gate_and_project_out(x, o)

  def decode(self, x: jax.Array, cos: jax.Array, sin: jax.Array, cache: MLACache,
             index: jax.Array, slot_mask: jax.Array) -> tuple[jax.Array, MLACache]:
    """Attention over a latent cache.

    x [B,T,D] are the new tokens, written to slots [index, index + T); `slot_mask`
    [B,S] marks the slots holding real tokens (already including the new ones). More
    than `attention_block_size` new tokens (a group's responses over its prompt's
    cache, `rl.shared_prefix`) attend blockwise, as the full-sequence path does.
    """
    cfg = self.cfg
    b, t, _ = x.shape
    h, nope = cfg.num_attention_heads, cfg.qk_nope_head_dim
    q_nope, q_rot, latent, k_rot = self._project(x, cos, sin)
    latents = jax.lax.dynamic_update_slice(
      cache.latent, latent.astype(cache.latent.dtype), (0, index, 0))
    rope_keys = jax.lax.dynamic_update_slice(
      cache.rope_key, k_rot.astype(cache.rope_key.dtype), (0, index, 0))
    w = self.kv_b_proj.kernel[...].astype(x.dtype).reshape(
      cfg.kv_lora_rank, h, nope + cfg.v_head_dim)
    q_latent = jnp.einsum("bthn,chn->bthc", q_nope, w[..., :nope])
    block = cfg.attention_block_size
    if block and t > block:  # many new tokens (a prompt's responses): blockwise
      keys = jnp.concatenate([latents, rope_keys], axis=-1).astype(x.dtype)[:, :, None]
      keys = jnp.broadcast_to(keys, (b, keys.shape[1], h, keys.shape[-1]))
      values = jnp.broadcast_to(latents.astype(x.dtype)[:, :, None],
                                (b, latents.shape[1], h, latents.shape[-1]))
      o_latent = flash_attention.cached_causal_attention(
          jnp.concatenate([q_latent, q_rot], axis=-1), keys, values, slot_mask, index,
          cfg.attention_scale, block)
      o = jnp.einsum("bthc,chv->bthv", o_latent, w[..., nope:])
      return self._gate_and_project_out(x, o), MLACache(latents, rope_keys)
    scores = (jnp.einsum("bthc,bsc->bhts", q_latent, latents.astype(x.dtype))
              + jnp.einsum("bthr,bsr->bhts", q_rot, rope_keys.astype(x.dtype)))
    scores = scores * cfg.attention_scale
    slots = jnp.arange(latents.shape[1])
    causal = slots[None, :] <= (index + jnp.arange(t))[:, None]  # [T, S]
    allowed = causal[None, None] & slot_mask.astype(bool)[:, None, None, :]
    probs = _masked_softmax(scores, allowed, x.dtype)
    if t == 1:  # a decode step: see `llama.one_token_attention`
      o_latent = jnp.sum(probs[:, :, 0, :, None].astype(jnp.float32)
                         * latents.astype(jnp.float32)[:, None],
                         axis=2)[:, None].astype(x.dtype)  # [B, 1, H, C]
    else:
      o_latent = jnp.einsum("bhts,bsc->bthc", probs, latents.astype(x.dtype))
    o = jnp.einsum("bthc,chv->bthv", o_latent, w[..., nope:])
    return self._gate_and_project_out(x, o), MLACache(latents, rope_keys)
