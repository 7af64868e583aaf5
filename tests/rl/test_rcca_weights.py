"""RCCA effective weights (docs/method.md#6-asymmetric-effective-weights) and their
magnitude control (`negative_mean_weights`) against numpy references."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from tests.fixtures.np_reference import np_effective_weights, np_negative_mean_weights
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


class NegativeMeanWeightsTest(parameterized.TestCase):

  @parameterized.parameters(0.0, 0.5, 1.0)
  def test_matches_numpy_and_totals_equal_rcca(self, nu):
    rng = np.random.default_rng(2)
    wbar = rng.choice([1.0, 1.0, 1.5, 3.0, 4.0], (12, 10)).astype(np.float32)
    adv = rng.choice([-1.3, -0.2, 0.0, 0.9], 12).astype(np.float32)
    mask = (np.arange(10)[None] < rng.integers(0, 11, 12)[:, None]).astype(np.float32)
    got = rcca.negative_mean_weights(jnp.asarray(wbar), jnp.asarray(adv),
                                     jnp.asarray(mask), negative_unblamed=nu)
    # float32 mean of <= 10 weights: relative error <= gamma_10 ~ 10 u = 6e-7 (u = 2^-24).
    np.testing.assert_allclose(got, np_negative_mean_weights(wbar, adv, mask, nu),
                               rtol=1e-6)
    self.assertEqual(got.dtype, jnp.float32)
    effective = rcca.effective_weights(jnp.asarray(wbar), jnp.asarray(adv),
                                       negative_unblamed=nu)
    negative = adv < 0
    # factor * n against the direct sum: each within gamma_11 of the exact total (< 1e-6).
    np.testing.assert_allclose((np.asarray(got) * mask).sum(1)[negative],
                               (np.asarray(effective) * mask).sum(1)[negative], rtol=1e-5)

  def test_hand_made_batch_under_focus(self):
    wbar = jnp.asarray([[1.0, 3.0, 3.0, 1.0],   # negative: 6 over 4 tokens
                        [1.0, 1.0, 1.0, 1.0],   # negative, nothing blamed: 0
                        [1.0, 4.0, 1.0, 1.0],   # negative, 2 response tokens: 4 / 2
                        [1.0, 3.0, 1.0, 1.0]])  # positive: RCCA's c / positive_blamed
    mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1]])
    got = rcca.negative_mean_weights(wbar, jnp.asarray([-1.0, -0.5, -0.1, 0.7]), mask,
                                     negative_unblamed=0.0)
    np.testing.assert_allclose(got, [[1.5] * 4, [0.0] * 4, [2.0] * 4, [1.2, 1.0, 1.2, 1.2]])

  def test_jittable(self):
    got = jax.jit(rcca.negative_mean_weights)(jnp.full((2, 3), 3.0),
                                              jnp.asarray([-1.0, 1.0]), jnp.ones((2, 3)))
    np.testing.assert_allclose(got, [[3.0] * 3, [1.0] * 3])  # wbar 3 > 1: blamed


if __name__ == "__main__":
  absltest.main()
