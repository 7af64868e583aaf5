"""Optimizer choice (AdamW | SGD), optional clipping, and the step's clip metrics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized

from tests.fixtures import rl_fixtures
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts

PARAMS = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
GRADS = {"w": jnp.full((2, 3), 2.0), "b": jnp.asarray([1.0, -2.0, 2.0])}  # norm 5.74


def update(config, grads=GRADS, steps=1):
  opt = optim.make_optimizer(config)
  state = opt.init(PARAMS)
  for _ in range(steps):
    out, state = opt.update(grads, state, PARAMS)
  return out


def norm(tree):
  return float(jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(tree))))


class OptimizerConfigTest(parameterized.TestCase):

  def test_sgd_is_minus_lr_times_the_gradient_without_clipping(self):
    for off in (0.0, None):
      config = optim.OptimizerConfig(name="sgd", learning_rate=0.1, max_grad_norm=off,
                                     weight_decay=0.0)
      got = update(config)
      for k in GRADS:
        np.testing.assert_allclose(got[k], -0.1 * GRADS[k], rtol=1e-6)

  def test_clipping_scales_to_max_norm(self):
    config = optim.OptimizerConfig(name="sgd", learning_rate=1.0, max_grad_norm=1.0,
                                   weight_decay=0.0)
    self.assertAlmostEqual(norm(update(config)), 1.0, places=5)
    self.assertEqual(float(optim.clip_fired(jnp.asarray(norm(GRADS)), config)), 1.0)
    self.assertEqual(float(optim.clip_fired(jnp.asarray(0.5), config)), 0.0)
    off = optim.OptimizerConfig(max_grad_norm=0.0)
    self.assertEqual(float(optim.clip_fired(jnp.asarray(1e9), off)), 0.0)

  def test_sgd_momentum_and_weight_decay(self):
    config = optim.OptimizerConfig(name="sgd", learning_rate=0.1, momentum=0.5, end_lr_ratio=1.0,
                                   max_grad_norm=0.0, weight_decay=0.0)
    got = update(config, steps=2)  # second step: -lr (g + 0.5 g)
    np.testing.assert_allclose(got["w"], -0.1 * 1.5 * GRADS["w"], rtol=1e-6)
    decayed = optim.OptimizerConfig(name="sgd", learning_rate=0.1, max_grad_norm=0.0,
                                    weight_decay=0.5)
    got = update(decayed)  # matrices: g + 0.5 w; vectors: g
    np.testing.assert_allclose(got["w"], -0.1 * (GRADS["w"] + 0.5 * PARAMS["w"]), rtol=1e-6)
    np.testing.assert_allclose(got["b"], -0.1 * GRADS["b"], rtol=1e-6)

  def test_adamw_unchanged_and_first_step_is_sign_like(self):
    config = optim.OptimizerConfig(learning_rate=0.01, weight_decay=0.0)
    got = update(config)
    np.testing.assert_allclose(got["w"], -0.01 * np.ones((2, 3)), rtol=1e-5)
    # Clipping off keeps AdamW's state tree (the identity has the clip's empty state).
    self.assertEqual(
        jax.tree.structure(optim.make_optimizer(config).init(PARAMS)),
        jax.tree.structure(optim.make_optimizer(
            optim.OptimizerConfig(max_grad_norm=0.0)).init(PARAMS)))

  def test_bad_fields(self):
    with self.assertRaisesRegex(ValueError, "name='adam' is not an optimizer; expected one "
                                "of adamw, sgd"):
      optim.OptimizerConfig(name="adam")
    with self.assertRaisesRegex(ValueError, "max_grad_norm=-1"):
      optim.OptimizerConfig(max_grad_norm=-1.0)
    with self.assertRaisesRegex(ValueError, "momentum=0.9 is an SGD field"):
      optim.OptimizerConfig(momentum=0.9)


@pytest.mark.slow  # one compile of the step (tests/rl/test_train_step.py checks the flag fast)
class StepMetricsTest(absltest.TestCase):

  def test_grad_norm_is_before_clipping_and_clipped_says_when(self):
    fmodel = ts.FunctionalModel(rl_fixtures.small_model())
    objective = ts.PolicyObjective(objective_lib.preset("grpo"), group_size=4)
    batch = ts.numpy_batch(rl_fixtures.rl_batch(seed=4), objective.keys)
    opt = optim.OptimizerConfig(name="sgd", learning_rate=1.0, max_grad_norm=1e-3,
                                weight_decay=0.0, end_lr_ratio=1.0, total_steps=2)
    step, _ = ts.build_step(fmodel, objective, opt)
    state = ts.init_state(fmodel, opt)
    before = jax.tree.map(np.asarray, state.params)
    new, m = step(state, batch)
    self.assertGreater(float(m["grad_norm"]), 1e-2)  # the norm before clipping
    self.assertEqual(float(m["clipped"]), 1.0)
    moved = norm(jax.tree.map(lambda a, b: a - b, new.params, before))
    self.assertAlmostEqual(moved, 1e-3, delta=1e-6)  # SGD step of the clipped gradient


if __name__ == "__main__":
  absltest.main()
