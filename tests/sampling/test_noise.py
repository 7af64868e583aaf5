"""The decode loop's Gumbel noise: jax.random's values bit for bit, with no loop left in
the compiled decode body but the token loop itself."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.sampling import noise
from tests.sampling import test_decode_layout


def reference(keys: jax.Array, step: int, vocab: int) -> jax.Array:
  return jax.vmap(lambda key: jax.random.gumbel(
      jax.random.fold_in(key, step), (vocab,), jnp.float32))(keys)


def row_keys(seed: int, rows: int, impl: str | None = None) -> jax.Array:
  return jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(seed, impl=impl),
                                                 jnp.arange(rows))


class GumbelRowsTest(parameterized.TestCase):

  @parameterized.parameters(  # (seed, rows, vocab, step): odd sizes, large steps
      (0, 24, 3520, 5), (3, 7, 701, 0), (9, 5, 49152, 1234567), (2, 1, 1, 2**31 - 1))
  def test_the_same_bits_as_jax_random(self, seed, rows, vocab, step):
    keys = row_keys(seed, rows)
    want = jax.jit(reference, static_argnums=(1, 2))(keys, step, vocab)
    got = jax.jit(noise.gumbel_rows, static_argnums=2)(keys, jnp.int32(step), vocab)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32),
                                  np.asarray(want).view(np.uint32))

  def test_the_hash_is_jax_randoms_threefry(self):
    key = jax.random.key_data(jax.random.key(42))
    counters = jnp.arange(10, dtype=jnp.uint32)
    want = jax.random.key_data(jax.vmap(jax.random.fold_in, (None, 0))(
        jax.random.key(42), counters))
    got = noise.threefry2x32(key[0], key[1], jnp.zeros((), jnp.uint32), counters)
    np.testing.assert_array_equal(np.stack(got, -1), want)

  def test_other_keys_fall_back_to_jax_random(self):
    keys = row_keys(1, 3, impl="rbg")
    np.testing.assert_array_equal(noise.gumbel_rows(keys, jnp.int32(4), 50),
                                  reference(keys, 4, 50))

  def test_no_loop_in_the_decode_body_but_the_token_loop(self):
    # jax.random's threefry lowers on CPU as a loop of 5 iterations: two of them
    # (fold_in and the bits) ran inside the token loop before.
    model = test_decode_layout._model()
    hlo = test_decode_layout.lowered_decode(model, rows=4).compile().as_text()
    self.assertEqual(hlo.count(" while("), 1)


if __name__ == "__main__":
  absltest.main()
