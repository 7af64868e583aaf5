"""Basic layers: RMSNorm, dense SwiGLU MLP, token embedding, linear projections.

Weights are stored [in, out] (the transpose of PyTorch's nn.Linear) with logical axis
names for sharding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.parallel.partitioning import constrain, param

INIT_STD = 0.02


def normal(rngs: nnx.Rngs, shape: Sequence[int], dtype, std: float = INIT_STD) -> jax.Array:
  return std * jax.random.normal(rngs.params(), tuple(shape), dtype)


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
  """RMSNorm computed in float32, cast back, then scaled (the reference's order)."""
  x32 = x.astype(jnp.float32)
  x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return weight * x32.astype(x.dtype)


def weight_product(x: jax.Array, weight: jax.Array, spec: str | None = None) -> jax.Array:
  """x @ weight (`jnp.dot`, or `einsum(spec, x, weight)`) in x's dtype. A weight stored
  narrower than x (bfloat16 under float32 compute: the sampler's `rl.rollout_dtype`
  copy) multiplies in its own dtype, x rounded to it, the products summed in x's
  dtype; otherwise it is cast to x's dtype. A bfloat16 product is exact in float32,
  so the two differ by the rounding of x (and the order of the sums)."""
  if jnp.finfo(weight.dtype).bits < jnp.finfo(x.dtype).bits:
    x, kwargs = x.astype(weight.dtype), {"preferred_element_type": x.dtype}
  else:
    weight, kwargs = weight.astype(x.dtype), {}
  if spec is None:
    return jnp.dot(x, weight, **kwargs)
  return jnp.einsum(spec, x, weight, **kwargs)


def checkpointed_chunks(fn: Callable[..., Any], arrays: Sequence[jax.Array],
                        chunk: int) -> Any:
  """`fn` on `chunk` positions of [B, T, ...] arrays at a time (T divisible by chunk).

  The slices run one after another (`lax.map`) and each is recomputed in the backward
  pass (`jax.checkpoint`), so only one slice's intermediates exist at a time. Slices cut
  every row, so a device keeps working on its own rows. `fn` takes and returns
  [B, chunk, ...] arrays; its outputs are put back together as [B, T, ...].
  """
  b, t = arrays[0].shape[:2]
  n = t // chunk

  def split(a):
    return jnp.swapaxes(a.reshape(b, n, chunk, *a.shape[2:]), 0, 1)

  def merge(a):
    return jnp.swapaxes(a, 0, 1).reshape(b, t, *a.shape[3:])

  out = jax.lax.map(jax.checkpoint(lambda args: fn(*args)), tuple(map(split, arrays)))
  return jax.tree.map(merge, out)


class RMSNorm(nnx.Module):
  """Root-mean-square norm with a learned scale."""

  def __init__(self, dim: int, eps: float, *, param_dtype=jnp.float32):
    self.eps = eps
    self.weight = param(jnp.ones((dim,), param_dtype), ("norm",))

  def __call__(self, x: jax.Array) -> jax.Array:
    return rms_norm(x, self.weight[...].astype(x.dtype), self.eps)


class Linear(nnx.Module):
  """y = x @ W (+ b); W is [in, out]."""

  def __init__(self, din: int, dout: int, axes: tuple[str | None, str | None], *,
               rngs: nnx.Rngs, use_bias: bool = False, param_dtype=jnp.float32):
    self.kernel = param(normal(rngs, (din, dout), param_dtype), axes)
    self.bias = param(jnp.zeros((dout,), param_dtype), axes[1:]) if use_bias else None

  def __call__(self, x: jax.Array) -> jax.Array:
    y = weight_product(x, self.kernel[...])
    if self.bias is not None:
      y = y + self.bias[...].astype(y.dtype)
    return y


class MLP(nnx.Module):
  """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

  def __init__(self, hidden: int, intermediate: int, *, rngs: nnx.Rngs,
               param_dtype=jnp.float32):
    self.gate_proj = Linear(hidden, intermediate, ("embed", "mlp"), rngs=rngs,
                            param_dtype=param_dtype)
    self.up_proj = Linear(hidden, intermediate, ("embed", "mlp"), rngs=rngs,
                          param_dtype=param_dtype)
    self.down_proj = Linear(intermediate, hidden, ("mlp", "embed"), rngs=rngs,
                            param_dtype=param_dtype)

  def __call__(self, x: jax.Array) -> jax.Array:
    h = jax.nn.silu(self.gate_proj(x)) * self.up_proj(x)
    h = constrain(h, ("batch", "length", "act_mlp"))
    return self.down_proj(h)


class Embed(nnx.Module):
  """Token embedding table [vocab, hidden]."""

  def __init__(self, vocab: int, hidden: int, *, rngs: nnx.Rngs, param_dtype=jnp.float32):
    self.embedding = param(normal(rngs, (vocab, hidden), param_dtype), ("vocab", "embed"))

  def __call__(self, ids: jax.Array, dtype) -> jax.Array:
    return jnp.take(self.embedding[...], ids, axis=0).astype(dtype)
