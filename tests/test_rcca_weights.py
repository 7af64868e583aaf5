"""RCCA effective weights (docs/method.md#6-asymmetric-effective-weights) against a numpy
reference."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from np_reference import np_effective_weights
from rcca_jax.rl import rcca


class EffectiveWeightsTest(parameterized.TestCase):

  @parameterized.parameters((1.2, 1.0), (1.5, 0.5), (1.0, 1.0))
  def test_matches_numpy_on_random_inputs(self, c, positive_blamed):
    rng = np.random.default_rng(0)
    wbar = rng.choice([1.0, 1.5, 2.5, 3.0, 4.0], (16, 20)).astype(np.float32)
    adv = rng.choice([-1.3, -1e-7, 0.0, 1e-7, 0.9], 16).astype(np.float32)
    got = rcca.effective_weights(jnp.asarray(wbar), jnp.asarray(adv), c=c,
                                 positive_blamed=positive_blamed)
    np.testing.assert_array_equal(got, np_effective_weights(wbar, adv, c,
                                                            positive_blamed))
    self.assertEqual(got.dtype, jnp.float32)

  def test_negative_unblamed_one_is_todays_formula_exactly(self):
    rng = np.random.default_rng(1)
    wbar = rng.choice([0.5, 1.0, 1.5, 3.0, 4.0], (16, 20)).astype(np.float32)
    adv = rng.choice([-1.3, -1e-7, 0.0, 0.9], 16).astype(np.float32)
    got = rcca.effective_weights(jnp.asarray(wbar), jnp.asarray(adv), c=1.2,
                                 negative_unblamed=1.0)
    np.testing.assert_array_equal(got, np_effective_weights(wbar, adv, 1.2, 1.0))

  @parameterized.parameters(0.0, 0.25)
  def test_negative_unblamed_weights_the_unblamed_tokens_of_negative_responses(self, nu):
    wbar = jnp.asarray([[1.0, 1.5, 3.0, 4.0]] * 2)
    got = rcca.effective_weights(wbar, jnp.asarray([-0.5, 0.7]), negative_unblamed=nu)
    np.testing.assert_allclose(got, [[nu, 1.5, 3.0, 4.0],  # blamed tokens keep wbar
                                     [1.2, 1.0, 1.0, 1.0]])  # positive: unchanged

  def test_method_examples(self):
    wbar = jnp.asarray([[1.0, 1.5, 3.0, 4.0]] * 3)
    got = rcca.effective_weights(wbar, jnp.asarray([-0.5, 0.0, 0.7]))
    np.testing.assert_allclose(got, [[1.0, 1.5, 3.0, 4.0],   # negative: wbar
                                     [1.2, 1.0, 1.0, 1.0],   # zero counts as >= 0
                                     [1.2, 1.0, 1.0, 1.0]])

  def test_jittable_and_shape_errors(self):
    wbar = jnp.ones((2, 3))
    got = jax.jit(rcca.effective_weights)(wbar, jnp.asarray([1.0, -1.0]))
    np.testing.assert_allclose(got, [[1.2] * 3, [1.0] * 3])
    with self.assertRaisesRegex(ValueError, "expected wbar"):
      rcca.effective_weights(jnp.ones(3), jnp.ones(3))


if __name__ == "__main__":
  absltest.main()
