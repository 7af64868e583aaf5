"""Mixture of experts: group-limited sigmoid router, routed SwiGLU experts, shared expert.

Router (float32): scores = sigmoid(x W); the selection adds a per-expert correction bias
(aux-loss-free balancing; it never enters the weights), keeps the `topk_group` groups
with the largest sum of their top-2 biased scores, then the top-k experts; weights are
the unbiased scores of the chosen experts, renormalised, times `routed_scaling_factor`.

Experts run either through `jax.lax.ragged_dot` on assignments sorted by expert, or
through a dense one-hot path (every expert on every token) for tiny configs.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import MLP, normal
from rcca_jax.parallel.partitioning import batch_local, constrain, param


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


def _chunked_experts(run, x: jax.Array, routing: Routing, weights, rows: int,
                     chunk: int) -> jax.Array:
  """`run` on `chunk` positions of every row at a time; x [rows * T, D].

  Dispatch buffers are [tokens * top_k, D], several per layer in the backward pass;
  one slice at a time (recomputed in the backward, `jax.checkpoint`) bounds them.
  Slices cut each row, so a device keeps working on its own rows.
  """
  n, d = x.shape
  num = n // rows // chunk

  def slices(a):  # [rows * T, ...] -> [num, rows * chunk, ...]
    a = a.reshape(rows, num, chunk, *a.shape[1:])
    return jnp.swapaxes(a, 0, 1).reshape(num, rows * chunk, *a.shape[3:])

  @jax.checkpoint
  def one(args):
    xs, w, e = args
    return run(xs, Routing(weights=w, experts=e, logits=None), *weights)

  y = jax.lax.map(one, (slices(x), slices(routing.weights), slices(routing.experts)))
  return jnp.swapaxes(y.reshape(num, rows, chunk, d), 0, 1).reshape(n, d)


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
    run = experts_ragged if cfg.moe_impl == "ragged" else experts_dense
    chunk = cfg.moe_token_chunk
    if chunk and t > chunk and t % chunk == 0:
      y = _chunked_experts(run, flat, routing, weights, b, chunk)
    else:
      y = run(flat, routing, *weights)
    y = y.astype(x.dtype).reshape(b, t, d)
    if self.shared_experts is not None:
      y = y + self.shared_experts(x)
    return y, expert_counts(routing.experts, cfg.num_local_experts, token_mask)
