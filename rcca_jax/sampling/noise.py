"""The decode loop's Gumbel noise, equal bit for bit to `jax.random`'s, with the hash
written out round by round.

Each sampled token draws a vocabulary's worth of Gumbel noise per row,
`jax.random.gumbel(jax.random.fold_in(row_key, step), (vocab,), float32)`. JAX lowers its
Threefry-2x32 hash on CPU as a loop over the hash's five groups of four rounds (to keep
compile times down); inside the decode loop XLA then runs each group as separate
passes over the [rows, vocab] counters, so drawing the noise took as long as a
tiny model's forward pass (1.0 of 2.5 ms a token for `make demo`'s model at 24 rows).
`gumbel_rows` computes the same values from the same counters, the twenty rounds
unrolled so that XLA fuses them into one pass. It applies to JAX's default keys
(threefry, `jax_threefry_partitionable`, the "low" Gumbel mode) and falls back to
`jax.random` for any other setting.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32's rotation constants
_PARITY = np.uint32(0x1BD11BDA)  # the key schedule's parity constant


def _rotate_left(x: jax.Array, bits: int) -> jax.Array:
  return (x << np.uint32(bits)) | (x >> np.uint32(32 - bits))


def threefry2x32(k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
  """Threefry-2x32 with 20 rounds (Salmon et al. 2011) of the counter words (x1, x2)
  under the key words (k1, k2); uint32 arrays that broadcast together."""
  ks = (k1, k2, k1 ^ k2 ^ _PARITY)
  x1, x2 = x1 + ks[0], x2 + ks[1]
  for group in range(5):
    for bits in _ROTATIONS[group % 2]:
      x1 = x1 + x2
      x2 = x1 ^ _rotate_left(x2, bits)
    x1 = x1 + ks[(group + 1) % 3]
    x2 = x2 + ks[(group + 2) % 3] + np.uint32(group + 1)
  return x1, x2


def _exact() -> bool:
  """Whether this JAX draws bits as `gumbel_rows` does."""
  return (jax.config.jax_threefry_partitionable
          and not jax.config.jax_high_dynamic_range_gumbel)


def jax_random_rows(row_keys: jax.Array, step: jax.Array, vocab: int) -> jax.Array:
  """[B, vocab] float32: row b's `jax.random.gumbel(jax.random.fold_in(row_keys[b],
  step), (vocab,), jnp.float32)`, drawn by `jax.random` (the loop's noise before)."""
  return jax.vmap(lambda key: jax.random.gumbel(
      jax.random.fold_in(key, step), (vocab,), jnp.float32))(row_keys)


def gumbel_rows(row_keys: jax.Array, step: jax.Array, vocab: int) -> jax.Array:
  """`jax_random_rows`' values, the hash written out where the keys allow (typed
  threefry keys under JAX's default settings)."""
  if str(jax.random.key_impl(row_keys)) != "threefry2x32" or not _exact():
    return jax_random_rows(row_keys, step, vocab)
  data = jax.random.key_data(row_keys)  # [B, 2] uint32
  # fold_in: the key hashed with the counter (0, step).
  zero = jnp.zeros((), jnp.uint32)
  k1, k2 = threefry2x32(data[:, 0], data[:, 1], zero, jnp.asarray(step, jnp.uint32))
  # 32 random bits per element: the two words of the hash of the counter (0, i), xored.
  counters = jnp.arange(vocab, dtype=jnp.uint32)[None]
  b1, b2 = threefry2x32(k1[:, None], k2[:, None], zero, counters)
  bits = b1 ^ b2
  # uniform(tiny, 1): 23 random mantissa bits under exponent 0, minus 1.
  one = np.array(1.0, np.float32).view(np.uint32)
  floats = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | one, jnp.float32) - 1.0
  tiny = jnp.float32(np.finfo(np.float32).tiny)
  uniform = jnp.maximum(tiny, floats * (jnp.float32(1.0) - tiny) + tiny)
  return -jnp.log(-jnp.log(uniform))
