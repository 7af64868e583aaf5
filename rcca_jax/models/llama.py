"""`LlamaForCausalLM`: a dense GQA decoder (transformers' `llama`, `qwen2`, `mistral`).

Same calling conventions as `LingForCausalLM`, so the sampler, the trainer and the
plan use either:
  model(ids)                                 -> logits [B, T, V]
  model(ids, return_aux=True)                -> (logits, {})
  model(ids, cache=cache)                    -> (logits, new_cache)
  model(ids, cache=cache, return_aux=True)   -> (logits, new_cache, {})
With `return_hidden=True` the final normed hidden states replace the logits
(`project_logits` maps them). `attention_mask` [B, T] (1 = real token) supports left
padding; RoPE positions then count real tokens only. It may also hold segment ids
(0 = padding, 1, 2, ... increasing along a row): several sequences packed in one row,
each attending only to itself with positions from 0 (`segment_positions`; SFT packing,
`data.batching.sft_batch`). The decoder layers are identical,
so their parameters are stacked on a leading "layers" axis and run with `lax.scan`;
cached calls unroll them, each writing into its own layer's cache in place, and may take
the layers' parameters already sliced out of the stack (`split_layers`), so that a
decode loop does not copy every layer's weights at every token (docs/model.md).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.models import flash_attention
from rcca_jax.models.kda_ops import causal_conv1d
from rcca_jax.models.layers import MLP, Embed, Linear, RMSNorm, weight_product
from rcca_jax.models.llama_config import LlamaConfig, default_inv_freq, static_inv_freq
from rcca_jax.parallel.partitioning import LOGICAL_AXES, constrain, param

_NEG = float(np.finfo(np.float32).min)


# ---- rotary embedding ---------------------------------------------------------


def rope_cos_sin(cfg: LlamaConfig, positions: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
  """cos, sin [B, T, head_dim / 2] for integer positions [B, T].

  "dynamic" (NTK) RoPE raises the base once the longest position of the call passes
  max_position_embeddings, as transformers does per forward call.
  """
  if cfg.rope_type == "dynamic":
    dim, factor, limit = cfg.head_dim, cfg.rope_parameters["factor"], cfg.max_position_embeddings
    seq_len = jnp.maximum(jnp.max(positions) + 1, limit).astype(jnp.float32)
    base = cfg.rope_theta * ((factor * seq_len / limit) - (factor - 1)) ** (dim / (dim - 2))
    exponents = jnp.asarray(np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim))
    inv_freq = jnp.where(seq_len > limit, 1.0 / base ** exponents,
                         jnp.asarray(default_inv_freq(dim, cfg.rope_theta)))
  else:
    inv_freq = jnp.asarray(static_inv_freq(cfg))
  freqs = positions.astype(jnp.float32)[..., None] * inv_freq
  return jnp.cos(freqs).astype(dtype), jnp.sin(freqs).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
  """Half-split ("rotate_half") rotation of x [B, T, H, D] by cos/sin [B, T, D/2]."""
  cos, sin = cos[:, :, None, :], sin[:, :, None, :]
  x1, x2 = jnp.split(x, 2, axis=-1)
  return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


# ---- attention ------------------------------------------------------------------


@flax.struct.dataclass
class KVCache:
  """Rotated keys and values of one layer: [B, kv_heads, S, head_dim] each, the layout
  the decode step's attention reads without transposing the whole cache; with
  `canon_kernel`, `canon` [B, canon_kernel - 1, hidden] holds the last attention inputs
  (oldest first) the canon convolution reads next."""
  keys: jax.Array
  values: jax.Array
  canon: jax.Array | None = None

  @classmethod
  def zeros(cls, cfg: LlamaConfig, batch: int, max_len: int, dtype) -> "KVCache":
    shape = (batch, cfg.num_key_value_heads, max_len, cfg.head_dim)
    canon = (jnp.zeros((batch, cfg.canon_kernel - 1, cfg.hidden_size), dtype)
             if cfg.canon_kernel else None)
    return cls(keys=jnp.zeros(shape, dtype), values=jnp.zeros(shape, dtype), canon=canon)


@flax.struct.dataclass
class LlamaCache:
  """Decoding state of the stack (field names as `LingCache`'s, which the sampler
  shards): `prefix[i]` is layer i's `KVCache`, a buffer of its own (a slice of one
  stacked buffer would be copied out at every read)."""
  index: jax.Array  # [] int32: next free slot.
  slot_mask: jax.Array  # [B, S] bool: slots holding real tokens.
  positions: jax.Array  # [B] int32: RoPE position of each row's next real token.
  prefix: tuple  # One KVCache per layer.
  groups: tuple  # Always empty (no stacked layer states).


def grouped_attention(q: jax.Array, k: jax.Array, v: jax.Array, allowed: jax.Array,
                      scale: float, kv_layout: str = "bskd") -> jax.Array:
  """softmax(q k^T * scale) v with query head h reading key/value head h // G.

  q [B, T, H, D]; k, v [B, S, K, D], or [B, K, S, D] with `kv_layout="bksd"` (the
  cache's layout, read as stored); allowed [B or 1, T, S] bool. Returns [B, T, H, D].
  """
  b, t, h, d = q.shape
  kv = k.shape[kv_layout.index("k")]
  q = q.reshape(b, t, kv, h // kv, d)
  scores = jnp.einsum(f"btkgd,{kv_layout}->bkgts", q, k,
                      preferred_element_type=jnp.float32) * scale
  scores = jnp.where(allowed[:, None, None], scores, _NEG)
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  return jnp.einsum(f"bkgts,{kv_layout}->btkgd", probs, v).reshape(b, t, h, d)


def one_token_attention(q: jax.Array, keys: jax.Array, values: jax.Array,
                        allowed: jax.Array, scale: float) -> jax.Array:
  """`grouped_attention` of one new token per row over the cache: q [B, 1, H, D];
  keys, values [B, K, S, D] (the cache's layout); allowed [B, S] bool.

  The products are written as broadcast multiplies summed over D and S, which XLA's
  CPU backend fuses into loops over the cache as stored; the equivalent einsum
  lowers to a batched dot of [S, D] x [D, G] shapes that took 3.7x as long
  (SmolLM2, 16 rows, 256 slots). Equal to `grouped_attention` within float32
  rounding (the sums run in another order). Products and sums in float32, as the
  einsum's `preferred_element_type` and accumulation give them."""
  b, _, h, d = q.shape
  kv = keys.shape[1]
  f32 = jnp.float32
  q = q.reshape(b, kv, h // kv, 1, d).astype(f32)
  scores = jnp.sum(q * keys.astype(f32)[:, :, None], axis=-1) * scale  # [B, K, G, S]
  scores = jnp.where(allowed[:, None, None], scores, _NEG)
  probs = jax.nn.softmax(scores, axis=-1)
  o = jnp.sum(probs[..., None] * values.astype(f32)[:, :, None], axis=-2)  # [B, K, G, D]
  return o.astype(values.dtype).reshape(b, 1, h, d)


class Attention(nnx.Module):
  """Grouped-query attention with RoPE and optional q/k/v (and output) biases."""

  def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    pd = jnp.dtype(cfg.param_dtype)
    d, hd = cfg.hidden_size, cfg.head_dim
    self.q_proj = Linear(d, cfg.num_attention_heads * hd, ("embed", "heads"), rngs=rngs,
                         use_bias=cfg.qkv_bias, param_dtype=pd)
    self.k_proj = Linear(d, cfg.num_key_value_heads * hd, ("embed", "heads"), rngs=rngs,
                         use_bias=cfg.qkv_bias, param_dtype=pd)
    self.v_proj = Linear(d, cfg.num_key_value_heads * hd, ("embed", "heads"), rngs=rngs,
                         use_bias=cfg.qkv_bias, param_dtype=pd)
    self.o_proj = Linear(cfg.num_attention_heads * hd, d, ("heads", "embed"), rngs=rngs,
                         use_bias=cfg.o_bias, param_dtype=pd)

  def _qkv(self, x, cos, sin):
    cfg = self.cfg
    b, t, _ = x.shape
    q = self.q_proj(x).reshape(b, t, cfg.num_attention_heads, cfg.head_dim)
    k = self.k_proj(x).reshape(b, t, cfg.num_key_value_heads, cfg.head_dim)
    v = self.v_proj(x).reshape(b, t, cfg.num_key_value_heads, cfg.head_dim)
    q = constrain(q, ("batch", "length", "act_heads", None))
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

  def _out(self, o: jax.Array) -> jax.Array:
    b, t = o.shape[:2]
    return self.o_proj(o.reshape(b, t, -1))

  def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array,
               attention_mask: jax.Array | None = None) -> jax.Array:
    """Full-sequence causal attention; attention_mask [B, T] (1 = real token)."""
    cfg = self.cfg
    b, t, _ = x.shape
    q, k, v = self._qkv(x, cos, sin)
    scale = cfg.head_dim ** -0.5
    key_mask = (jnp.ones((b, t), bool) if attention_mask is None
                else attention_mask.astype(bool))
    block = cfg.attention_block_size
    if block and t > block:  # one segment per row (config_check refuses SFT packing)
      g = cfg.num_groups
      k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
      o = flash_attention.causal_attention(q, k, v, key_mask, scale, block)
    else:
      keys = (key_mask[:, None, :] if attention_mask is None
              else same_segment(attention_mask))
      allowed = jnp.tril(jnp.ones((t, t), bool))[None] & keys
      o = grouped_attention(q, k, v, allowed, scale)
    return self._out(constrain(o, ("batch", "length", "act_heads", None)))

  def decode(self, x: jax.Array, cos: jax.Array, sin: jax.Array, cache: KVCache,
             index: jax.Array, slot_mask: jax.Array) -> tuple[jax.Array, KVCache]:
    """Attention of new tokens x [B, T, D] over this layer's `cache` ([B, K, S, D]
    keys and values); the new ones are written into it in place at slots [index,
    index + T). `slot_mask` [B, S] marks real slots, the new ones included. More than
    `attention_block_size` new tokens (a group's responses over its prompt's cache,
    `rl.shared_prefix`) attend blockwise, as the full-sequence path does."""
    t = x.shape[1]
    q, k, v = self._qkv(x, cos, sin)
    at = (0, 0, index, 0)
    keys = jax.lax.dynamic_update_slice(
        cache.keys, k.transpose(0, 2, 1, 3).astype(cache.keys.dtype), at)
    values = jax.lax.dynamic_update_slice(
        cache.values, v.transpose(0, 2, 1, 3).astype(cache.values.dtype), at)
    block = self.cfg.attention_block_size
    scale = self.cfg.head_dim ** -0.5
    if block and t > block:
      g = self.cfg.num_groups
      k, v = (jnp.repeat(c.transpose(0, 2, 1, 3).astype(q.dtype), g, axis=2)
              for c in (keys, values))
      o = flash_attention.cached_causal_attention(q, k, v, slot_mask, index, scale, block)
    else:
      slots = jnp.arange(keys.shape[2])
      causal = slots[None, :] <= (index + jnp.arange(t))[:, None]  # [T, S]
      allowed = causal[None] & slot_mask.astype(bool)[:, None, :]
      k, v = keys.astype(q.dtype), values.astype(q.dtype)
      o = (one_token_attention(q, k, v, allowed[:, 0], scale) if t == 1  # a decode step
           else grouped_attention(q, k, v, allowed, scale, kv_layout="bksd"))
    return self._out(o), cache.replace(keys=keys, values=values)


def segment_positions(segments: jax.Array) -> jax.Array:
  """RoPE positions [B, T] of `attention_mask` values: within each segment (ids
  increasing along a row, 0 = padding) the count of its real tokens before; a 0/1 mask
  (one segment, padding anywhere) gives cumsum(mask) - 1 at real tokens, 0 elsewhere."""
  segments = segments.astype(jnp.int32)
  real = segments > 0
  count = jnp.cumsum(real, axis=1, dtype=jnp.int32) - 1
  seen = jnp.pad(jax.lax.cummax(segments, axis=1)[:, :-1], ((0, 0), (1, 0)))
  start = jax.lax.cummax(jnp.where(segments > seen, count, 0), axis=1)
  return jnp.where(real, count - start, 0)


def same_segment(segments: jax.Array) -> jax.Array:
  """[B, T, T] bool: query t may see key s of its own segment (padding queries, which
  no loss reads, see every real key as before)."""
  segments = segments.astype(jnp.int32)
  return ((segments[:, :, None] == segments[:, None, :])
          | (segments[:, :, None] == 0)) & (segments[:, None, :] > 0)


def canon_mix(h: jax.Array, weight: jax.Array, segments: jax.Array | None) -> jax.Array:
  """The canon convolution of attention inputs h [B, T, D]: at each position t,
  sum_j weight[-1 - j] * h[t - j] over j < K (`weight` [K, D]) and the positions t - j of
  t's own segment (`segments`: `attention_mask`, 0/1 or segment ids; None: one segment),
  in float32, summed oldest first as the decode path's `causal_conv1d` sums them (so
  the two give the same values)."""
  width, t = weight.shape[0], h.shape[1]
  h32, w32 = h.astype(jnp.float32), weight.astype(jnp.float32)
  seg = None if segments is None else segments.astype(jnp.int32)

  def back(j: int) -> jax.Array:  # h[t - j], 0 outside t's segment
    if j == 0:
      return h32
    prev = jnp.pad(h32, ((0, 0), (j, 0), (0, 0)))[:, :t]
    if seg is None:
      return prev
    prev_seg = jnp.pad(seg, ((0, 0), (j, 0)))[:, :t]
    return jnp.where(((prev_seg == seg) & (prev_seg > 0))[..., None], prev, 0.0)

  return sum(back(width - 1 - i) * w32[i] for i in range(width))


# ---- the stack ------------------------------------------------------------------


class DecoderLayer(nnx.Module):
  """Pre-norm block: attention then SwiGLU MLP, each with a residual. With
  `canon_kernel` K > 0 the attention input first gains a causal depthwise convolution
  of the last K inputs (`canon_mix`; a "canon layer", Allen-Zhu 2025, zero at
  initialization, so a Llama checkpoint loads into it unchanged)."""

  def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
    pd = jnp.dtype(cfg.param_dtype)
    self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, param_dtype=pd)
    self.canon = (param(jnp.zeros((cfg.canon_kernel, cfg.hidden_size), pd),
                        ("conv", "embed")) if cfg.canon_kernel else None)
    self.self_attn = Attention(cfg, rngs=rngs)
    self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps,
                                            param_dtype=pd)
    self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size, rngs=rngs, param_dtype=pd)

  def __call__(self, x, cos, sin, mask, state=None, index=None, slot_mask=None):
    """`state`: None (no cache), or this layer's `KVCache`."""
    h = self.input_layernorm(x)
    if state is None:
      if self.canon is not None:
        h = h + canon_mix(h, self.canon[...], mask).astype(h.dtype)
      h = self.self_attn(h, cos, sin, mask)
    else:
      if self.canon is not None:
        y, buffer = causal_conv1d(h, self.canon[...], state.canon, mask)
        h = h + y.astype(h.dtype)
        state = state.replace(canon=buffer.astype(state.canon.dtype))
      h, state = self.self_attn.decode(h, cos, sin, state, index, slot_mask)
    x = constrain(x + h, ("batch", "length", "act_embed"))
    x = constrain(x + self.mlp(self.post_attention_layernorm(x)),
                  ("batch", "length", "act_embed"))
    return x, state


def _stacked_layers(cfg: LlamaConfig, rngs: nnx.Rngs) -> DecoderLayer:
  """num_hidden_layers DecoderLayers with parameters stacked on a "layers" axis."""
  keys = jax.random.split(rngs.params(), cfg.num_hidden_layers)

  @nnx.vmap(in_axes=0, out_axes=0)
  def make(key):
    return DecoderLayer(cfg, rngs=nnx.Rngs(params=key))

  layers = make(keys)
  for _, var in nnx.iter_graph(layers):
    if isinstance(var, nnx.Variable) and var.get_metadata(LOGICAL_AXES, None) is not None:
      var.set_metadata(**{LOGICAL_AXES: ("layers",) + tuple(var.get_metadata(LOGICAL_AXES))})
  return layers


class LlamaForCausalLM(nnx.Module):
  """Dense causal LM of the Llama family; see the module docstring."""

  def __init__(self, cfg: LlamaConfig, *, rngs: nnx.Rngs):
    self.config = cfg
    pd = jnp.dtype(cfg.param_dtype)
    self.embed_tokens = Embed(cfg.vocab_size, cfg.hidden_size, rngs=rngs, param_dtype=pd)
    self.layers = _stacked_layers(cfg, rngs)
    self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, param_dtype=pd)
    self.lm_head = (None if cfg.tie_word_embeddings else
                    Linear(cfg.hidden_size, cfg.vocab_size, ("embed", "vocab"), rngs=rngs,
                           param_dtype=pd))

  def init_cache(self, batch: int, max_len: int, dtype=None) -> LlamaCache:
    """Empty decoding state for `batch` rows and up to `max_len` tokens."""
    cfg = self.config
    dtype = jnp.dtype(dtype or cfg.dtype)
    return LlamaCache(index=jnp.zeros((), jnp.int32),
                      slot_mask=jnp.zeros((batch, max_len), bool),
                      positions=jnp.zeros((batch,), jnp.int32),
                      prefix=tuple(KVCache.zeros(cfg, batch, max_len, dtype)
                                   for _ in range(cfg.num_hidden_layers)), groups=())

  def split_layers(self) -> tuple:
    """Each layer's state sliced out of the stack, for `layers=` of cached calls: a
    decode loop takes them once instead of slicing (copying) every weight matrix at
    every token."""
    _, state = nnx.split(self.layers)
    return tuple(jax.tree.map(lambda a, i=i: a[i], state)
                 for i in range(self.config.num_hidden_layers))

  def __call__(self, input_ids: jax.Array, *, attention_mask: jax.Array | None = None,
               cache: LlamaCache | None = None, return_aux: bool = False,
               return_hidden: bool = False, layers: tuple | None = None):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    b, t = input_ids.shape
    x = constrain(self.embed_tokens(input_ids, dtype), ("batch", "length", "act_embed"))
    mask = None if attention_mask is None else attention_mask.astype(bool)
    index = slot_mask = None
    if cache is None:
      if mask is None:
        positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
      else:
        positions = segment_positions(attention_mask)
    else:
      if mask is None:
        mask = jnp.ones((b, t), bool)
      steps = jnp.cumsum(mask, axis=1, dtype=jnp.int32)
      positions = jnp.where(mask, cache.positions[:, None] + steps - 1, 0)
      index = cache.index
      slot_mask = jax.lax.dynamic_update_slice(cache.slot_mask, mask, (0, index))
    cos, sin = rope_cos_sin(cfg, positions, dtype)

    graphdef, params = nnx.split(self.layers)
    if cache is None:
      def layer(params, x):
        return nnx.merge(graphdef, params)(x, cos, sin, attention_mask)[0]

      if cfg.remat:
        layer = jax.checkpoint(layer)
      x, _ = jax.lax.scan(lambda x, p: (layer(p, x), None), x, params)
    else:
      # Decoding: the layers unrolled, each writing its new keys and values into its
      # own cache in place (a scan would slice out and copy back every layer's whole
      # cache at every token); `layers`: their parameters sliced beforehand.
      states = []
      for i in range(cfg.num_hidden_layers):
        if layers is None:
          layer = nnx.merge(graphdef, jax.tree.map(lambda a, i=i: a[i], params))
        else:
          layer = nnx.merge(graphdef, layers[i])
        x, state = layer(x, cos, sin, mask, cache.prefix[i], index, slot_mask)
        states.append(state)
    x = self.norm(x)
    outputs = [x if return_hidden else self.project_logits(x)]
    if cache is not None:
      outputs.append(LlamaCache(index=cache.index + t, slot_mask=slot_mask,
                                positions=cache.positions + mask.sum(1, dtype=jnp.int32),
                                prefix=tuple(states), groups=()))
    if return_aux:
      outputs.append({})
    return outputs[0] if len(outputs) == 1 else tuple(outputs)

  def project_logits(self, hidden: jax.Array) -> jax.Array:
    """Logits [B, T, V] of final (normed) hidden states [B, T, D]."""
    if self.lm_head is None:
      logits = weight_product(hidden, self.embed_tokens.embedding[...], "btd,vd->btv")
    else:
      logits = self.lm_head(hidden)
    return constrain(logits, ("batch", "length", "act_vocab"))
