"""μ updates per rollout batch, the reference policy and recomputed old log-probs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from absl.testing import absltest

from tests.fixtures import rl_fixtures
from rcca_jax.rl import logprobs
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts
from rcca_jax.rl import batch_updates

OPT = optim.OptimizerConfig(learning_rate=1e-2, warmup_steps=0, total_steps=10,
                            weight_decay=0.0)
# No router-bias update, so that a hand-rolled optimizer loop can follow the step.
STEP = ts.StepConfig(expert_bias_rate=0.0)


def _step(loss_config, fmodel=None):
  fmodel = fmodel or ts.FunctionalModel(rl_fixtures.small_model())
  objective = ts.PolicyObjective(loss_config, group_size=4)
  step, _ = ts.build_step(fmodel, objective, OPT, STEP)
  return fmodel, objective, step


def _model_logp(fmodel, params, model_state, batch):
  """Independent log-probs: the model called directly, log_softmax and gather."""
  model = fmodel.merge(params, model_state)
  logits = model(jnp.asarray(batch["input_ids"]),
                 attention_mask=jnp.asarray(batch["attention_mask"]))
  logp = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
  picked = jnp.take_along_axis(logp, jnp.asarray(batch["input_ids"])[:, 1:, None],
                               -1)[..., 0]
  return jnp.pad(picked, ((0, 0), (1, 0)))


class UpdatesTest(absltest.TestCase):

  def test_one_update_is_the_step_bit_for_bit(self):
    fmodel, objective, step = _step(objective_lib.preset("rcca"))
    batch = ts.numpy_batch(rl_fixtures.rl_batch(seed=5), objective.keys)
    want_state, want = step(ts.init_state(fmodel, OPT), batch)
    got_state, got = batch_updates.run_updates(step, ts.init_state(fmodel, OPT), batch,
                                               batch_updates.UpdateConfig())
    self.assertLen(got, 1)
    row = batch_updates.summarize(got)
    self.assertEqual(set(row), set(want))
    for name, value in jax.device_get(want).items():
      self.assertEqual(row[name], float(value), name)
    for a, b in zip(jax.tree.leaves(got_state), jax.tree.leaves(want_state)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  @pytest.mark.slow
  def test_two_iterations_of_two_mini_batches_equal_a_hand_rolled_loop(self):
    config = objective_lib.preset("rcca", kl_beta=0.1)
    fmodel, objective, step = _step(config)
    batch = ts.numpy_batch(rl_fixtures.rl_batch(seed=6), objective.keys)
    state, got = batch_updates.run_updates(
        step, ts.init_state(fmodel, OPT), batch,
        batch_updates.UpdateConfig(num_iterations=2, mini_batches=2))
    self.assertLen(got, 4)

    # By hand: four AdamW updates on rows 0-3, 4-7, 0-3, 4-7, each normalised by
    # its own mini-batch, the loss written out from the model's logits.
    optimizer = optim.make_optimizer(OPT)
    params, model_state = fmodel.params, fmodel.model_state
    opt_state = optimizer.init(params)
    losses_by_hand, norms_by_hand = [], []

    def loss_fn(p, mb):
      logp = _model_logp(fmodel, p, model_state, mb)
      weights = objective_lib.effective_weights(mb["wbar"], mb["advantages"])
      loss, _ = objective_lib.policy_loss(logp, mb["old_logp"], mb["advantages"], weights,
                                          mb["loss_mask"], ref_logp=mb["ref_logp"],
                                          kl_beta=0.1, eps_high=config.eps_high)
      return loss

    loss_and_grads = jax.jit(jax.value_and_grad(loss_fn))
    for k in range(4):
      mb = {n: v[4 * (k % 2):4 * (k % 2) + 4] for n, v in batch.items()}
      loss, grads = loss_and_grads(params, mb)
      upd, opt_state = optimizer.update(grads, opt_state, params)
      params = optax.apply_updates(params, upd)
      losses_by_hand.append(float(loss))
      norms_by_hand.append(float(optax.tree.norm(grads)))

    np.testing.assert_allclose([u["loss"] for u in got], losses_by_hand, rtol=2e-5)
    self.assertGreater(abs(losses_by_hand[2] - losses_by_hand[0]), 1e-4)  # It learnt.
    self.assertEqual(int(state.step), 4)
    np.testing.assert_allclose([u["grad_norm"] for u in got], norms_by_hand, rtol=1e-4)
    # AdamW moves each entry by up to lr per update, by about lr * sign(g) where g is
    # tiny; fp32 rounding of such g flips it, so parameters are compared in units of
    # the learning rate (a mini-batch or order mix-up moves them by O(lr)).
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(params)))
    moved = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(fmodel.params)))
    self.assertGreater(moved, 2 * OPT.learning_rate)
    self.assertLess(diff, 0.05 * OPT.learning_rate)
    row = batch_updates.summarize(got, num_iterations=2)
    self.assertEqual(row["updates"], 4.0)
    self.assertEqual(row["clip_high/u4"], got[3]["clip_high"])
    self.assertEqual(row["sequences"], got[0]["sequences"] + got[1]["sequences"])
    self.assertEqual(row["ratio_max"], max(u["ratio_max"] for u in got))
    self.assertAlmostEqual(row["kl"], np.mean([u["kl"] for u in got]), places=6)


class LogprobsTest(absltest.TestCase):

  def test_logprob_fn_matches_the_model_with_micro_batches(self):
    fmodel = ts.FunctionalModel(rl_fixtures.small_model())
    batch = rl_fixtures.rl_batch(seed=7)
    want = np.asarray(_model_logp(fmodel, fmodel.params, fmodel.model_state, batch))
    want = np.where(batch["loss_mask"] > 0, want, 0.0)
    for k in (1, 4):
      fn = logprobs.compile_logprob_fn(fmodel, ts.StepConfig(), k)
      got = np.asarray(fn(fmodel.params, fmodel.model_state, batch))
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"k={k}")

  def test_entropy_beside_the_logprobs(self):
    fmodel = ts.FunctionalModel(rl_fixtures.small_model())
    batch = rl_fixtures.rl_batch(seed=7)
    model = fmodel.merge(fmodel.params, fmodel.model_state)
    logits = model(jnp.asarray(batch["input_ids"]),
                   attention_mask=jnp.asarray(batch["attention_mask"]))
    logp_all = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
    want = np.pad(np.asarray(-jnp.sum(jnp.exp(logp_all) * logp_all, -1)), ((0, 0), (1, 0)))
    want = np.where(batch["loss_mask"] > 0, want, 0.0)
    plain = logprobs.compile_logprob_fn(fmodel, ts.StepConfig(), 2)
    both = logprobs.compile_logprob_fn(fmodel, ts.StepConfig(), 2, with_entropy=True)
    logp, entropy = both(fmodel.params, fmodel.model_state, batch)
    np.testing.assert_array_equal(np.asarray(logp),
                                  np.asarray(plain(fmodel.params, fmodel.model_state, batch)))
    # float32 sums over the vocabulary in another order: a few ulps of values ~ln(V).
    np.testing.assert_allclose(np.asarray(entropy), want, rtol=1e-5, atol=1e-5)
    self.assertGreater(float(np.asarray(entropy).max()), 1.0)

  @pytest.mark.slow
  def test_recomputed_old_logprobs_and_self_reference(self):
    """Old log-probs recomputed by the trainer: ratio 1 and no clipping at the first
    update; a reference equal to the policy: KL 0 there, positive after updates."""
    fmodel, objective, step = _step(objective_lib.preset("grpo", kl_beta=0.5))
    fn = logprobs.compile_logprob_fn(fmodel, ts.StepConfig(), 1)
    state = ts.init_state(fmodel, OPT)
    reference = logprobs.Reference(
        jax.tree.map(jnp.copy, state.params), state.model_state, fn)
    raw = rl_fixtures.rl_batch(seed=8)
    batch, extra = batch_updates.with_logprobs(raw, state, reference=reference,
                                               policy_logprobs=fn)
    np.testing.assert_array_equal(batch["old_logp"], batch["ref_logp"])
    mask = raw["loss_mask"] > 0
    want_gap = np.abs(raw["old_logp"] - batch["old_logp"])[mask].mean()
    self.assertAlmostEqual(extra["sampler_logprob_gap"], want_gap, places=5)
    self.assertGreater(extra["sampler_logprob_gap"], 0.1)
    batch = ts.numpy_batch(batch, objective.keys)
    _, got = batch_updates.run_updates(step, state, batch,
                                       batch_updates.UpdateConfig(num_iterations=3))
    first, last = got[0], got[-1]
    self.assertAlmostEqual(first["ratio_min"], 1.0, places=5)
    self.assertAlmostEqual(first["ratio_max"], 1.0, places=5)
    self.assertEqual(first["clip_low"] + first["clip_high"], 0.0)
    self.assertLess(first["kl"], 1e-9)
    self.assertGreater(last["kl"], 1e-6)
    self.assertGreater(abs(last["ratio_mean"] - 1.0), 1e-5)


if __name__ == "__main__":
  absltest.main()
