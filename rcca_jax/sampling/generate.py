"""Batched autoregressive sampling from `LingForCausalLM` with a jitted decode loop.

`generate(model, prompts, ...)` left-pads the prompts into one batch (an
`attention_mask` marks real tokens; RoPE positions and the KDA/MLA states skip the
padding), fills the decoding cache with a jitted prefill that runs over the prompt in
fixed-size chunks (the KDA layers use their chunked form for chunks of at least
`kda_chunk_size` tokens), then samples every new token inside one jitted
`lax.while_loop`. The loop carries the `LingCache` (KDA conv buffers and float32
recurrent states, the MLA compressed latent and rotated rope key) and stops when every
row has emitted an end token or `max_new_tokens` are done; once half the rows or more
have finished, the rows still decoding move to a batch of half the size (or less) and
the loop goes on there, so finished rows stop costing (without a mesh). The cache starts
with room for `grow` new tokens and gains `grow` slots each time the rows reach its end,
so attention reads the slots written so far, not the longest possible sample's. The
cache is donated from each jitted call to the next, so it is updated in place.

Shapes are bucketed (batch, prompt length, new tokens) so that a run recompiles only
when a bucket changes; temperature, top-p, top-k, the seed and the end tokens are
traced values (only "greedy", "plain sampling" and "filtered sampling" compile apart).

Log-probabilities are those of the chosen token under `softmax(logits / temperature)`
(under `softmax(logits)` for greedy decoding, `temperature=0`), before any top-k/top-p
filtering: what a trainer recomputes from a full forward over prompt + sample.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rcca_jax.parallel import partitioning
from rcca_jax.sampling import noise as noise_lib

PREFILL_CHUNK = 256  # Prompt tokens per prefill call (bounds activation memory).
GROW = 64  # Cache slots for new tokens allocated at a time (see `generate`).

GREEDY, SAMPLE, FILTERED = "greedy", "sample", "filtered"


@dataclasses.dataclass(frozen=True)
class SampleOutput:
  """Sampled continuations (host numpy arrays).

  tokens: [B, max_new_tokens] int32; after a row's end token, `pad_id`.
  logprobs: [B, max_new_tokens] float32 log-probability of each chosen token; 0 after
    the end.
  lengths: [B] int32 number of generated tokens, the end token included.
  """
  tokens: np.ndarray
  logprobs: np.ndarray
  lengths: np.ndarray


# ---- token choice (pure) --------------------------------------------------------


def filter_logits(logits: jax.Array, top_p: jax.Array, top_k: jax.Array) -> jax.Array:
  """Sets logits outside the top-k, then outside the top-p nucleus, to -inf.

  logits [B, V] float32 (already divided by the temperature); `top_k` <= 0 keeps every
  token; the nucleus is the smallest set of most likely tokens (of the top-k
  distribution, renormalised) whose probability reaches `top_p`. Always keeps the
  most likely token.
  """
  vocab = logits.shape[-1]
  ordered = -jnp.sort(-logits, axis=-1)  # Descending.
  k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)
  in_top_k = jnp.arange(vocab) < k
  probs = jax.nn.softmax(jnp.where(in_top_k, ordered, -jnp.inf), axis=-1)
  mass_before = jnp.cumsum(probs, axis=-1) - probs
  kept = jnp.minimum(jnp.sum(mass_before < top_p, axis=-1), k)
  kept = jnp.maximum(kept, 1)
  threshold = jnp.take_along_axis(ordered, (kept - 1)[:, None], axis=-1)
  return jnp.where(logits >= threshold, logits, -jnp.inf)


def first_argmax(x: jax.Array) -> jax.Array:
  """`jnp.argmax(x, axis=-1)` for finite x (the first index of the maximum) as two
  plain reductions: XLA's CPU backend runs argmax's (value, index) reduction several
  times slower, and the decode loop pays it every token."""
  top = jnp.max(x, axis=-1, keepdims=True)
  index = jnp.arange(x.shape[-1], dtype=jnp.int32)
  return jnp.min(jnp.where(x == top, index, x.shape[-1] - 1), axis=-1)


def gumbel_choice(noise: jax.Array, scaled: jax.Array) -> jax.Array:
  """`jax.random.categorical(key, row)` per row, given the rows' Gumbel noise (the
  noise `jax.random.categorical` draws from each row's key: `noise.gumbel_rows`), its
  argmax by `first_argmax`."""
  return first_argmax(noise + scaled)


def choose_tokens(logits: jax.Array, noise: jax.Array | None, *, mode: str,
                  temperature: jax.Array, top_p: jax.Array,
                  top_k: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Picks one token per row and its log-probability.

  Args:
    logits: [B, V] next-token logits.
    noise: [B, V] Gumbel noise (`noise.gumbel_rows`; None for GREEDY).
    mode: GREEDY (argmax), SAMPLE (softmax(logits / temperature)) or FILTERED
      (SAMPLE restricted by `filter_logits`).
    temperature, top_p, top_k: scalars (ignored where the mode does not use them).

  Returns:
    (tokens [B] int32, log-probs [B] float32 under softmax(logits / temperature),
    or softmax(logits) for GREEDY; never renormalised by top-p/top-k).
  """
  logits = logits.astype(jnp.float32)
  if mode == GREEDY:
    tokens = first_argmax(logits)
    logp = jax.nn.log_softmax(logits, axis=-1)
  else:
    scaled = logits / temperature
    logp = jax.nn.log_softmax(scaled, axis=-1)
    if mode == FILTERED:
      scaled = filter_logits(scaled, top_p, top_k)
    tokens = gumbel_choice(noise, scaled)
  tokens = tokens.astype(jnp.int32)
  return tokens, jnp.take_along_axis(logp, tokens[:, None], axis=-1)[:, 0]


# ---- bucketing ------------------------------------------------------------------


def _next_pow2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


def _round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def batch_bucket(batch: int, shards: int = 1) -> int:
  """Rows the compiled batch has: a power of two up to 16, then multiples of 8 (24 rows
  decode as 24, not 32: a step costs about its rows), rounded up to a multiple of the
  number of batch shards."""
  rows = _next_pow2(batch) if batch <= 16 else _round_up(batch, 8)
  return _round_up(rows, shards)


def prompt_bucket(length: int, chunk: int) -> int:
  """Padded prefill length: 0 for nothing, else a power of two (at least 8) up to 64,
  multiples of 64 up to `chunk`, then multiples of `chunk` (every decoded token attends
  over the padding too, so the steps above 64 stay small)."""
  if length == 0:
    return 0
  if length <= chunk:
    return min(max(8, _next_pow2(length)) if length <= 64 else _round_up(length, 64), chunk)
  return _round_up(length, chunk)


def new_tokens_bucket(n: int) -> int:
  """Static length of the output buffers: a power of two (at least 8)."""
  return max(8, _next_pow2(n))


# ---- sharding -------------------------------------------------------------------


def _batch_axes(mesh: Mesh | None) -> Any:
  """Mesh axes the batch is split over (None without a mesh)."""
  if mesh is None:
    return None
  spec = partitioning.logical_to_spec(("batch",), mesh.axis_names, dict(mesh.shape))
  return spec[0]


def _batch_shards(mesh: Mesh | None) -> int:
  axes = _batch_axes(mesh)
  if axes is None:
    return 1
  names = (axes,) if isinstance(axes, str) else axes
  return math.prod(mesh.shape[n] for n in names)


def _constrain_batch(tree: Any, mesh: Mesh | None, batch_axis: int) -> Any:
  """Shards every array's `batch_axis` over the data axes (scalars replicated)."""
  axes = _batch_axes(mesh)
  if axes is None:
    return tree

  def one(x):
    if x.ndim <= batch_axis:
      return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec()))
    spec = [None] * x.ndim
    spec[batch_axis] = axes
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec(*spec)))

  return jax.tree.map(one, tree)


# Fields of a decoding cache and the axis of their rows (`LlamaCache`, `LingCache`):
# stacked group states have batch on axis 1.
_CACHE_ROW_AXES = {"index": 0, "slot_mask": 0, "positions": 0, "prefix": 0, "groups": 1}


def _constrain_cache(cache: Any, mesh: Mesh | None) -> Any:
  """Batch sharding of a decoding cache (`_CACHE_ROW_AXES`)."""
  if mesh is None:
    return cache
  return cache.replace(**{name: _constrain_batch(getattr(cache, name), mesh, axis)
                          for name, axis in _CACHE_ROW_AXES.items()})


# ---- jitted stages --------------------------------------------------------------


class _Graph:
  """A module's graphdef as a static jit argument.

  `LingConfig` may hold dicts (e.g. `rope_parameters`), which makes the graphdef
  unhashable; the hash then comes from the config's repr (equality stays exact).
  """

  def __init__(self, graphdef, config):
    self.graphdef = graphdef
    try:
      self._hash = hash(graphdef)
    except TypeError:
      self._hash = hash((type(config).__name__, repr(config)))

  def __hash__(self):
    return self._hash

  def __eq__(self, other):
    return isinstance(other, _Graph) and self.graphdef == other.graphdef


@functools.partial(jax.jit, static_argnames=("graphdef", "batch", "max_len", "mesh"))
def _init_cache(graphdef, params, *, batch: int, max_len: int, mesh: Mesh | None):
  model = nnx.merge(graphdef.graphdef, params)
  return _constrain_cache(model.init_cache(batch, max_len), mesh)


@functools.partial(jax.jit, static_argnames=("graphdef", "mesh"), donate_argnames=("cache",))
def _prefill_chunk(graphdef, params, cache, ids, mask, *, mesh: Mesh | None):
  """Runs one prompt chunk through the model into the cache.

  The logits are unused, so XLA drops the LM head: a chunk never materialises
  [B, T, vocab] logits. The last prompt token goes through the decode loop instead.
  """
  model = nnx.merge(graphdef.graphdef, params)
  _, cache = model(ids, attention_mask=mask, cache=cache)
  return _constrain_cache(cache, mesh)


@functools.partial(jax.jit, static_argnames=("graphdef", "mode", "buffer_len", "mesh"),
                   donate_argnames=("cache",))
def _decode(graphdef, params, cache, last_tokens, row_keys, finished, start, stop_below,
            max_new_tokens, temperature, top_p, top_k, eos_ids, pad_id, *, mode: str,
            buffer_len: int, mesh: Mesh | None):
  """Samples tokens `start`, `start + 1`, ... per row in a `lax.while_loop`, until
  `max_new_tokens` are done, every row has finished, or no more than `stop_below` rows
  are still active (then `generate` moves them to a smaller batch and calls again).

  Step s feeds the previous token (at s = 0 the last prompt token, `last_tokens` [B])
  and samples token s from the logits. `finished` [B] marks rows that take no part
  (batch padding, or finished before `start`); finished rows feed masked tokens, which
  leave their state as is. Returns (tokens [B, buffer_len] and logprobs, written from
  `start` on; lengths [B] counted from `start`; the cache; the next step; each row's
  last token; which rows have finished).
  """
  batch = last_tokens.shape[0]
  model = nnx.merge(graphdef.graphdef, params)
  # Each layer's weights sliced out of the stack once, not at every token (XLA copies
  # a slice that feeds a matmul): on CPU only, where it was measured; elsewhere the
  # copy would hold the layer weights twice in accelerator memory.
  layers = ({"layers": model.split_layers()}
            if hasattr(model, "split_layers") and jax.default_backend() == "cpu" else {})

  def cond(carry):
    step, _, _, _, _, _, done = carry
    return ((step < max_new_tokens) & ~jnp.all(done)
            & (jnp.sum(~done) > stop_below))

  def body(carry):
    step, cache, previous, tokens, logprobs, lengths, done = carry
    model = nnx.merge(graphdef.graphdef, params)
    active = ~done
    logits, cache = model(previous[:, None], attention_mask=active[:, None], cache=cache,
                          **layers)
    noise = (None if mode == GREEDY
             else noise_lib.gumbel_rows(row_keys, step, logits.shape[-1]))
    new, logp = choose_tokens(logits[:, 0], noise, mode=mode, temperature=temperature,
                              top_p=top_p, top_k=top_k)
    new = jnp.where(active, new, pad_id)
    tokens = tokens.at[:, step].set(new)
    logprobs = logprobs.at[:, step].set(jnp.where(active, logp, 0.0))
    lengths = lengths + active.astype(jnp.int32)
    done = done | jnp.isin(new, eos_ids)
    return (step + 1, _constrain_cache(cache, mesh), new, tokens, logprobs, lengths, done)

  carry = (start, cache, last_tokens,
           jnp.full((batch, buffer_len), pad_id, jnp.int32),
           jnp.zeros((batch, buffer_len), jnp.float32),
           jnp.zeros((batch,), jnp.int32), finished)
  step, cache, previous, tokens, logprobs, lengths, done = jax.lax.while_loop(
      cond, body, carry)
  return tokens, logprobs, lengths, cache, step, previous, done


@functools.partial(jax.jit, donate_argnames=("cache",))
def take_cache_rows(cache, picked):
  """The cache of rows `picked` (every per-row state gathered along its row axis;
  shared ones, such as a scalar index, kept)."""
  batch = cache.slot_mask.shape[0]
  def take(x, axis):
    return jnp.take(x, picked, axis=axis) if x.ndim > axis and x.shape[axis] == batch else x
  return cache.replace(**{name: jax.tree.map(lambda x, a=axis: take(x, a), getattr(cache, name))
                          for name, axis in _CACHE_ROW_AXES.items()})


@functools.partial(jax.jit, static_argnames=("graphdef", "max_len", "mesh"))
def _grow_cache(graphdef, params, cache, *, max_len: int, mesh: Mesh | None):
  """`cache` with `max_len` slots: every state with a slot axis copied to the front of
  an empty one of the new length (slots fill from 0, so the new ones are free); states
  without one (an index, recurrent states) kept."""
  model = nnx.merge(graphdef.graphdef, params)
  empty = model.init_cache(cache.slot_mask.shape[0], max_len)
  def grow(old, new):
    if old.shape == new.shape:
      return old
    return jax.lax.dynamic_update_slice(new, old.astype(new.dtype), (0,) * old.ndim)
  return _constrain_cache(jax.tree.map(grow, cache, empty), mesh)


# ---- public entry points --------------------------------------------------------


def _on_mesh(mesh: Mesh | None):
  return jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext()


def init_cache(model: nnx.Module, batch: int, max_len: int, *, mesh: Mesh | None = None):
  """The empty decoding cache `generate` starts from, with the batch axis of every
  state over the mesh's data axes (stacked group states: axis 1)."""
  graphdef, params = nnx.split(model)
  with _on_mesh(mesh):
    return _init_cache(_Graph(graphdef, model.config), params, batch=batch,
                       max_len=max_len, mesh=mesh)


def _check_request(prompts: Sequence[Sequence[int]], vocab_size: int, max_new_tokens: int,
                   temperature: float, top_p: float, top_k: int, prefill_chunk: int,
                   grow: int) -> None:
  problems = []
  if not prompts:
    problems.append("no prompts given")
  for i, prompt in enumerate(prompts):
    if len(prompt) == 0:
      problems.append(f"prompt {i} is empty")
      continue
    bad = [int(t) for t in prompt if not 0 <= int(t) < vocab_size]
    if bad:
      problems.append(f"prompt {i} has token ids outside [0, {vocab_size}): {bad[:5]}")
  if max_new_tokens < 1:
    problems.append(f"max_new_tokens={max_new_tokens} must be >= 1")
  if not temperature >= 0:
    problems.append(f"temperature={temperature} must be >= 0")
  if not 0 < top_p <= 1:
    problems.append(f"top_p={top_p} must be in (0, 1]")
  if top_k < 0:
    problems.append(f"top_k={top_k} must be >= 0 (0 disables it)")
  if prefill_chunk < 1:
    problems.append(f"prefill_chunk={prefill_chunk} must be >= 1")
  if grow < 0:
    problems.append(f"grow={grow} must be >= 0 (0 allocates every slot at once)")
  if problems:
    raise ValueError("generate: " + "; ".join(problems))


def _sampling_mode(temperature: float, top_p: float, top_k: int) -> str:
  if temperature == 0:
    return GREEDY
  return FILTERED if (top_k > 0 or top_p < 1) else SAMPLE


def _left_pad(prompts: Sequence[Sequence[int]], rows: int, length: int,
              pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(ids [rows, length], mask [rows, length], last tokens [rows]): every prompt but
  its last token, right-aligned; batch-padding rows are all padding."""
  ids = np.full((rows, length), pad_id, np.int32)
  mask = np.zeros((rows, length), bool)
  last = np.full((rows,), pad_id, np.int32)
  for i, prompt in enumerate(prompts):
    body = np.asarray(prompt[:-1], np.int32)
    ids[i, length - len(body):] = body
    mask[i, length - len(body):] = True
    last[i] = prompt[-1]
  return ids, mask, last


def _decode_compacting(graphdef, params, cache, last, row_keys, finished, rows: int,
                       max_new_tokens: int, temperature: float, top_p: float, top_k: int,
                       eos: np.ndarray, pad_id: int, buffer_len: int, mesh: Mesh | None,
                       compact: bool, prefill_len: int,
                       grow: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Runs `_decode`, in segments:
  - with `compact` and no mesh, each time the active rows fit a batch bucket half the
    size or less, moves them (cache, last token, keys) to that smaller batch, so
    finished rows stop costing;
  - with `grow`, the cache holds `grow` slots more than the prompt at first and gains
    `grow` more each time the rows reach its end, so each token attends over the slots
    written so far (rounded up to `grow`), not over the longest possible sample.
  Row r's tokens depend only on (seed, r, step) and its own state, so they are the same
  either way (log-probs to float32 rounding: XLA may sum a smaller batch's matmuls, or a
  shorter cache's softmax, in another order). Host arrays [rows, buffer_len]."""
  tokens = np.full((rows, buffer_len), pad_id, np.int32)
  logprobs = np.zeros((rows, buffer_len), np.float32)
  lengths = np.zeros((rows,), np.int32)
  mode = _sampling_mode(temperature, top_p, top_k)
  scalars = (jnp.float32(temperature or 1.0), jnp.float32(top_p), jnp.int32(top_k),
             jnp.asarray(eos), jnp.int32(pad_id))
  ids = np.arange(rows)  # original row of each row of the current batch
  start, done = 0, finished
  while True:
    stop_below = len(ids) // 2 if compact and mesh is None and len(ids) > 1 else -1
    room = cache.slot_mask.shape[1] - prefill_len  # new tokens the cache holds
    t, lp, n, cache, step, last, done = _decode(
        graphdef, params, cache, last, row_keys, done, jnp.int32(start),
        jnp.int32(stop_below), jnp.int32(min(max_new_tokens, room)), *scalars, mode=mode,
        buffer_len=buffer_len, mesh=mesh)
    t, lp, n, step, done = jax.device_get((t, lp, n, step, done))
    tokens[ids, start:step], logprobs[ids, start:step] = t[:, start:step], lp[:, start:step]
    lengths[ids] += n
    active = np.flatnonzero(~done)
    if step >= max_new_tokens or not len(active):
      return tokens, logprobs, lengths
    if len(active) <= stop_below:
      size = batch_bucket(len(active))
      picked = np.concatenate([active, np.flatnonzero(done)[:size - len(active)]])
      cache = take_cache_rows(cache, jnp.asarray(picked))
      last, row_keys = jnp.take(last, picked, axis=0), jnp.take(row_keys, picked, axis=0)
      done = np.arange(size) >= len(active)  # the filler rows take no part
      ids = ids[picked]
    if step >= room:
      cache = _grow_cache(graphdef, params, cache, mesh=mesh,
                          max_len=prefill_len + min(buffer_len, room + grow))
    start = int(step)


def generate(model: nnx.Module, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
             eos_ids: Sequence[int] = (), pad_id: int | None = None,
             mesh: Mesh | None = None, prefill_chunk: int = PREFILL_CHUNK,
             compact: bool = True, grow: int = GROW) -> SampleOutput:
  """Samples a continuation of every prompt (see the module docstring).

  Args:
    model: a `LingForCausalLM` (anything with its `init_cache` / cached-call API).
    prompts: token-id lists, of different lengths.
    max_new_tokens: tokens to generate per prompt at most.
    temperature: softmax temperature; 0 decodes greedily.
    top_p: nucleus mass (1 disables); top_k: keep the k most likely tokens (0 disables).
    seed: sampling seed; row i's randomness depends only on (seed, i, step).
    eos_ids: end tokens; a row stops after emitting one.
    pad_id: filler after the end (default: the config's pad_token_id, else 0).
    mesh: when given, the batch is split over its data axes (`partitioning` rules);
      the model's parameters should already be placed on it (`shard_module`).
    prefill_chunk: prompt tokens per prefill call.
    compact: move the rows still decoding to a smaller batch once half or more have
      finished (without a mesh; the same tokens, log-probs to float32 rounding, fewer
      rows computed).
    grow: cache slots for new tokens allocated at a time (0: all `max_new_tokens`, bucketed,
      at once); attention reads the allocated slots, so a smaller `grow` reads fewer
      empty ones at the cost of one more compiled program per cache length (the same
      tokens, log-probs to float32 rounding).

  Returns:
    `SampleOutput` with tokens/logprobs [len(prompts), max_new_tokens] and lengths.
  """
  cfg = model.config
  _check_request(prompts, cfg.vocab_size, max_new_tokens, temperature, top_p, top_k,
                 prefill_chunk, grow)
  if pad_id is None:
    pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
  batch = len(prompts)
  rows = batch_bucket(batch, _batch_shards(mesh))
  prefill_len = prompt_bucket(max(len(p) for p in prompts) - 1, prefill_chunk)
  chunk = min(prefill_len, prefill_chunk) or 1
  buffer_len = new_tokens_bucket(max_new_tokens)
  ids, mask, last = _left_pad(prompts, rows, prefill_len, pad_id)

  graphdef, params = nnx.split(model)
  graphdef = _Graph(graphdef, cfg)
  key = jax.random.key(seed)
  row_keys = jax.vmap(jax.random.fold_in, (None, 0))(key, jnp.arange(rows))
  finished = np.arange(rows) >= batch
  eos = np.full((new_tokens_bucket(len(eos_ids)),), -1, np.int32)  # Fixed-size, no recompiles.
  eos[:len(eos_ids)] = list(eos_ids)
  if mesh is not None:
    rows_sharding = NamedSharding(mesh, PartitionSpec(_batch_axes(mesh)))
    ids, mask, last, finished, row_keys = (jax.device_put(x, rows_sharding)
                                           for x in (ids, mask, last, finished, row_keys))
  with _on_mesh(mesh):
    room = min(buffer_len, grow) if grow else buffer_len
    cache = _init_cache(graphdef, params, batch=rows, max_len=prefill_len + room,
                        mesh=mesh)
    for start in range(0, prefill_len, chunk):
      cache = _prefill_chunk(graphdef, params, cache, ids[:, start:start + chunk],
                             mask[:, start:start + chunk], mesh=mesh)
    out = _decode_compacting(graphdef, params, cache, last, row_keys, finished, rows,
                             max_new_tokens, temperature, top_p, top_k, eos, pad_id,
                             buffer_len, mesh, compact, prefill_len, grow)
  tokens, logprobs, lengths = out
  return SampleOutput(tokens=np.asarray(tokens[:batch, :max_new_tokens], np.int32),
                      logprobs=np.asarray(logprobs[:batch, :max_new_tokens], np.float32),
                      lengths=np.asarray(lengths[:batch], np.int32))
