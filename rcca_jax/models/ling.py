"""`LingForCausalLM`: the Ling-3 hybrid KDA/MLA mixture-of-experts language model.

The decoder stack is split by `LingConfig.layer_schedule()` into unrolled leading
layers and repeated groups of identical layers whose parameters are stacked and run
with `jax.lax.scan`, so compile time does not grow with depth.

Calling conventions:
  model(ids)                                 -> logits [B, T, V]
  model(ids, return_aux=True)                -> (logits, aux)
  model(ids, cache=cache)                    -> (logits, new_cache)
  model(ids, cache=cache, return_aux=True)   -> (logits, new_cache, aux)
With `return_hidden=True` the final normed hidden states [B, T, D] take the place of
the logits (`project_logits` maps them to logits, e.g. a chunk at a time).
`attention_mask` [B, T] (1 = real token) supports left padding; RoPE positions then
count real tokens only (as transformers' generate does). `aux["expert_counts"]`
[num_hidden_layers, E] holds the tokens routed to each expert (zeros for dense layers).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models import hf_checkpoint, safetensors_io
from rcca_jax.models.config import DENSE, FULL_ATTENTION, LingConfig
from rcca_jax.models.layers import MLP, Embed, Linear, RMSNorm
from rcca_jax.models.mla import MLACache, MultiHeadLatentAttention, rope_cos_sin
from rcca_jax.models.moe import MoE
from rcca_jax.parallel.partitioning import LOGICAL_AXES, constrain


def _kda_module():
  from rcca_jax.models import kda  # pylint: disable=import-outside-toplevel
  return kda


@flax.struct.dataclass
class Context:
  """Per-forward inputs shared by all layers."""
  cos: jax.Array
  sin: jax.Array
  token_mask: jax.Array | None  # [B, T] new-token validity.
  index: jax.Array | None = None  # First cache slot of the new tokens.
  slot_mask: jax.Array | None = None  # [B, S] valid cache slots (incl. new tokens).


@flax.struct.dataclass
class LingCache:
  """Decoding state of the whole stack.

  `prefix[i]` is the state of unrolled layer i; `groups[j]` that of position j within
  the repeated group, stacked over groups on a leading axis. MLA layers hold an
  `MLACache` (compressed latent + rotated rope key); KDA layers their `KDAState`.
  """
  index: jax.Array  # [] int32: next free slot.
  slot_mask: jax.Array  # [B, S] bool: slots holding real tokens.
  positions: jax.Array  # [B] int32: RoPE position of each row's next real token.
  prefix: tuple[Any, ...]
  groups: tuple[Any, ...]


class DecoderLayer(nnx.Module):
  """Pre-norm block: attention (MLA or KDA) then MLP (dense or MoE)."""

  def __init__(self, cfg: LingConfig, attn_type: str, mlp_type: str, *, rngs: nnx.Rngs):
    pd = jnp.dtype(cfg.param_dtype)
    self.is_mla = attn_type == FULL_ATTENTION
    self.is_moe = mlp_type != DENSE
    self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, param_dtype=pd)
    self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps,
                                            param_dtype=pd)
    if self.is_mla:
      self.self_attn = MultiHeadLatentAttention(cfg, rngs=rngs)
    else:
      self.self_attn = _kda_module().KimiDeltaAttention.from_config(cfg, rngs=rngs)
    if self.is_moe:
      self.mlp = MoE(cfg, rngs=rngs)
    else:
      self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size, rngs=rngs, param_dtype=pd)
    self.num_experts = cfg.num_local_experts

  def init_state(self, cfg: LingConfig, batch: int, max_len: int, dtype):
    if self.is_mla:
      return MLACache.zeros(cfg, batch, max_len, dtype)
    return self.self_attn.init_state(batch)

  def __call__(self, x: jax.Array, ctx: Context, state=None):
    h = self.input_layernorm(x)
    if self.is_mla:
      if state is None:
        h = self.self_attn(h, ctx.cos, ctx.sin, ctx.token_mask)
      else:
        h, state = self.self_attn.decode(h, ctx.cos, ctx.sin, state, ctx.index,
                                         ctx.slot_mask)
    elif state is None:
      h = self.self_attn(h, attention_mask=ctx.token_mask)
    else:
      h, state = self.self_attn(h, attention_mask=ctx.token_mask, state=state,
                                return_state=True)
    x = constrain(x + h, ("batch", "length", "act_embed"))
    h = self.post_attention_layernorm(x)
    if self.is_moe:
      h, counts = self.mlp(h, ctx.token_mask)
    else:
      h, counts = self.mlp(h), jnp.zeros((self.num_experts,), jnp.int32)
    x = constrain(x + h, ("batch", "length", "act_embed"))
    return x, counts, state


def _run_layer(layer: DecoderLayer, x: jax.Array, ctx: Context, state, remat: bool):
  """One decoder layer; with `remat` its activations are recomputed in the backward
  pass, so only the layer's input stays alive between the passes."""
  if not remat:
    return layer(x, ctx, state)
  graphdef, params = nnx.split(layer)

  @jax.checkpoint
  def run(params, x, state):
    return nnx.merge(graphdef, params)(x, ctx, state)

  return run(params, x, state)


class LayerGroup(nnx.Module):
  """One period of the repeated layer pattern."""

  def __init__(self, cfg: LingConfig, first: int, period: int, *, rngs: nnx.Rngs):
    self.remat = cfg.remat
    self.layers = nnx.List([DecoderLayer(cfg, *cfg.layer_kind(first + j), rngs=rngs)
                            for j in range(period)])

  def __call__(self, x, ctx, states):
    counts, new_states = [], []
    for layer, state in zip(self.layers, states):
      x, c, s = _run_layer(layer, x, ctx, state, self.remat)
      counts.append(c)
      new_states.append(s)
    return x, jnp.stack(counts), tuple(new_states)


def _stack_groups(cfg: LingConfig, first: int, period: int, num: int,
                  rngs: nnx.Rngs) -> LayerGroup:
  """`num` LayerGroups with parameters stacked on a leading "layers" axis."""
  keys = jax.random.split(rngs.params(), num)

  @nnx.vmap(in_axes=0, out_axes=0)
  def make(key):
    return LayerGroup(cfg, first, period, rngs=nnx.Rngs(params=key))

  groups = make(keys)
  for _, var in nnx.iter_graph(groups):
    if isinstance(var, nnx.Variable) and var.get_metadata(LOGICAL_AXES, None) is not None:
      var.set_metadata(**{LOGICAL_AXES: ("layers",) + tuple(var.get_metadata(LOGICAL_AXES))})
  return groups


class LingForCausalLM(nnx.Module):
  """Hybrid linear-attention MoE causal LM (transformers' `bailing_hybrid`)."""

  def __init__(self, cfg: LingConfig, *, rngs: nnx.Rngs):
    self.config = cfg
    pd = jnp.dtype(cfg.param_dtype)
    self.num_prefix, self.period, self.num_groups = cfg.layer_schedule()
    self.embed_tokens = Embed(cfg.vocab_size, cfg.hidden_size, rngs=rngs, param_dtype=pd)
    self.layers = nnx.List([DecoderLayer(cfg, *cfg.layer_kind(i), rngs=rngs)
                            for i in range(self.num_prefix)])
    self.groups = (_stack_groups(cfg, self.num_prefix, self.period, self.num_groups, rngs)
                   if self.num_groups else None)
    self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, param_dtype=pd)
    self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size, ("embed", "vocab"), rngs=rngs,
                          param_dtype=pd)

  # ---- layer bookkeeping ------------------------------------------------------

  def layer_location(self, idx: int) -> tuple[int | None, int]:
    """(group index or None, position): where decoder layer `idx` lives."""
    if idx < self.num_prefix:
      return None, idx
    return divmod(idx - self.num_prefix, self.period)

  # ---- cache ------------------------------------------------------------------

  def init_cache(self, batch: int, max_len: int, dtype=None) -> LingCache:
    """Empty decoding state for `batch` rows and up to `max_len` tokens."""
    cfg = self.config
    dtype = jnp.dtype(dtype or cfg.dtype)
    prefix = tuple(layer.init_state(cfg, batch, max_len, dtype) for layer in self.layers)
    groups = ()
    if self.groups is not None:
      groups = tuple(
        jax.tree.map(lambda a: jnp.broadcast_to(a, (self.num_groups,) + a.shape),
                     DecoderLayer.init_state(layer, cfg, batch, max_len, dtype))
        for layer in self.groups.layers)
    return LingCache(index=jnp.zeros((), jnp.int32),
                     slot_mask=jnp.zeros((batch, max_len), bool),
                     positions=jnp.zeros((batch,), jnp.int32), prefix=prefix, groups=groups)

  # ---- forward ----------------------------------------------------------------

  def __call__(self, input_ids: jax.Array, *, attention_mask: jax.Array | None = None,
               cache: LingCache | None = None, return_aux: bool = False,
               return_hidden: bool = False):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    b, t = input_ids.shape
    x = self.embed_tokens(input_ids, dtype)
    x = constrain(x, ("batch", "length", "act_embed"))
    mask = None if attention_mask is None else attention_mask.astype(bool)
    if cache is None:
      if mask is None:
        positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
      else:
        positions = jnp.where(mask, jnp.cumsum(mask, axis=1, dtype=jnp.int32) - 1, 0)
      cos, sin = rope_cos_sin(cfg, positions, dtype)
      ctx = Context(cos, sin, mask)
    else:
      if mask is None:
        mask = jnp.ones((b, t), bool)
      steps = jnp.cumsum(mask, axis=1, dtype=jnp.int32)
      positions = jnp.where(mask, cache.positions[:, None] + steps - 1, 0)
      slot_mask = jax.lax.dynamic_update_slice(cache.slot_mask, mask, (0, cache.index))
      cos, sin = rope_cos_sin(cfg, positions, dtype)
      ctx = Context(cos, sin, mask, cache.index, slot_mask)

    counts, prefix_states = [], []
    for i, layer in enumerate(self.layers):
      state = None if cache is None else cache.prefix[i]
      x, c, state = _run_layer(layer, x, ctx, state, cfg.remat)
      counts.append(c[None])
      prefix_states.append(state)

    group_states = ()
    if self.groups is not None:
      graphdef, params = nnx.split(self.groups)
      states = ((None,) * self.period) if cache is None else cache.groups

      def body(x, xs):
        group_params, group_states = xs
        x, c, new_states = nnx.merge(graphdef, group_params)(x, ctx, group_states)
        return x, (c, new_states)

      # Each layer inside the body is rematerialised (LayerGroup), so the scan keeps
      # one [B, T, D] input per layer for the backward pass.
      x, (c, group_states) = jax.lax.scan(body, x, (params, states))
      counts.append(c.reshape(-1, c.shape[-1]))

    x = self.norm(x)
    outputs = [x if return_hidden else self.project_logits(x)]
    if cache is not None:
      outputs.append(LingCache(index=cache.index + t, slot_mask=ctx.slot_mask,
                               positions=cache.positions + mask.sum(1, dtype=jnp.int32),
                               prefix=tuple(prefix_states), groups=tuple(group_states)))
    if return_aux:
      outputs.append({"expert_counts": jnp.concatenate(counts, axis=0)})
    return outputs[0] if len(outputs) == 1 else tuple(outputs)

  def project_logits(self, hidden: jax.Array) -> jax.Array:
    """Logits [B, T, V] of final (normed) hidden states [B, T, D]."""
    return constrain(self.lm_head(hidden), ("batch", "length", "act_vocab"))

  # ---- router balancing -------------------------------------------------------

  def update_correction_bias(self, expert_counts: jax.Array, rate: float) -> None:
    """Aux-loss-free balancing: bias += rate * sign(mean load - load), per MoE layer.

    `expert_counts` is `aux["expert_counts"]` [num_hidden_layers, E] (summed over steps).
    """
    def step(bias, counts):
      counts = counts.astype(jnp.float32)
      return bias + rate * jnp.sign(counts.mean(-1, keepdims=True) - counts)

    for i, layer in enumerate(self.layers):
      if layer.is_moe:
        layer.mlp.correction_bias[...] = step(layer.mlp.correction_bias[...],
                                              expert_counts[i])
    if self.groups is not None:
      for j, layer in enumerate(self.groups.layers):
        if layer.is_moe:
          rows = expert_counts[self.num_prefix + j::self.period]
          layer.mlp.correction_bias[...] = step(layer.mlp.correction_bias[...], rows)

  # ---- checkpoints ------------------------------------------------------------

  @classmethod
  def from_hf(cls, path: str, dtype=jnp.float32, **config_overrides) -> "LingForCausalLM":
    """Loads a `bailing_hybrid` checkpoint directory (config.json + safetensors).

    `dtype` sets the parameter and compute dtype (router and KDA gate parameters stay
    float32). Extra keyword arguments override LingConfig fields (e.g. remat=True).
    """
    name = jnp.dtype(dtype).name
    hf_config = safetensors_io.read_config(path)
    cfg = LingConfig.from_hf_config(hf_config, dtype=name, param_dtype=name,
                                    **config_overrides)
    model = nnx.eval_shape(lambda: cls(cfg, rngs=nnx.Rngs(0)))
    tensors = hf_checkpoint.read_tensors(path)
    hf_checkpoint.load_hf_tensors(model, tensors, source=path)
    return model

  def to_hf(self, path: str) -> None:
    """Writes config.json + model.safetensors that transformers can load."""
    hf_checkpoint.write_hf(self, path)
