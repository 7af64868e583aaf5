"""The RL/SFT train step on the real tiny LingForCausalLM."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized

from tests.fixtures import rl_fixtures
from tests.fixtures.np_reference import np_effective_weights, np_loss_and_grad, np_token_logprobs
from rcca_jax.data import batching
from rcca_jax.rl import functional
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import sft
from rcca_jax.rl import train_step as ts

OPT = optim.OptimizerConfig(learning_rate=1e-3, warmup_steps=2, total_steps=10)
SMALL_CONFIG = rl_fixtures.tiny_config(**rl_fixtures.SMALL)


@functools.cache
def small_fmodel() -> ts.FunctionalModel:
  """The module's small model (gradient functions only read its weights)."""
  return ts.FunctionalModel(rl_fixtures.small_model())


@functools.cache
def gradient_fn(loss_config, micro_batches: int, logits_chunk: int = 0):
  """(objective, jitted gradient function) of the small model, built once per module:
  tests that use the same program share its trace and compilation."""
  objective = ts.PolicyObjective(loss_config, group_size=4)
  return objective, jax.jit(ts.make_gradient_fn(small_fmodel(), objective, micro_batches,
                                                logits_chunk=logits_chunk))


@functools.cache
def term_scale(loss_config, seed: int) -> list[float]:
  """`rl_fixtures.gradient_term_scale` of the small model on `rl_batch(seed=seed)`."""
  return rl_fixtures.gradient_term_scale(small_fmodel(), rl_fixtures.rl_batch(seed=seed),
                                         loss_config)


def gradients(loss_config, micro_batches, batch):
  """Loss, gradients, metrics and expert counts of the small model on `batch`."""
  fmodel = small_fmodel()
  objective, fn = gradient_fn(loss_config, micro_batches)
  loss, grads, stats, counts = fn(fmodel.params, fmodel.model_state,
                                  ts.numpy_batch(batch, objective.keys))
  return loss, grads, objective_lib.finalize_stats(stats), counts


class TargetLogprobsTest(absltest.TestCase):

  def test_one_hot_select_equals_the_gather_and_its_gradient(self):
    # `_target_logprobs` reads the target's entry by a one-hot select (its gradient
    # fuses into log_softmax's); the other entries add exact zeros, so value and
    # gradient equal a gather's bit for bit, -inf entries and temperature included.
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.normal(size=(2, 5, 37)) * 4.0, jnp.float32)
    logits = logits.at[0, 1, 3].set(-jnp.inf)
    targets = jnp.asarray(rng.integers(0, 37, (2, 5)), jnp.int32)

    def gathered(x):
      log_probs = jax.nn.log_softmax(x / 0.7, axis=-1)
      return jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]

    def selected(x):
      return functional._target_logprobs(x, targets, 0.7)[0]

    weights = jnp.asarray(rng.normal(size=(2, 5)), jnp.float32)
    np.testing.assert_array_equal(selected(logits), gathered(logits))
    grad = lambda f: jax.grad(lambda x: jnp.sum(f(x) * weights))(logits)
    np.testing.assert_array_equal(grad(selected), grad(gathered))


class ChunkedLogprobsTest(parameterized.TestCase):

  @parameterized.parameters((1,), (64,))
  def test_chunked_loss_and_gradients_equal_whole_logits(self, chunk):
    """Logits made `chunk` positions at a time: same loss, gradients and stats."""
    batch = rl_fixtures.rl_batch(seed=3)
    fmodel = small_fmodel()
    objective, whole = gradient_fn(objective_lib.preset("rcca"), 1)
    _, chunked = gradient_fn(objective_lib.preset("rcca"), 1, chunk)
    inputs = ts.numpy_batch(batch, objective.keys)
    loss1, grads1, stats1, _ = whole(fmodel.params, fmodel.model_state, inputs)
    loss2, grads2, stats2, _ = chunked(fmodel.params, fmodel.model_state, inputs)
    self.assertGreater(float(jnp.abs(loss1)), 1e-3)
    np.testing.assert_allclose(loss2, loss1, rtol=1e-6)
    # Chunked logits are [B, chunk, V] products whose backward accumulates the lm_head
    # gradient chunk by chunk, the whole logits one [B*L, V] product: the same sums in
    # another order, with kernels XLA:CPU picks per shape and per machine. Bounded by
    # an analysis of float32 rounding relative to the magnitudes of the summed terms
    # (rl_fixtures.assert_within_rounding), not relative to the gradient: on an AMD EPYC
    # an entry of kv_a_layernorm's gradient, 4x smaller than its terms, moved by 20 u of
    # the gradient's scale (u = 2^-24), past a former bound of 1e-6 = 17 u.
    rl_fixtures.assert_within_rounding(
        grads2, grads1, term_scale(objective_lib.preset("rcca"), 3),
        rl_fixtures.reduction_length(SMALL_CONFIG, batch))
    m1, m2 = objective_lib.finalize_stats(stats1), objective_lib.finalize_stats(stats2)
    for name in m1:
      np.testing.assert_allclose(m2[name], m1[name], rtol=1e-5, atol=1e-7, err_msg=name)


class AccumulationTest(parameterized.TestCase):

  def _check(self, loss_config, k):
    batch = rl_fixtures.rl_batch(seed=1)
    loss1, grads1, metrics1, counts1 = gradients(loss_config, 1, batch)
    loss_k, grads_k, metrics_k, counts_k = gradients(loss_config, k, batch)
    self.assertGreater(float(jnp.abs(loss1)), 1e-3)
    self.assertGreater(float(optax_norm(grads1)), 1e-3)
    np.testing.assert_allclose(loss_k, loss1, rtol=1e-5, atol=1e-7)
    # Micro-batches add the same per-position terms in another order: float32 rounding
    # relative to the terms' magnitudes (rl_fixtures.assert_within_rounding); a
    # normalisation bug would move entries by a share of order one of that scale.
    rl_fixtures.assert_within_rounding(
        grads_k, grads1, term_scale(loss_config, 1),
        rl_fixtures.reduction_length(SMALL_CONFIG, batch))
    for name in metrics1:
      np.testing.assert_allclose(metrics_k[name], metrics1[name], rtol=1e-5,
                                 atol=1e-7, err_msg=name)
    np.testing.assert_array_equal(counts_k, counts1)

  def test_four_micro_batches_seq_mean_token_mean(self):
    self._check(objective_lib.preset("rcca"), 4)

  @parameterized.parameters(
      (dict(aggregation="token-mean", kl_beta=0.05),),
      (dict(aggregation="seq-mean-token-sum"),))
  @pytest.mark.slow  # below the parameterization, so that every generated test keeps it
  def test_two_micro_batches_other_aggregations(self, overrides):
    self._check(objective_lib.preset("rcca", **overrides), 2)


def optax_norm(tree):
  return jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(tree)))


class StepTest(parameterized.TestCase):

  def test_step_matches_independent_loss_and_balances_experts(self):
    model = rl_fixtures.small_model()
    batch = rl_fixtures.rl_batch(seed=2)
    config = objective_lib.preset("rcca")
    # Independent reference: the model called directly, float64 numpy log-softmax,
    # RCCA weights and clipped loss (tests/fixtures/np_reference.py).
    logits, aux = model(jnp.asarray(batch["input_ids"]),
                        attention_mask=jnp.asarray(batch["attention_mask"]),
                        return_aux=True)
    logp = np_token_logprobs(logits, batch["input_ids"])
    adv = np.asarray(batch["advantages"], np.float64)
    weights = np_effective_weights(np.asarray(batch["wbar"], np.float64), adv,
                                   config.rcca_c, config.rcca_positive_blamed)
    mask = np.asarray(batch["loss_mask"], np.float64)
    want_loss, _ = np_loss_and_grad(logp, batch["old_logp"], adv, weights, mask,
                                    config.eps_low, config.eps_high, config.aggregation)
    ratio = np.exp(logp - np.asarray(batch["old_logp"], np.float64))[mask > 0]
    # The other statistics: the step's wiring against the loss function on these logps.
    _, want_metrics = objective_lib.policy_loss(
        jnp.asarray(logp, jnp.float32), batch["old_logp"], batch["advantages"],
        objective_lib.effective_weights(jnp.asarray(batch["wbar"]),
                                        jnp.asarray(batch["advantages"])),
        batch["loss_mask"])
    counts = np.asarray(aux["expert_counts"], np.float64)

    fmodel = ts.FunctionalModel(model)
    state = ts.init_state(fmodel, OPT)
    bias_before = jax.tree.map(np.asarray, state.model_state)
    step, _ = ts.build_step(fmodel, ts.PolicyObjective(config, group_size=4), OPT,
                            ts.StepConfig(expert_bias_rate=0.01))
    first_leaf = jax.tree.leaves(state.params)[0]
    new_state, metrics = step(state, ts.numpy_batch(batch, ts.RL_KEYS))

    self.assertTrue(first_leaf.is_deleted())  # The state was donated.
    np.testing.assert_allclose(metrics["loss"], want_loss, rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_min"], ratio.min(), rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_max"], ratio.max(), rtol=1e-5)
    for name in ("ratio_mean", "clip_low", "clip_high",
                 "logprob_gap", "weight_share_1.2", "weight_share_3.0"):
      np.testing.assert_allclose(metrics[name], want_metrics[name], rtol=1e-5,
                                 err_msg=name)
    self.assertAlmostEqual(float(metrics["zero_advantage_groups"]), 0.5)
    self.assertAlmostEqual(float(metrics["learning_rate"]), 5e-4, places=9)
    # grad_norm is taken before clipping (at OPT's max_grad_norm 1.0); clipped says so.
    self.assertEqual(float(metrics["clipped"]), float(not metrics["grad_norm"] < 1.0))
    self.assertEqual(int(new_state.step), 1)
    probs = np.exp(np.asarray(logits, np.float64)[:, :-1])
    probs /= probs.sum(-1, keepdims=True)
    entropy = -(probs * np.log(probs)).sum(-1)
    mask = batch["loss_mask"][:, 1:]
    np.testing.assert_allclose(metrics["entropy"], (entropy * mask).sum() / mask.sum(),
                               rtol=1e-5)
    # Router biases: exactly rate * sign(mean load - load), untouched by AdamW.
    moe_layers = sorted(bias_before["layers"])
    for layer in moe_layers:
      load = counts[layer]
      want = 0.01 * np.sign(load.mean() - load)
      got = (new_state.model_state["layers"][layer]["mlp"]["correction_bias"] -
             bias_before["layers"][layer]["mlp"]["correction_bias"])
      np.testing.assert_allclose(got, want, atol=1e-7)
    self.assertGreater(np.abs(counts).sum(), 0)
    for name, metric in metrics.items():
      self.assertTrue(np.isfinite(metric), name)

  @pytest.mark.slow
  def test_grpo_and_rcca_differ_only_by_weights(self):
    batch = rl_fixtures.rl_batch(seed=3)
    batch["wbar"] = np.ones_like(batch["wbar"])
    cfg = dict(rcca_c=1.0)
    loss_r, grads_r, _, _ = gradients(objective_lib.preset("rcca", **cfg), 1, batch)
    loss_g, grads_g, _, _ = gradients(objective_lib.preset("grpo"), 1, batch)
    # Two differently fused programs: equal up to fp32 rounding (measured 2.6e-6).
    np.testing.assert_allclose(loss_r, loss_g, rtol=1e-5)
    rl_fixtures.assert_within_rounding(
        grads_r, grads_g,
        rl_fixtures.gradient_term_scale(small_fmodel(), batch, objective_lib.preset("grpo")),
        rl_fixtures.reduction_length(SMALL_CONFIG, batch))


class SftTest(parameterized.TestCase):

  def test_sft_loss_is_response_nll_and_decreases(self):
    model = rl_fixtures.small_model()
    batch = rl_fixtures.rl_batch(seed=4)
    logits = model(jnp.asarray(batch["input_ids"]),
                   attention_mask=jnp.asarray(batch["attention_mask"]))
    logp = np_token_logprobs(logits, batch["input_ids"])
    mask = batch["loss_mask"]
    want = -(logp * mask).sum() / mask.sum()
    fmodel = ts.FunctionalModel(model)
    opt = optim.OptimizerConfig(learning_rate=1e-2, total_steps=10)
    state = ts.init_state(fmodel, opt)
    step = ts.compile_step(sft.make_sft_step(fmodel, opt), sft.SFT_KEYS)
    data = ts.numpy_batch(batch, sft.SFT_KEYS)
    history = []
    for _ in range(4):
      state, metrics = step(state, data)
      history.append(float(metrics["loss"]))
    np.testing.assert_allclose(history[0], want, rtol=1e-5)
    np.testing.assert_allclose(metrics["nll"], metrics["loss"], rtol=1e-6)
    self.assertLess(history[-1], history[0] - 0.05)


class BatchTest(parameterized.TestCase):

  def test_pack_batch(self):
    out = batching.pack_batch([[5, 6], [7]], [[8, 9], []], max_len=4, pad_id=0,
                        per_token={"old_logp": [[-1.0, -2.0], []],
                                   "wbar": [[3.0, 1.0], []]},
                        per_sequence={"advantages": [0.5, -0.5]},
                        token_fill={"wbar": 1.0})
    np.testing.assert_array_equal(out["input_ids"], [[5, 6, 8, 9], [7, 0, 0, 0]])
    np.testing.assert_array_equal(out["attention_mask"], [[1, 1, 1, 1], [1, 0, 0, 0]])
    np.testing.assert_array_equal(out["loss_mask"], [[0, 0, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(out["old_logp"], [[0, 0, -1, -2], [0, 0, 0, 0]])
    np.testing.assert_array_equal(out["wbar"], [[1, 1, 3, 1], [1, 1, 1, 1]])
    ts.numpy_batch(out, ts.RL_KEYS)  # Valid as it is.
    with self.assertRaisesRegex(ValueError, "row 0: wbar has 1 values"):
      batching.pack_batch([[1]], [[2, 3]], max_len=4, per_token={"wbar": [[1.0]]})
    # Nothing is cut silently: a row that does not fit is an error naming it.
    with self.assertRaisesRegex(ValueError, "max_len=4: row 1: 2 \\+ 3 tokens$"):
      batching.pack_batch([[1], [1, 2]], [[2, 3], [3, 4, 5]], max_len=4)

  def test_numpy_batch_errors(self):
    batch = rl_fixtures.rl_batch()
    with self.assertRaisesRegex(ValueError, "missing \\['wbar'\\]"):
      ts.numpy_batch({k: v for k, v in batch.items() if k != "wbar"}, ts.RL_KEYS)
    bad = dict(batch, advantages=batch["advantages"][:3])
    with self.assertRaisesRegex(ValueError, "advantages has shape"):
      ts.numpy_batch(bad, ts.RL_KEYS)
    bad = dict(batch, old_logp=batch["old_logp"].copy())
    bad["old_logp"][5, -1] = np.nan
    bad["loss_mask"] = batch["loss_mask"].copy()
    bad["loss_mask"][5, -1] = 1.0
    with self.assertRaisesRegex(ValueError, "old_logp has non-finite values in rows \\[5\\]"):
      ts.numpy_batch(bad, ts.RL_KEYS)
    bad["loss_mask"][5, -1] = 0.0  # Outside the response: replaced, not an error.
    self.assertEqual(ts.numpy_batch(bad, ts.RL_KEYS)["old_logp"][5, -1], 0.0)


if __name__ == "__main__":
  absltest.main()
