"""Kimi Delta Attention (KDA) math as pure `jax.numpy` functions.

The gated delta rule with a per-channel decay, for every head independently:

  S_t = diag(exp(g_t)) S_{t-1}
  S_t = S_t + beta_t k_t (v_t - S_t^T k_t)^T
  o_t = S_t^T (scale * q_t)

Shapes (the layout of transformers' `bailing_hybrid` kernels):
  q, k, g: [B, T, H, K]   (q and k already L2-normalised; g = log decay <= 0)
  v:       [B, T, H, V]
  beta:    [B, T, H]
  state:   [B, H, K, V]   (always float32)
  o:       [B, T, H, V]   (float32)

`kda_chunked` (training/prefill) and `kda_recurrent` / `kda_step` (decoding) compute
the same function; all math runs in float32 with full-precision matmuls. A position
with `g = 0`, `beta = 0` and `k = 0` leaves the state unchanged (bit-for-bit in the
recurrent form), which is how padding is handled (see `KimiDeltaAttention`).

Also here: the L2 normalisation used on q/k and the short causal depthwise conv.
"""

import functools

import jax
import jax.numpy as jnp

Array = jax.Array

_HIGHEST = jax.lax.Precision.HIGHEST


def l2_normalize(x: Array, eps: float = 1e-6) -> Array:
  """`x / sqrt(sum(x^2) + eps)` over the last axis, in float32 (as FLA does)."""
  x = x.astype(jnp.float32)
  return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def _default_scale(q: Array, scale: float | None) -> float:
  return q.shape[-1] ** -0.5 if scale is None else scale


def _zero_state(k: Array, v: Array) -> Array:
  batch, _, heads, k_dim = k.shape
  return jnp.zeros((batch, heads, k_dim, v.shape[-1]), jnp.float32)


def kda_step(q: Array, k: Array, v: Array, g: Array, beta: Array, state: Array,
             *, scale: float | None = None) -> tuple[Array, Array]:
  """One token of the delta rule.

  Args:
    q, k, g: [B, H, K]; v: [B, H, V]; beta: [B, H]; state: [B, H, K, V] float32.
    scale: query scale, default K**-0.5.

  Returns:
    (o [B, H, V] float32, new state [B, H, K, V] float32).
  """
  f32 = jnp.float32
  q = q.astype(f32) * _default_scale(q, scale)
  k, v, g, beta = (x.astype(f32) for x in (k, v, g, beta))
  state = state.astype(f32) * jnp.exp(g)[..., None]
  kv_mem = jnp.einsum("bhkv,bhk->bhv", state, k, precision=_HIGHEST)
  delta = (v - kv_mem) * beta[..., None]
  state = state + k[..., :, None] * delta[..., None, :]
  o = jnp.einsum("bhkv,bhk->bhv", state, q, precision=_HIGHEST)
  return o, state


@functools.partial(jax.jit, static_argnames=("scale",))
def kda_recurrent(q: Array, k: Array, v: Array, g: Array, beta: Array, *,
                  initial_state: Array | None = None,
                  scale: float | None = None) -> tuple[Array, Array]:
  """Token-by-token delta rule (a `lax.scan` of `kda_step`); see module doc for shapes."""
  state = _zero_state(k, v) if initial_state is None else initial_state
  scale = _default_scale(q, scale)

  def body(carry, xs):
    o, carry = kda_step(*xs, carry, scale=scale)
    return carry, o

  xs = tuple(jnp.swapaxes(x, 0, 1) for x in (q, k, v, g, beta))
  state, o = jax.lax.scan(body, state.astype(jnp.float32), xs)
  return jnp.swapaxes(o, 0, 1), state


def _two_sum(a: Array, b: Array) -> tuple[Array, Array]:
  """Error-free sum: `a + b == s + err` exactly (Knuth's TwoSum)."""
  s = a + b
  b_virtual = s - a
  err = (a - (s - b_virtual)) + (b - b_virtual)
  return s, err


def _compensated_cumsum(g: Array, axis: int) -> tuple[Array, Array]:
  """Inclusive cumulative sum as `hi + lo`: hi the float32 sum, lo its rounding error.

  The cumulative log decay of a chunk reaches hundreds, where float32 spacing is
  ~3e-5; differencing two such sums for nearby tokens would leave that much error in
  their decay factor. Carrying `lo` keeps `G_i - G_j` accurate to float32 rounding
  of the difference itself (hi_i - hi_j is exact for nearby i, j).
  """
  def add(x, y):
    s, err = _two_sum(x[0], y[0])
    return s, err + x[1] + y[1]
  return jax.lax.associative_scan(add, (g, jnp.zeros_like(g)), axis=axis)


_SUB_BLOCK = 16
_MAX_EXP = 80.0  # exp() of this stays finite in float32 (limit ~88.7)


def _diff(hi: Array, lo: Array, i_index, j_index) -> Array:
  """`G[i] - G[j]` for G = hi + lo, along axis -2 (accurate for nearby i, j)."""
  return ((jnp.take(hi, i_index, axis=-2) - jnp.take(hi, j_index, axis=-2))
          + (jnp.take(lo, i_index, axis=-2) - jnp.take(lo, j_index, axis=-2)))


def _pairwise_decayed_dot(a: Array, b: Array, hi: Array, lo: Array, *,
                          strict: bool, min_log_decay: float | None) -> Array:
  """`P[i,j] = sum_d a[i,d] b[j,d] exp(G[i,d] - G[j,d])` for j < i (or j <= i), else 0.

  a, b: [..., C, K]; G = hi + lo: [..., C, K] non-increasing along C. Computed on
  sub-blocks of `_SUB_BLOCK` tokens as matmuls with every exponential <= 1 off the
  block diagonal: `exp(G_i - G_j) = exp(G_i - G_s) exp(G_s - G_e) exp(G_e - G_j)`
  with s the start of i's block and e the end of j's block. On the diagonal blocks,
  when the per-token log decay is bounded below (`min_log_decay`, the safe gate) so
  that `exp(G_s - G_j)` cannot overflow, also a matmul; otherwise elementwise with the
  exponent masked before `exp`. No infinity appears, so gradients stay finite.
  """
  size, k_dim = a.shape[-2:]
  sub = _SUB_BLOCK if size % _SUB_BLOCK == 0 else size
  blocks = size // sub
  lead = a.shape[:-2]
  pos = jnp.arange(size).reshape(blocks, sub)
  start, end = pos[:, 0], pos[:, -1]

  def split(x):
    return x.reshape(*lead, blocks, sub, k_dim)

  row = jnp.arange(sub)
  diag_mask = row[:, None] > row[None, :] if strict else row[:, None] >= row[None, :]
  to_start = split(_diff(hi, lo, pos.reshape(-1), jnp.repeat(start, sub)))  # G_i - G_s <= 0
  a_left = split(a) * jnp.exp(to_start)
  if min_log_decay is not None and -min_log_decay * (sub - 1) <= _MAX_EXP:
    b_from_start = split(b) * jnp.exp(-to_start)  # exp(G_s - G_j) >= 1, bounded
    diag = jnp.einsum("...aik,...ajk->...aij", a_left, b_from_start, precision=_HIGHEST)
  else:
    g_diff = split(hi)[..., :, None, :] - split(hi)[..., None, :, :]
    g_diff = g_diff + (split(lo)[..., :, None, :] - split(lo)[..., None, :, :])
    decay = jnp.exp(jnp.where(diag_mask[..., None], g_diff, 0.0))
    diag = jnp.sum(split(a)[..., :, None, :] * split(b)[..., None, :, :] * decay, axis=-1)
  diag = jnp.where(diag_mask, diag, 0.0)
  if blocks == 1:
    return diag.reshape(*lead, size, size)

  to_end = split(_diff(hi, lo, jnp.repeat(end, sub), pos.reshape(-1)))  # G_e - G_j <= 0
  b_right = split(b) * jnp.exp(to_end)
  below = start[:, None] > end[None, :]  # block pairs (a, b) with b < a
  gap = (jnp.take(hi, start, axis=-2)[..., :, None, :] - jnp.take(hi, end, axis=-2)[..., None, :, :]
         + (jnp.take(lo, start, axis=-2)[..., :, None, :]
            - jnp.take(lo, end, axis=-2)[..., None, :, :]))  # G_s(a) - G_e(b)
  gap = jnp.exp(jnp.where(below[..., None], gap, -jnp.inf))  # 0 where b >= a
  off = jnp.einsum("...aik,...abk,...bjk->...abij", a_left, gap, b_right,
                   precision=_HIGHEST)
  eye = jnp.eye(blocks, dtype=bool)[:, :, None, None]
  full = jnp.where(eye, diag[..., :, None, :, :], off)  # [..., a, b, i, j]
  return jnp.swapaxes(full, -3, -2).reshape(*lead, size, size)


@functools.partial(jax.jit, static_argnames=("chunk_size", "scale", "min_log_decay",
                                             "chunks_per_step"))
def kda_chunked(q: Array, k: Array, v: Array, g: Array, beta: Array, *,
                chunk_size: int = 64, initial_state: Array | None = None,
                scale: float | None = None,
                min_log_decay: float | None = None,
                chunks_per_step: int = 0) -> tuple[Array, Array]:
  """Chunked delta rule for training and prefill; see module doc for shapes.

  Inside a chunk of C tokens (cumulative log decay G), the UT transform
  `T = (I + L)^-1`, `L[i,j] = beta_i k_i^T diag(exp(G_i - G_j)) k_j` (i > j),
  turns the sequential updates into matmuls; a `lax.scan` carries the float32
  state across chunks. T is zero-padded to a multiple of C (padding is a no-op).
  `min_log_decay`: a lower bound on g when one holds (the safe gate's
  `kda_lower_bound`); it lets diagonal sub-blocks use matmuls too. Results do not
  depend on it beyond float32 rounding; it must be a true bound.
  `chunks_per_step` > 0 prepares that many chunks at a time (a checkpointed outer
  scan), so the per-chunk intermediates of a long sequence, several [T, C] and
  [T, K] float32 arrays per head, exist for one group of chunks instead of all of
  them, in the forward and in the backward pass. The arithmetic is the same.

  Returns:
    (o [B, T, H, V] float32, final state [B, H, K, V] float32).
  """
  f32 = jnp.float32
  batch, seq_len, heads, k_dim = k.shape
  v_dim = v.shape[-1]
  state = _zero_state(k, v) if initial_state is None else initial_state
  q = q.astype(f32) * _default_scale(q, scale)
  k, v, g, beta = (x.astype(f32) for x in (k, v, g, beta))

  num_chunks = -(-seq_len // chunk_size)
  group = chunks_per_step if 0 < chunks_per_step < num_chunks else num_chunks
  num_chunks = -(-num_chunks // group) * group
  pad = num_chunks * chunk_size - seq_len

  def to_chunks(x):  # [B, T, H, ...] -> [N / S, S, B, H, C, ...]
    x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
    x = x.reshape(batch, num_chunks, chunk_size, heads, *x.shape[3:])
    x = jnp.moveaxis(x, (1, 3), (0, 2))
    return x.reshape(num_chunks // group, group, *x.shape[1:])

  def chunk_group(state, xs):
    o, state = _chunk_group(state, *xs, v_dim=v_dim, min_log_decay=min_log_decay)
    return state, o

  if group < num_chunks:
    chunk_group = jax.checkpoint(chunk_group)
  state, o = jax.lax.scan(chunk_group, state.astype(f32),
                          tuple(to_chunks(x) for x in (q, k, v, g, beta)))
  o = o.reshape(num_chunks, *o.shape[2:])
  o = jnp.moveaxis(o, (0, 2), (1, 3)).reshape(batch, num_chunks * chunk_size, heads, v_dim)
  return o[:, :seq_len], state


def _chunk_group(state: Array, q: Array, k: Array, v: Array, g: Array, beta: Array, *,
                 v_dim: int, min_log_decay: float | None) -> tuple[Array, Array]:
  """Consecutive chunks [S, B, H, C, ...] from `state`: (o [S, B, H, C, V], state)."""
  hi, lo = _compensated_cumsum(g, axis=-2)  # [S, B, H, C, K] log decay since chunk start
  cum_g = hi + lo
  to_end = (hi[..., -1:, :] - hi) + (lo[..., -1:, :] - lo)  # log decay to the chunk end
  k_beta = k * beta[..., None]

  # UT transform: solve (I + L) [U | W] = [beta v | beta k exp(G)] for all chunks.
  lmat = _pairwise_decayed_dot(k_beta, k, hi, lo, strict=True,
                                min_log_decay=min_log_decay)
  rhs = jnp.concatenate([v * beta[..., None], k_beta * jnp.exp(cum_g)], axis=-1)
  solved = jnp.einsum("...ij,...jd->...id", _unit_lower_inverse(lmat), rhs,
                      precision=_HIGHEST)
  u, w = solved[..., :v_dim], solved[..., v_dim:]

  attn_qk = _pairwise_decayed_dot(q, k, hi, lo, strict=False,
                                   min_log_decay=min_log_decay)  # [S, B, H, C, C]
  q_decayed = q * jnp.exp(cum_g)
  k_to_end = k * jnp.exp(to_end)
  chunk_decay = jnp.exp(cum_g[..., -1, :])  # [S, B, H, K]

  def body(s, xs):
    u_c, w_c, a_c, qd_c, ke_c, dec_c = xs
    v_new = u_c - jnp.einsum("bhck,bhkv->bhcv", w_c, s, precision=_HIGHEST)
    o_c = (jnp.einsum("bhck,bhkv->bhcv", qd_c, s, precision=_HIGHEST)
           + jnp.einsum("bhcj,bhjv->bhcv", a_c, v_new, precision=_HIGHEST))
    s = (s * dec_c[..., None]
         + jnp.einsum("bhck,bhcv->bhkv", ke_c, v_new, precision=_HIGHEST))
    return s, o_c

  state, o = jax.lax.scan(body, state, (u, w, attn_qk, q_decayed, k_to_end, chunk_decay))
  return o, state


def _unit_lower_inverse(lmat: Array) -> Array:
  """(I + L)^-1 for strictly lower-triangular L [..., C, C], by matmuls only.

  L is nilpotent (L^C = 0), so (I + L)^-1 = sum_k (-L)^k = prod_j (I + (-L)^(2^j)) for
  2^j < C: log2(C) matmul pairs. Unlike `lax.linalg.triangular_solve` (a LAPACK call on
  CPU that stalls XLA:CPU's collectives when its operands are sharded), this partitions
  like any batched matmul and runs on the matrix units of accelerators.
  """
  size = lmat.shape[-1]
  power = -lmat
  inverse = jnp.eye(size, dtype=lmat.dtype) + power
  span = 2
  while span < size:
    power = jnp.matmul(power, power, precision=_HIGHEST)
    inverse = inverse + jnp.matmul(inverse, power, precision=_HIGHEST)
    span *= 2
  return inverse


def causal_conv1d(x: Array, weight: Array, buffer: Array | None = None,
                  mask: Array | None = None) -> tuple[Array, Array]:
  """Causal depthwise conv (no bias, no activation) continuing from a buffer.

  Args:
    x: [B, T, C] inputs.
    weight: [W, C] kernel; `weight[-1]` multiplies the current input.
    buffer: [B, W-1, C] the last W-1 real inputs before `x` (zeros if None).
    mask: optional [B, T] bool; False positions are skipped entirely: they do not
      enter any window or the new buffer, and their output is 0.

  Returns:
    (y [B, T, C] float32, new buffer [B, W-1, C] in x's dtype).
  """
  batch, seq_len, channels = x.shape
  width = weight.shape[0]
  if buffer is None:
    buffer = jnp.zeros((batch, width - 1, channels), x.dtype)
  buffer = buffer.astype(x.dtype)
  if mask is None:
    padded = jnp.concatenate([buffer, x], axis=1)
    end = jnp.full((batch,), seq_len)
  else:
    mask = mask.astype(bool)
    # Stable order: real tokens first (in order), padding after them.
    order = jnp.argsort(~mask, axis=1, stable=True)
    compact = jnp.take_along_axis(x, order[..., None], axis=1)
    padded = jnp.concatenate([buffer, compact], axis=1)
    end = jnp.sum(mask, axis=1)
  w32 = weight.astype(jnp.float32)
  p32 = padded.astype(jnp.float32)
  y = sum(p32[:, j:j + seq_len] * w32[j] for j in range(width))
  new_buffer = jnp.take_along_axis(
      padded, (end[:, None] + jnp.arange(width - 1))[..., None], axis=1)
  if mask is not None:
    inverse = jnp.argsort(order, axis=1)
    y = jnp.take_along_axis(y, inverse[..., None], axis=1)
    y = jnp.where(mask[..., None], y, 0.0)
  return y, new_buffer
