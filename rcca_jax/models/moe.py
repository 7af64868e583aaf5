"""Mixture of experts: group-limited sigmoid router, routed SwiGLU experts, shared expert.

Router (float32): scores = sigmoid(x W); the selection adds a per-expert correction bias
(aux-loss-free balancing; it never enters the weights), keeps the `topk_group` groups
with the largest sum of their top-2 biased scores, then the top-k experts; weights are
the unbiased scores of the chosen experts, renormalised, times `routed_scaling_factor`.

Experts run through `jax.lax.ragged_dot` on assignments sorted by expert ("ragged"),
through per-batch-shard expert slots of fixed capacity with an all-to-all to the expert
shards ("grouped", for large meshes; may drop assignments past capacity), or through a
dense one-hot path (every expert on every token) for tiny configs ("dense").
"""

from __future__ import annotations

import functools
import math

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import MLP, checkpointed_chunks, normal
from rcca_jax.parallel.partitioning import batch_local, constrain, param, shard_count


@flax.struct.dataclass
class Routing:
  weights: jax.Array  # [N, K] float32 combine weights.
  experts: jax.Array  # [N, K] int32 chosen experts.
  logits: jax.Array  # [N, E] float32 router logits.


def route(x: jax.Array, router_weight: jax.Array, correction_bias: jax.Array, *,
          top_k: int, n_group: int, topk_group: int, renormalize: bool,
          scaling: float) -> Routing:
  """Group-limited top-k routing. x [N, D]; router_weight [D, E]; bias [E]."""
  logits = jnp.dot(x.astype(jnp.float32), router_weight.astype(jnp.float32),
                   precision=jax.lax.Precision.HIGHEST)
  scores = jax.nn.sigmoid(logits)
  biased = scores + correction_bias.astype(jnp.float32)
  n, e = biased.shape
  if n_group > 1 and topk_group < n_group:
    grouped = biased.reshape(n, n_group, e // n_group)
    group_scores = jax.lax.top_k(grouped, 2)[0].sum(-1)  # [N, G]
    _, keep = jax.lax.top_k(group_scores, topk_group)
    group_mask = jnp.zeros((n, n_group), bool).at[jnp.arange(n)[:, None], keep].set(True)
    expert_mask = jnp.repeat(group_mask, e // n_group, axis=1)
    biased = jnp.where(expert_mask, biased, -jnp.inf)
  _, experts = jax.lax.top_k(biased, top_k)
  weights = jnp.take_along_axis(scores, experts, axis=1)
  if renormalize:
    weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
  return Routing(weights * scaling, experts.astype(jnp.int32), logits)


def experts_ragged(x: jax.Array, routing: Routing, w_gate: jax.Array, w_up: jax.Array,
                   w_down: jax.Array) -> jax.Array:
  """Routed SwiGLU experts via ragged_dot. x [N, D]; w_gate/w_up [E, D, I]; w_down [E, I, D]."""
  n, k = routing.experts.shape
  e = w_gate.shape[0]
  flat = routing.experts.reshape(-1)
  order = jnp.argsort(flat, stable=True)
  token = order // k
  group_sizes = jnp.bincount(flat, length=e).astype(jnp.int32)
  xs = jnp.take(x, token, axis=0)
  f32 = jnp.float32  # Accumulate in float32 whatever the compute dtype.
  gate = jax.lax.ragged_dot(xs, w_gate, group_sizes, preferred_element_type=f32)
  up = jax.lax.ragged_dot(xs, w_up, group_sizes, preferred_element_type=f32)
  h = (jax.nn.silu(gate) * up).astype(x.dtype)
  y = jax.lax.ragged_dot(h, w_down, group_sizes, preferred_element_type=f32)
  y = y * routing.weights.reshape(-1)[order][:, None]
  out = jnp.zeros((n * k, x.shape[-1]), f32).at[order].set(y)
  return out.reshape(n, k, -1).sum(1).astype(x.dtype)


_MIN_CAPACITY = 4


def experts_grouped(x: jax.Array, routing: Routing, w_gate: jax.Array, w_up: jax.Array,
                    w_down: jax.Array, *, capacity_factor: float) -> jax.Array:
  """Routed SwiGLU experts with GShard-style dispatch inside each batch shard.

  The tokens of every batch shard (a "group"; one group without a mesh) are placed in
  per-expert slots of capacity C = ceil(tokens_per_group * K / E * capacity_factor)
  (at least `_MIN_CAPACITY`, at most tokens_per_group), in token order; assignments
  past an expert's capacity are dropped (they add nothing). The [groups, E, C, D]
  buffer is resharded from batch shards to expert shards (an all-to-all on a mesh),
  multiplied by the expert weights and sent back. No
  step needs the whole batch on one device, unlike sorting all tokens for
  `experts_ragged`; with enough capacity (no drops) the two agree.
  """
  n, k = routing.experts.shape
  e, d = w_gate.shape[0], x.shape[-1]
  groups = shard_count("batch")
  if n % groups:
    groups = 1
  # [G, E, C, D] laid out by group (batch shards) or by expert; the expert layout splits
  # the groups over the batch axes the expert axis leaves free.
  if groups > 1:
    by_group = functools.partial(constrain, axes=("batch", None, None, None))
    by_expert = functools.partial(constrain, axes=("act_expert", "batch", None, None))
  else:
    by_group = by_expert = lambda a: a
  m = n // groups
  # A token picks an expert at most once, so m slots never drop: short inputs (decoding)
  # are dropless.
  capacity = min(m, max(_MIN_CAPACITY, math.ceil(m * k / e * capacity_factor)))
  experts = routing.experts.reshape(groups, m * k)

  def slots(flat):  # [m*k] expert ids -> slot in [E*C] (E*C: dropped), token order kept
    order = jnp.argsort(flat, stable=True)
    ranked = flat[order]
    first = jnp.searchsorted(ranked, jnp.arange(e, dtype=ranked.dtype))
    position = jnp.arange(m * k) - first[ranked]
    slot = jnp.where(position < capacity, ranked * capacity + position, e * capacity)
    return jnp.zeros_like(slot).at[order].set(slot)

  slot = jax.vmap(slots)(experts)  # [G, m*k]
  token = jnp.arange(m * k) // k

  def dispatch(xg, slot_g):  # [m, D] -> [E*C, D]; the extra row takes the dropped ones
    return jnp.zeros((e * capacity + 1, d), xg.dtype).at[slot_g].set(xg[token])[:-1]

  xs = jax.vmap(dispatch)(x.reshape(groups, m, d), slot).reshape(groups, e, capacity, d)
  xe = by_expert(jnp.swapaxes(by_group(xs), 0, 1))  # [E, G, C, D]: the all-to-all
  f32 = jnp.float32
  gate = jnp.einsum("egcd,edi->egci", xe, w_gate, preferred_element_type=f32)
  up = jnp.einsum("egcd,edi->egci", xe, w_up, preferred_element_type=f32)
  h = (jax.nn.silu(gate) * up).astype(x.dtype)
  ye = jnp.einsum("egci,eid->egcd", h, w_down, preferred_element_type=f32).astype(x.dtype)
  y = by_group(jnp.swapaxes(by_expert(ye), 0, 1))
  y = jnp.concatenate([y.reshape(groups, e * capacity, d),
                       jnp.zeros((groups, 1, d), y.dtype)], axis=1)
  picked = jax.vmap(lambda yg, slot_g: yg[slot_g])(y, slot)  # [G, m*k, D]; dropped: 0
  weights = routing.weights.reshape(groups, m * k, 1).astype(f32)
  out = (picked.astype(f32) * weights).reshape(n, k, d).sum(1)
  return out.astype(x.dtype)


def experts_dense(x: jax.Array, routing: Routing, w_gate: jax.Array, w_up: jax.Array,
                  w_down: jax.Array) -> jax.Array:
  """Every expert on every token, combined with one-hot weights (tiny configs)."""
  e = w_gate.shape[0]
  combine = jnp.einsum("nk,nke->ne", routing.weights,
                       jax.nn.one_hot(routing.experts, e, dtype=routing.weights.dtype))
  f32 = jnp.float32
  gate = jnp.einsum("nd,edi->nei", x, w_gate, preferred_element_type=f32)
  up = jnp.einsum("nd,edi->nei", x, w_up, preferred_element_type=f32)
  h = (jax.nn.silu(gate) * up).astype(x.dtype)
  h = constrain(h, ("batch", "act_expert", "act_mlp"))
  y = jnp.einsum("nei,eid->ned", h, w_down, preferred_element_type=f32)
  return jnp.einsum("ned,ne->nd", y, combine).astype(x.dtype)


def expert_counts(experts: jax.Array, num_experts: int,
                  token_mask: jax.Array | None = None) -> jax.Array:
  """Tokens routed to each expert [E] (int32), counting only tokens in `token_mask`."""
  one_hot = jax.nn.one_hot(experts, num_experts, dtype=jnp.int32).sum(1)  # [N, E]
  if token_mask is not None:
    one_hot = one_hot * token_mask.reshape(-1, 1).astype(jnp.int32)
  return one_hot.sum(0)


class MoE(nnx.Module):
  """Routed experts plus shared experts."""

  def __init__(self, cfg: LingConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    pd = jnp.dtype(cfg.param_dtype)
    e, d, i = cfg.num_local_experts, cfg.hidden_size, cfg.moe_intermediate_size
    # The router and its correction bias always stay float32.
    self.router = param(normal(rngs, (d, e), jnp.float32), ("embed", None))
    self.correction_bias = param(jnp.zeros((e,), jnp.float32), (None,))
    self.w_gate = param(normal(rngs, (e, d, i), pd), ("expert", "expert_embed", "expert_mlp"))
    self.w_up = param(normal(rngs, (e, d, i), pd), ("expert", "expert_embed", "expert_mlp"))
    self.w_down = param(normal(rngs, (e, i, d), pd), ("expert", "expert_mlp", "expert_embed"))
    self.shared_experts = (MLP(d, cfg.moe_intermediate_shared, rngs=rngs, param_dtype=pd)
                           if cfg.n_shared_experts else None)

  def __call__(self, x: jax.Array, token_mask: jax.Array | None = None
               ) -> tuple[jax.Array, jax.Array]:
    """x [B, T, D] -> (y [B, T, D], per-expert token counts [E])."""
    cfg = self.cfg
    b, t, d = x.shape
    flat = constrain(x.reshape(b * t, d), ("batch", "act_embed"))
    local_route = functools.partial(
        route, top_k=cfg.num_experts_per_tok, n_group=cfg.n_group,
        topk_group=cfg.topk_group, renormalize=cfg.norm_topk_prob,
        scaling=cfg.routed_scaling_factor)
    # Routing is per token; each device routes its own tokens (top_k would otherwise
    # be gathered onto every device by the SPMD partitioner).
    routing = batch_local(local_route, (("batch", None), None, None), ("batch", None))(
        flat, self.router[...], self.correction_bias[...])
    weights = [w[...].astype(x.dtype) for w in (self.w_gate, self.w_up, self.w_down)]
    run = {"ragged": experts_ragged, "dense": experts_dense,
           "grouped": functools.partial(experts_grouped,
                                        capacity_factor=cfg.moe_capacity_factor)
           }[cfg.moe_impl]
    chunk = cfg.moe_token_chunk
    if chunk and t > chunk and t % chunk == 0:
      # Dispatch buffers are [tokens * top_k, D], several per layer in the backward
      # pass: run the experts on slices of each row.
      def experts(xs, w, e):
        k = w.shape[-1]
        part = Routing(weights=w.reshape(-1, k), experts=e.reshape(-1, k), logits=None)
        return run(xs.reshape(-1, d), part, *weights).reshape(xs.shape)

      y = checkpointed_chunks(experts, (flat.reshape(b, t, d),
                                        routing.weights.reshape(b, t, -1),
                                        routing.experts.reshape(b, t, -1)), chunk)
    else:
      y = run(flat, routing, *weights)
    y = y.astype(x.dtype).reshape(b, t, d)
    if self.shared_experts is not None:
      y = y + self.shared_experts(x)
    return y, expert_counts(routing.experts, cfg.num_local_experts, token_mask)
