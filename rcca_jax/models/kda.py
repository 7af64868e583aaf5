"""Kimi Delta Attention layer (the linear-attention layer of Ling-3 / `bailing_hybrid`).

x -> q, k, v projections -> short causal depthwise conv + SiLU -> q, k L2-normalised;
per-channel log decay `g = lower_bound * sigmoid(exp(A_log) * (f_proj(x) + dt_bias))`
(or `-exp(A_log) * softplus(...)` without the safe gate); `beta = sigmoid(b_proj(x))`;
delta rule (`kda_ops`); output `o_proj(RMSNorm(o) * sigmoid(g_proj(x)))`.

The conv, the gate, the delta rule, the norm and the recurrent state run in float32
whatever the compute dtype; the conv kernels, `A_log`, `dt_bias` and the norm weight
are float32 parameters (transformers keeps them in float32 too).

Padding (`attention_mask`, 1 = real token): a padded position is an exact no-op. It
enters no conv window and not the conv buffer, it neither decays nor updates the state,
and its output is 0. With left padding from an empty state this is what the reference
computes (it zeroes padded hidden states, so they add nothing to a zero state).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, traverse_util

from rcca_jax.models import kda_ops
from rcca_jax.models.layers import Linear
from rcca_jax.parallel.partitioning import constrain, param

Array = jax.Array

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "f_proj", "b_proj", "g_proj", "o_proj")
_CONVS = ("q_conv1d", "k_conv1d", "v_conv1d")
_ACT_AXES = ("batch", "length", "act_heads", None)  # [B, T, H, head_dim] activations


class KDAState(NamedTuple):
  """Decoding state of one KDA layer.

  q_conv, k_conv, v_conv: [B, conv_kernel - 1, H * head_dim], the last inputs of each
    short conv (oldest first), in the compute dtype.
  recurrent: [B, H, head_dim, head_dim] float32 delta-rule state.
  """
  q_conv: Array
  k_conv: Array
  v_conv: Array
  recurrent: Array


class GatedRMSNorm(nnx.Module):
  """`weight * RMSNorm(x) * sigmoid(gate)` over the last axis, all in float32."""

  def __init__(self, dim: int, eps: float):
    self.eps = eps
    self.weight = param(jnp.ones((dim,), jnp.float32), ("norm",))

  def __call__(self, x: Array, gate: Array) -> Array:
    x = x.astype(jnp.float32)
    x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)
    return self.weight[...].astype(jnp.float32) * x * jax.nn.sigmoid(gate.astype(jnp.float32))


def _config_getter(cfg: Any):
  if isinstance(cfg, Mapping):
    return lambda name: cfg.get(name)
  return lambda name: getattr(cfg, name, None)


def _first(get, *names, default=None):
  for name in names:
    value = get(name)
    if value is not None:
      return value
  return default


class KimiDeltaAttention(nnx.Module):
  """KDA layer; parameters named like the checkpoint tensors (see `kda_params_from_hf`)."""

  def __init__(self, hidden_size: int, num_heads: int, head_dim: int, *,
               conv_kernel: int = 4, norm_eps: float = 1e-6, chunk_size: int = 64,
               chunks_per_step: int = 0,
               gate_lower_bound: float | None = -5.0, dtype=jnp.float32,
               param_dtype=jnp.float32, rngs: nnx.Rngs):
    """Builds the layer.

    Args:
      hidden_size, num_heads, head_dim: model width, KDA heads, per-head q/k/v dim.
      conv_kernel: short conv width (the state keeps `conv_kernel - 1` inputs).
      norm_eps: epsilon of the gated output RMSNorm.
      chunk_size: chunk length of the chunked (training/prefill) form.
      chunks_per_step: chunks prepared at a time in that form (0: all); bounds the
        memory of long sequences (`kda_ops.kda_chunked`).
      gate_lower_bound: safe-gate bound (`kda_lower_bound`); None selects the
        unbounded `-exp(A_log) * softplus` gate (`kda_safe_gate=False`).
      dtype: compute dtype of the projections; param_dtype: their storage dtype.
      rngs: parameter initialisation.
    """
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.head_dim = head_dim
    self.conv_kernel = conv_kernel
    self.chunk_size = chunk_size
    self.chunks_per_step = chunks_per_step
    self.gate_lower_bound = gate_lower_bound
    self.dtype = jnp.dtype(dtype)
    width = num_heads * head_dim

    def linear(din, dout, axes):
      return Linear(din, dout, axes, rngs=rngs, param_dtype=param_dtype)

    self.q_proj = linear(hidden_size, width, ("embed", "heads"))
    self.k_proj = linear(hidden_size, width, ("embed", "heads"))
    self.v_proj = linear(hidden_size, width, ("embed", "heads"))
    bound = 1.0 / math.sqrt(conv_kernel)  # PyTorch's default depthwise conv init.
    for name in _CONVS:
      kernel = jax.random.uniform(rngs.params(), (conv_kernel, width), jnp.float32,
                                  -bound, bound)
      setattr(self, name, param(kernel, ("conv", "heads")))
    self.f_proj = linear(hidden_size, width, ("embed", "heads"))
    # A in [1, 16]; dt in [1e-3, 1e-1] log-uniform, stored as softplus^-1(dt).
    a = jax.random.uniform(rngs.params(), (num_heads,), jnp.float32, 1.0, 16.0)
    self.A_log = param(jnp.log(a), ("heads",))
    dt = jnp.exp(jax.random.uniform(rngs.params(), (width,), jnp.float32,
                                    math.log(1e-3), math.log(1e-1)))
    self.dt_bias = param(dt + jnp.log(-jnp.expm1(-dt)), ("heads",))
    self.b_proj = linear(hidden_size, num_heads, ("embed", "heads"))
    self.g_proj = linear(hidden_size, width, ("embed", "heads"))
    self.o_norm = GatedRMSNorm(head_dim, norm_eps)
    self.o_proj = linear(width, hidden_size, ("heads", "embed"))

  @classmethod
  def from_config(cls, cfg: Any, *, rngs: nnx.Rngs, dtype=None,
                  param_dtype=None) -> KimiDeltaAttention:
    """Builds from a `BailingHybridConfig`, a config.json dict or a `LingConfig`.

    Reads the transformers field names: `linear_head_dim` (else `head_dim`),
    `linear_num_heads` (else `num_attention_heads`), `linear_conv_kernel_dim` (else
    `short_conv_kernel_size`), `kda_safe_gate`, `kda_lower_bound`, `rms_norm_eps`,
    and `kda_chunk_size` / `kda_chunks_per_step` / `dtype` / `param_dtype` when
    present.
    """
    get = _config_getter(cfg)
    act = _first(get, "hidden_act", default="silu")
    if act != "silu":
      raise ValueError(f"KDA config: hidden_act={act!r}; only 'silu' is supported")
    safe = _first(get, "kda_safe_gate", default=True)
    dtype = dtype or _first(get, "dtype", default="float32")
    param_dtype = param_dtype or _first(get, "param_dtype", default="float32")
    return cls(
        hidden_size=int(get("hidden_size")),
        num_heads=int(_first(get, "linear_num_heads", "num_attention_heads")),
        head_dim=int(_first(get, "linear_head_dim", "head_dim")),
        conv_kernel=int(_first(get, "linear_conv_kernel_dim", "short_conv_kernel_size",
                               default=4)),
        norm_eps=float(_first(get, "rms_norm_eps", default=1e-6)),
        chunk_size=int(_first(get, "kda_chunk_size", default=64)),
        chunks_per_step=int(_first(get, "kda_chunks_per_step", default=0)),
        gate_lower_bound=float(_first(get, "kda_lower_bound", default=-5.0)) if safe else None,
        dtype=jnp.dtype(dtype), param_dtype=jnp.dtype(param_dtype), rngs=rngs)

  def init_state(self, batch_size: int) -> KDAState:
    """An empty decoding state (what a sequence starts from)."""
    conv = jnp.zeros((batch_size, self.conv_kernel - 1, self.num_heads * self.head_dim),
                     self.dtype)
    recurrent = jnp.zeros((batch_size, self.num_heads, self.head_dim, self.head_dim),
                          jnp.float32)
    return KDAState(conv, conv, conv, recurrent)

  def _decay(self, x: Array) -> Array:
    """Per-channel log decay g [B, T, H, head_dim] in float32."""
    shape = (*x.shape[:2], self.num_heads, self.head_dim)
    f = self.f_proj(x).astype(jnp.float32).reshape(shape)
    f = f + self.dt_bias[...].astype(jnp.float32).reshape(self.num_heads, self.head_dim)
    rate = jnp.exp(self.A_log[...].astype(jnp.float32))[:, None]
    if self.gate_lower_bound is None:
      return -rate * jax.nn.softplus(f)
    return self.gate_lower_bound * jax.nn.sigmoid(rate * f)

  def __call__(self, x: Array, *, attention_mask: Array | None = None,
               state: KDAState | None = None,
               return_state: bool = False) -> Array | tuple[Array, KDAState]:
    """Applies the layer to x [B, T, hidden].

    Without `state` the sequence starts empty and uses the chunked form. With a
    `state` it continues from it: the recurrent form when T < chunk_size, else the
    chunked form from that state (both exact). `attention_mask` [B, T] marks real
    tokens (padding anywhere is an exact no-op). Returns y [B, T, hidden] in the
    compute dtype, plus the new `KDAState` when `return_state`.
    """
    batch, seq_len, _ = x.shape
    x = x.astype(self.dtype)
    mask = None if attention_mask is None else attention_mask.astype(bool)
    buffers = (None,) * 3 if state is None else state[:3]
    shape = (batch, seq_len, self.num_heads, self.head_dim)

    streams, new_buffers = [], []
    for proj, conv, buffer in zip((self.q_proj, self.k_proj, self.v_proj),
                                  (self.q_conv1d, self.k_conv1d, self.v_conv1d), buffers):
      y, new_buffer = kda_ops.causal_conv1d(proj(x), conv[...], buffer, mask)
      streams.append(constrain(jax.nn.silu(y).reshape(shape), _ACT_AXES))
      new_buffers.append(new_buffer)
    q, k, v = streams
    q, k = kda_ops.l2_normalize(q), kda_ops.l2_normalize(k)

    g = self._decay(x)
    beta = jax.nn.sigmoid(self.b_proj(x).astype(jnp.float32))
    if mask is not None:
      g = jnp.where(mask[..., None, None], g, 0.0)
      beta = jnp.where(mask[..., None], beta, 0.0)

    initial = None if state is None else state.recurrent
    if initial is not None and seq_len < self.chunk_size:
      o, final = kda_ops.kda_recurrent(q, k, v, g, beta, initial_state=initial)
    else:
      o, final = kda_ops.kda_chunked(q, k, v, g, beta, chunk_size=self.chunk_size,
                                     initial_state=initial,
                                     min_log_decay=self.gate_lower_bound,
                                     chunks_per_step=self.chunks_per_step)

    o = constrain(o, _ACT_AXES)
    gate = self.g_proj(x).reshape(shape)
    o = self.o_norm(o, gate).astype(self.dtype).reshape(batch, seq_len, -1)
    out = self.o_proj(o)
    if return_state:
      return out, KDAState(*new_buffers, final)
    return out


# ---- checkpoint conversion ------------------------------------------------------

# Accepted spellings, relative to the layer prefix: first is what transformers 5.24's
# `save_pretrained` writes (the official checkpoint names), then its in-memory names.
_HF_NAMES = {
    "q_proj": ("q_proj.weight",),
    "k_proj": ("k_proj.weight",),
    "v_proj": ("v_proj.weight",),
    "f_proj": ("f_proj.weight", "forget_gate.f_proj.weight"),
    "b_proj": ("b_proj.weight",),
    "g_proj": ("g_proj.weight",),
    "o_proj": ("dense.weight", "o_proj.weight"),
    "A_log": ("A_log", "forget_gate.A_log"),
    "dt_bias": ("dt_bias", "forget_gate.dt_bias"),
    "o_norm": ("o_norm.weight",),
    "q_conv1d": ("q_conv1d.weight",),
    "k_conv1d": ("k_conv1d.weight",),
    "v_conv1d": ("v_conv1d.weight",),
}
_FUSED_CONV = "conv1d.weight"


def kda_params_from_hf(tensors: Mapping[str, np.ndarray], prefix: str, *,
                       param_dtype=None) -> tuple[dict[str, Any], set[str]]:
  """Converts one KDA layer's checkpoint tensors to a nested dict for `nnx.update`.

  Accepts either conv spelling (one fused `conv1d.weight` [3*W, 1, k] or
  `q_conv1d/k_conv1d/v_conv1d.weight` [W, 1, k]), `f_proj/dt_bias/A_log` bare or under
  `forget_gate.`, and the output projection as `dense` or `o_proj`. Projection kernels
  are transposed to [in, out] and cast to `param_dtype` (if given); conv kernels
  ([k, W]), `A_log`, `dt_bias` and the norm weight are float32.

  Returns:
    (params, consumed keys). Raises KeyError naming every missing tensor.
  """
  consumed: set[str] = set()
  missing: list[str] = []

  def take(field: str) -> np.ndarray | None:
    for name in _HF_NAMES[field]:
      if prefix + name in tensors:
        consumed.add(prefix + name)
        return np.asarray(tensors[prefix + name])
    missing.append(prefix + " | ".join(_HF_NAMES[field]))
    return None

  convs: dict[str, np.ndarray | None]
  if prefix + _FUSED_CONV in tensors:
    consumed.add(prefix + _FUSED_CONV)
    fused = np.asarray(tensors[prefix + _FUSED_CONV])
    convs = dict(zip(_CONVS, np.split(fused, 3, axis=0)))
  else:
    convs = {name: take(name) for name in _CONVS}
  linears = {name: take(name) for name in _PROJECTIONS}
  vectors = {name: take(name) for name in ("A_log", "dt_bias", "o_norm")}
  if missing:
    raise KeyError(f"KDA layer '{prefix}': missing tensors: {', '.join(missing)}")

  def f32(a):
    return np.asarray(a, np.float32)

  def kernel(w):
    w = np.ascontiguousarray(np.asarray(w).T)
    return w if param_dtype is None else np.asarray(jnp.asarray(w, param_dtype))

  params: dict[str, Any] = {name: {"kernel": kernel(w)} for name, w in linears.items()}
  for name, w in convs.items():
    params[name] = f32(w.reshape(w.shape[0], -1).T)
  params["A_log"] = f32(vectors["A_log"].reshape(-1))
  params["dt_bias"] = f32(vectors["dt_bias"].reshape(-1))
  params["o_norm"] = {"weight": f32(vectors["o_norm"])}
  return params, consumed


def load_kda_params_from_hf(module: KimiDeltaAttention, tensors: Mapping[str, np.ndarray],
                            prefix: str) -> set[str]:
  """Converts, checks shapes against `module`, casts to its dtypes and updates it.

  Returns the consumed keys; raises ValueError listing every shape mismatch.
  """
  params, consumed = kda_params_from_hf(tensors, prefix)
  current = nnx.to_pure_dict(nnx.state(module, nnx.Param))
  flat_new = dict(traverse_util.flatten_dict(params))
  flat_cur = dict(traverse_util.flatten_dict(current))
  problems = [f"{'.'.join(path)}: checkpoint {value.shape} vs model {flat_cur[path].shape}"
              for path, value in flat_new.items() if value.shape != flat_cur[path].shape]
  if problems:
    raise ValueError(f"KDA layer '{prefix}': shape mismatch: {'; '.join(problems)}")
  cast = {path: jnp.asarray(value, flat_cur[path].dtype) for path, value in flat_new.items()}
  nnx.update(module, traverse_util.unflatten_dict(cast))
  return consumed


def kda_params_to_hf(module: KimiDeltaAttention, prefix: str) -> dict[str, np.ndarray]:
  """The layer's tensors in the names and layouts transformers 5.24 saves and loads."""
  def array(v):
    return np.asarray(jax.device_get(v[...]))

  out = {}
  for name in _PROJECTIONS:
    out[prefix + _HF_NAMES[name][0]] = np.ascontiguousarray(array(getattr(module, name).kernel).T)
  for name in _CONVS:  # [k, W] -> PyTorch depthwise Conv1d [W, 1, k]
    kernel = array(getattr(module, name)).T[:, None, :]
    out[prefix + _HF_NAMES[name][0]] = np.ascontiguousarray(kernel)
  out[prefix + "A_log"] = array(module.A_log)
  out[prefix + "dt_bias"] = array(module.dt_bias)
  out[prefix + "o_norm.weight"] = array(module.o_norm.weight)
  return out
