"""Blockwise causal attention with O(T) memory (FlashAttention-2 in plain JAX).

The full-sequence path of MLA would otherwise materialise [B, H, T, T] float32 scores:
8.6 GB per 8k-token sequence and layer, several times over in the backward pass. Here
queries and keys are processed in blocks with an online softmax; only the output and
the row log-sum-exp are kept for the backward pass, which recomputes the probabilities
block by block (custom VJP). Key blocks entirely above the diagonal are skipped, so the
work is the causal half. Loops are `lax.fori_loop`s over blocks, so the program size does
not grow with the sequence length, and nothing in them depends on how the batch and
head axes are sharded.

Shapes: q [B, T, H, Dk], k [B, S, H, Dk], v [B, S, H, Dv], key_mask [B, S] (True for
real tokens); S = T for a whole sequence (`causal_attention`), S >= T for new tokens
over a decoding cache (`cached_causal_attention`: query i sits at slot `start + i` and
sees the slots up to it). Scores are accumulated in float32; probabilities are cast to
v's dtype for the value product, as fused attention kernels do.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

_NEG = float(np.finfo(np.float32).min)


def _pad_to(x: jax.Array, length: int, axis: int = 1) -> jax.Array:
  pad = length - x.shape[axis]
  if pad == 0:
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, pad)
  return jnp.pad(x, widths)


def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, key_mask: jax.Array,
                     scale: float, block: int = 512) -> jax.Array:
  """softmax(q k^T * scale + causal/key mask) v, blockwise; returns [B, T, H, Dv].

  A query row whose allowed keys are all masked (a padded position) gets zeros, where
  a dense softmax would average over masked keys; such rows carry no loss.
  """
  return cached_causal_attention(q, k, v, key_mask, jnp.zeros((), jnp.int32), scale,
                                 block)


def cached_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array,
                            key_mask: jax.Array, start: jax.Array, scale: float,
                            block: int = 512) -> jax.Array:
  """`causal_attention` of T new tokens over S >= T cache slots: query i is slot
  `start + i` (a traced int32 scalar) and sees the slots <= it that `key_mask` [B, S]
  marks; key blocks past the last query's slot are skipped. Returns [B, T, H, Dv]."""
  t, s = q.shape[1], k.shape[1]
  block = min(block, max(t, s))
  q = _pad_to(q, -(-t // block) * block)
  k, v = (_pad_to(x, -(-s // block) * block) for x in (k, v))
  key_mask = _pad_to(key_mask.astype(bool), k.shape[1])
  out = _attention(q, k, v, key_mask, jnp.asarray(start, jnp.int32), float(scale), block)
  return out[:, :t]


def _block(x: jax.Array, i, block: int) -> jax.Array:
  return jax.lax.dynamic_slice_in_dim(x, i * block, block, axis=1)


def _scores(q_blk, k_blk, mask_blk, start, i, j, block: int, scale: float) -> jax.Array:
  """Masked float32 scores [B, H, bq, bk] of query block i (slots from `start + i *
  block`) against key block j."""
  s = jnp.einsum("bthd,bshd->bhts", q_blk, k_blk,
                 preferred_element_type=jnp.float32) * scale
  rows = start + i * block + jnp.arange(block)
  cols = j * block + jnp.arange(block)
  allowed = (cols[None, :] <= rows[:, None])[None, None] & mask_blk[:, None, None, :]
  return jnp.where(allowed, s, _NEG), allowed


def _key_blocks_seen(start, i, block: int, key_blocks: int):
  """Key blocks 0 .. this-1 hold a slot that query block i sees."""
  return jnp.minimum(key_blocks, (start + (i + 1) * block - 1) // block + 1)


def _first_query_block(start, j, block: int, query_blocks: int):
  """The first query block that sees a slot of key block j."""
  return jnp.clip((j * block - start) // block, 0, query_blocks)


def _forward(q, k, v, key_mask, start, scale: float, block: int):
  """Output [B, T, H, Dv] and log-sum-exp [B, H, T] (float32)."""
  b, t, h, _ = q.shape
  dv = v.shape[-1]
  n, key_blocks = t // block, k.shape[1] // block

  def query_block(i, carry):
    out, lse = carry
    q_blk = _block(q, i, block)

    def key_block(j, acc):
      m, l, o = acc
      s, allowed = _scores(q_blk, _block(k, j, block), _block(key_mask, j, block),
                           start, i, j, block, scale)
      m_new = jnp.maximum(m, s.max(-1))
      p = jnp.where(allowed, jnp.exp(s - m_new[..., None]), 0.0)
      corr = jnp.exp(m - m_new)
      l = l * corr + p.sum(-1)
      o = o * jnp.swapaxes(corr, 1, 2)[..., None] + jnp.einsum(
          "bhts,bshd->bthd", p.astype(v.dtype), _block(v, j, block),
          preferred_element_type=jnp.float32)
      return m_new, l, o

    init = (jnp.full((b, h, block), _NEG, jnp.float32), jnp.zeros((b, h, block), jnp.float32),
            jnp.zeros((b, block, h, dv), jnp.float32))
    m, l, o = jax.lax.fori_loop(0, _key_blocks_seen(start, i, block, key_blocks),
                                key_block, init)
    safe = jnp.where(l > 0, l, 1.0)
    o = o / jnp.swapaxes(safe, 1, 2)[..., None]
    out = jax.lax.dynamic_update_slice_in_dim(out, o.astype(out.dtype), i * block, axis=1)
    lse = jax.lax.dynamic_update_slice_in_dim(
        lse, jnp.where(l > 0, m + jnp.log(safe), jnp.inf), i * block, axis=2)
    return out, lse

  init = (jnp.zeros((b, t, h, dv), v.dtype), jnp.zeros((b, h, t), jnp.float32))
  return jax.lax.fori_loop(0, n, query_block, init)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _attention(q, k, v, key_mask, start, scale: float, block: int):
  return _forward(q, k, v, key_mask, start, scale, block)[0]


def _attention_fwd(q, k, v, key_mask, start, scale, block):
  out, lse = _forward(q, k, v, key_mask, start, scale, block)
  return out, (q, k, v, key_mask, start, out, lse)


def _attention_bwd(scale, block, residuals, d_out):
  """Per key block j: dk_j, dv_j over the query blocks that see it; dq accumulated in
  place."""
  q, k, v, key_mask, start, out, lse = residuals
  n, key_blocks = q.shape[1] // block, k.shape[1] // block
  # D_i = rowsum(dO * O), the softmax-Jacobian correction, [B, H, T].
  delta = jnp.einsum("bthd,bthd->bht", d_out.astype(jnp.float32), out.astype(jnp.float32))

  def key_block(j, carry):
    dq, dk, dv = carry
    k_blk, v_blk = _block(k, j, block), _block(v, j, block)
    mask_blk = _block(key_mask, j, block)

    def query_block(i, acc):
      dq, dk_j, dv_j = acc
      q_blk, do_blk = _block(q, i, block), _block(d_out, i, block)
      s, allowed = _scores(q_blk, k_blk, mask_blk, start, i, j, block, scale)
      lse_blk = jax.lax.dynamic_slice_in_dim(lse, i * block, block, axis=2)
      d_blk = jax.lax.dynamic_slice_in_dim(delta, i * block, block, axis=2)
      p = jnp.where(allowed, jnp.exp(s - lse_blk[..., None]), 0.0)
      dv_j = dv_j + jnp.einsum("bhts,bthd->bshd", p.astype(do_blk.dtype), do_blk,
                               preferred_element_type=jnp.float32)
      dp = jnp.einsum("bthd,bshd->bhts", do_blk, v_blk, preferred_element_type=jnp.float32)
      ds = (p * (dp - d_blk[..., None]) * scale)
      dk_j = dk_j + jnp.einsum("bhts,bthd->bshd", ds.astype(q_blk.dtype), q_blk,
                               preferred_element_type=jnp.float32)
      dq_i = jnp.einsum("bhts,bshd->bthd", ds.astype(k_blk.dtype), k_blk,
                        preferred_element_type=jnp.float32)
      dq = jax.lax.dynamic_update_slice_in_dim(
          dq, _block(dq, i, block) + dq_i, i * block, axis=1)
      return dq, dk_j, dv_j

    zeros_k = jnp.zeros(k_blk.shape, jnp.float32)
    zeros_v = jnp.zeros(v_blk.shape, jnp.float32)
    dq, dk_j, dv_j = jax.lax.fori_loop(_first_query_block(start, j, block, n), n,
                                       query_block, (dq, zeros_k, zeros_v))
    dk = jax.lax.dynamic_update_slice_in_dim(dk, dk_j.astype(dk.dtype), j * block, axis=1)
    dv = jax.lax.dynamic_update_slice_in_dim(dv, dv_j.astype(dv.dtype), j * block, axis=1)
    return dq, dk, dv

  init = (jnp.zeros(q.shape, jnp.float32), jnp.zeros(k.shape, k.dtype),
          jnp.zeros(v.shape, v.dtype))
  dq, dk, dv = jax.lax.fori_loop(0, key_blocks, key_block, init)
  return dq.astype(q.dtype), dk, dv, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)
