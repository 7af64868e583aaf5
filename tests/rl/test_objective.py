"""The RL objective (`rl.objective`) against independent numpy references: GRPO
advantages, RCCA's effective weights (docs/method.md#6-asymmetric-effective-weights) and
their magnitude control, the clipped weighted loss, the entropy token selection, the
policy losses by name and presets, and the old modules kept as aliases."""

import ast
import importlib
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from tests.fixtures.np_reference import (np_advantages, np_effective_weights,
                                         np_loss_and_grad, np_negative_mean_weights,
                                         np_top_entropy_tokens)
from rcca_jax.rl import objective

AGGS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")


def random_inputs(seed, b=8, t=12, spread=0.5):
  rng = np.random.default_rng(seed)
  old = rng.uniform(-4, -0.1, (b, t))
  logp = old + rng.uniform(-spread, spread, (b, t))
  lengths = rng.integers(1, t + 1, b)
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.float64)
  adv = rng.standard_normal(b)
  w = rng.choice([1.0, 1.2, 1.5, 3.0, 4.0], (b, t))
  ref = old + rng.uniform(-0.3, 0.3, (b, t))
  return logp, old, adv, w, mask, ref


def f32(*xs):
  return [jnp.asarray(x, jnp.float32) for x in xs]


class AdvantageTest(parameterized.TestCase):

  def test_matches_numpy(self):
    rewards = np.random.default_rng(0).uniform(0, 1, 24)
    got = objective.group_advantages(jnp.asarray(rewards, jnp.float32), 6)
    np.testing.assert_allclose(got, np_advantages(rewards, 6), rtol=1e-5, atol=1e-5)

  def test_equal_group_gives_zeros_and_is_counted(self):
    rewards = jnp.asarray([0.5] * 4 + [0.0, 1.0, 0.0, 1.0])
    adv = objective.group_advantages(rewards, 4)
    np.testing.assert_array_equal(adv[:4], 0.0)
    self.assertTrue(np.all(np.isfinite(adv)))
    self.assertAlmostEqual(float(objective.zero_advantage_group_fraction(adv, 4)), 0.5)

  @parameterized.product(group_size=[4, 8, 16],
                         value=[0.05, 0.1, 0.2, 0.4, 0.7, 1.0],
                         dtype=[jnp.float32, jnp.bfloat16],
                         scale_by_std=[True, False])
  def test_degenerate_group_is_exactly_zero(self, group_size, value, dtype, scale_by_std):
    varied = np.linspace(0.1, 0.9, group_size)
    rewards = jnp.asarray(np.concatenate([np.full(group_size, value), varied]), dtype)
    adv = np.asarray(objective.group_advantages(rewards, group_size, scale_by_std=scale_by_std))
    self.assertTrue(np.all(adv[:group_size] == 0.0), adv[:group_size])
    self.assertTrue(np.any(adv[group_size:] != 0.0))
    self.assertEqual(
        float(objective.zero_advantage_group_fraction(jnp.asarray(adv), group_size)), 0.5)

  def test_rewards_equal_within_tolerance_are_degenerate(self):
    rewards = jnp.asarray([0.3, 0.1 + 0.2, 0.3, 0.3 + 1e-7], jnp.float32)
    np.testing.assert_array_equal(objective.group_advantages(rewards, 4), 0.0)
    rewards = jnp.asarray([0.3, 0.3, 0.3, 0.31], jnp.float32)
    self.assertTrue(np.all(np.asarray(objective.group_advantages(rewards, 4)) != 0.0))

  def test_no_std_scaling(self):
    adv = objective.group_advantages(jnp.asarray([0.0, 1.0]), 2, scale_by_std=False)
    np.testing.assert_allclose(adv, [-0.5, 0.5])

  def test_bad_group_size(self):
    with self.assertRaisesRegex(ValueError, "does not divide"):
      objective.group_advantages(jnp.zeros(6), 4)


class PolicyLossTest(parameterized.TestCase):

  @parameterized.product(aggregation=AGGS, seed=[0, 1, 2], with_kl=[False, True])
  def test_loss_and_grad_match_numpy(self, aggregation, seed, with_kl):
    logp, old, adv, w, mask, ref = random_inputs(seed)
    beta = 0.1 if with_kl else 0.0
    want_loss, want_grad = np_loss_and_grad(
        logp, old, adv, w, mask, 0.2, 0.28, aggregation,
        ref if with_kl else None, beta)
    jl, jo, ja, jw, jm, jr = f32(logp, old, adv, w, mask, ref)

    def loss(x):
      return objective.policy_loss(x, jo, ja, jw, jm, eps_low=0.2, eps_high=0.28,
                                   aggregation=aggregation,
                                   ref_logp=jr if with_kl else None, kl_beta=beta)[0]

    got_loss, got_grad = jax.value_and_grad(loss)(jl)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-4, atol=1e-7)
    # The inputs exercise both sides of the clip range, with both advantage signs.
    ratio = np.exp(logp - old)
    outside = ((ratio < 0.8) | (ratio > 1.28)) & (mask > 0)
    inside = ~outside & (mask > 0)
    self.assertGreater(outside.sum(), 5)
    self.assertGreater(inside.sum(), 5)
    # Clipped tokens on the binding side get exactly zero gradient.
    binding = (((ratio < 0.8) & (adv[:, None] < 0)) |
               ((ratio > 1.28) & (adv[:, None] > 0))) & (mask > 0)
    self.assertGreater(binding.sum(), 0)
    if not with_kl:
      np.testing.assert_array_equal(np.asarray(got_grad)[binding], 0.0)
      self.assertTrue(np.all(np.asarray(got_grad)[outside & ~binding] != 0.0))

  @parameterized.parameters(*AGGS)
  def test_numpy_gradient_matches_finite_differences(self, aggregation):
    logp, old, adv, w, mask, ref = random_inputs(7, b=4, t=6)
    _, grad = np_loss_and_grad(logp, old, adv, w, mask, 0.2, 0.2, aggregation, ref, 0.05)
    h = 1e-6
    numeric = np.zeros_like(logp)
    for idx in np.ndindex(logp.shape):
      up, down = logp.copy(), logp.copy()
      up[idx] += h
      down[idx] -= h
      numeric[idx] = (
          np_loss_and_grad(up, old, adv, w, mask, 0.2, 0.2, aggregation, ref, 0.05)[0] -
          np_loss_and_grad(down, old, adv, w, mask, 0.2, 0.2, aggregation, ref, 0.05)[0]
      ) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)

  @parameterized.parameters(*AGGS)
  def test_split_batch_with_global_denominator(self, aggregation):
    logp, old, adv, w, mask, _ = random_inputs(3)
    jl, jo, ja, jw, jm = f32(logp, old, adv, w, mask)
    whole, _ = objective.policy_loss(jl, jo, ja, jw, jm, aggregation=aggregation)
    den = objective.loss_denominator(jm, aggregation)
    parts = sum(objective.policy_loss(jl[s], jo[s], ja[s], jw[s], jm[s],
                                      aggregation=aggregation, denominator=den)[0]
                for s in (slice(0, 3), slice(3, 8)))
    np.testing.assert_allclose(parts, whole, rtol=1e-6)

  def test_unit_weights_is_plain_grpo_and_scale_matters(self):
    logp, old, adv, _, mask, _ = random_inputs(4)
    jl, jo, ja, jm = f32(logp, old, adv, mask)
    ones, _ = objective.policy_loss(jl, jo, ja, 1.0, jm)
    want, _ = np_loss_and_grad(logp, old, adv, np.ones_like(logp), mask, 0.2, 0.2,
                               "seq-mean-token-mean")
    np.testing.assert_allclose(ones, want, rtol=1e-5)
    doubled, _ = objective.policy_loss(jl, jo, ja, 2.0, jm)
    np.testing.assert_allclose(doubled, 2 * ones, rtol=1e-6)

  @parameterized.parameters(*AGGS)
  def test_empty_and_equal_groups_never_nan(self, aggregation):
    logp, old, _, w, mask, ref = random_inputs(5)
    old[:, -3:] = -np.inf  # Sampler padding may hold anything outside the mask.
    mask[:, -3:] = 0
    for m, adv in ((np.zeros_like(mask), np.ones(8)), (mask, np.zeros(8))):
      jl, jo, ja, jw, jm, jr = f32(logp, old, adv, w, m, ref)

      def loss(x):
        return objective.policy_loss(x, jo, ja, jw, jm, aggregation=aggregation,
                                     ref_logp=jr, kl_beta=0.1)

      (value, metrics), grad = jax.value_and_grad(loss, has_aux=True)(jl)
      self.assertTrue(np.isfinite(value))
      self.assertTrue(np.all(np.isfinite(grad)))
      for name, metric in metrics.items():
        self.assertTrue(np.isfinite(metric), name)
      if not m.any():
        self.assertEqual(float(value), 0.0)
        np.testing.assert_array_equal(grad, 0.0)

  def test_metrics_match_numpy(self):
    logp, old, adv, w, mask, _ = random_inputs(6)
    w[0, 0] = 2.5  # Not a bucket value.
    jl, jo, ja, jw, jm = f32(logp, old, adv, w, mask)
    _, m = objective.policy_loss(jl, jo, ja, jw, jm, eps_low=0.2, eps_high=0.28)
    valid = mask > 0
    ratio = np.exp(logp - old)[valid]
    a = np.broadcast_to(adv[:, None], mask.shape)[valid]
    np.testing.assert_allclose(m["clip_low"], np.mean((ratio < 0.8) & (a < 0)), rtol=1e-6)
    np.testing.assert_allclose(m["clip_high"], np.mean((ratio > 1.28) & (a > 0)),
                               rtol=1e-6)
    np.testing.assert_allclose(m["ratio_min"], ratio.min(), rtol=1e-5)
    np.testing.assert_allclose(m["ratio_max"], ratio.max(), rtol=1e-5)
    np.testing.assert_allclose(m["ratio_mean"], ratio.mean(), rtol=1e-5)
    np.testing.assert_allclose(m["logprob_gap"], np.abs(logp - old)[valid].mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(m["abs_advantage"], np.abs(adv).mean(), rtol=1e-6)
    shares = [float(m[f"weight_share_{b:.1f}"]) for b in objective.WEIGHT_BUCKETS]
    for b, share in zip(objective.WEIGHT_BUCKETS, shares):
      np.testing.assert_allclose(share, np.mean(w[valid] == b), rtol=1e-6)
    np.testing.assert_allclose(m["weight_share_other"], 1 / valid.sum(), rtol=1e-6)
    np.testing.assert_allclose(sum(shares) + m["weight_share_other"], 1.0, rtol=1e-6)

  def test_weight_moments_match_numpy(self):
    logp, old, adv, w, mask, _ = random_inputs(9)
    w[:3, :4] = 0.0
    jl, jo, ja, jw, jm = f32(logp, old, adv, w, mask)
    _, m = objective.policy_loss(jl, jo, ja, jw, jm)
    valid = mask > 0
    negative = np.broadcast_to(adv[:, None] < 0, mask.shape)[valid]
    want = {"weight_mean": w[valid].mean(), "weight_sq_mean": (w[valid] ** 2).mean(),
            "zero_weight_share": np.mean(w[valid] == 0),
            "negative_token_share": negative.mean(),
            "negative_weight_sum": (w[valid] * negative).sum() / valid.sum()}
    self.assertGreater(want["zero_weight_share"], 0)
    self.assertTrue(0 < want["negative_token_share"] < 1)
    for name, value in want.items():
      np.testing.assert_allclose(m[name], value, rtol=1e-5, err_msg=name)

  def test_unknown_aggregation(self):
    with self.assertRaisesRegex(ValueError, "unknown aggregation"):
      objective.policy_loss(*f32(*random_inputs(0)[:5]), aggregation="sum")


class TopEntropyTest(parameterized.TestCase):

  def test_hand_made_rows(self):
    entropy = jnp.asarray([[0.1, 0.9, 0.5, 0.9, 0.2, 7.0],    # 5 tokens: k = 1, tie -> t=1
                           [0.0, -0.0, 0.0, 0.3, 0.0, 0.0],   # 6 tokens: k = 2
                           [5.0, 1.0, 2.0, 0.0, 0.0, 0.0]])   # 0 tokens: none
    mask = jnp.asarray([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0] * 6])
    got = objective.top_entropy_tokens(entropy, mask, 0.2)
    np.testing.assert_array_equal(got, [[0, 1, 0, 0, 0, 0],
                                        [1, 0, 0, 1, 0, 0],   # zeros tie: the earliest
                                        [0] * 6])
    np.testing.assert_array_equal(got, np_top_entropy_tokens(entropy, mask, 0.2))

  @parameterized.parameters(0.2, 0.5, 1.0, 0.05)
  def test_matches_numpy_with_ties(self, fraction):
    rng = np.random.default_rng(3)
    entropy = rng.choice([0.0, 0.25, 0.5, 1.5], (16, 40)).astype(np.float32)
    lengths = rng.integers(0, 41, 16)
    lengths[:3] = (35, 15, 40)  # 0.2 * 35 and 0.2 * 15 are integers up to rounding
    mask = (np.arange(40)[None] < lengths[:, None]).astype(np.float32)
    got = np.asarray(objective.top_entropy_tokens(jnp.asarray(entropy), jnp.asarray(mask),
                                                  fraction))
    np.testing.assert_array_equal(got, np_top_entropy_tokens(entropy, mask, fraction))
    np.testing.assert_array_equal(got.sum(1), np.ceil(np.round(fraction * lengths, 9)))
    if fraction == 0.2:
      self.assertEqual(list(got.sum(1)[:3]), [7, 3, 8])

  def test_constant_under_jit_and_grad(self):
    def total(entropy):
      return jnp.sum(entropy * objective.top_entropy_tokens(entropy, jnp.ones((1, 4)), 0.5))
    entropy = jnp.asarray([[0.1, 0.4, 0.3, 0.2]])
    self.assertAlmostEqual(float(jax.jit(total)(entropy)), 0.7, places=6)
    np.testing.assert_allclose(jax.grad(total)(entropy), [[0.0, 1.0, 1.0, 0.0]])


class PolicyLossByNameTest(parameterized.TestCase):

  def test_grpo_ignores_wbar_and_rcca_uses_effective_weights(self):
    logp, old, adv, wbar, mask, _ = random_inputs(8)
    jl, jo, ja, jw, jm = f32(logp, old, adv, wbar, mask)
    cfg = objective.preset("grpo")
    num, _ = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
    plain, _ = objective.policy_loss(jl, jo, ja, 1.0, jm)
    np.testing.assert_allclose(num / objective.loss_denominator(jm, cfg.aggregation), plain,
                               rtol=1e-6)
    cfg = objective.preset("rcca", rcca_c=1.3)
    num, _ = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
    weighted, _ = objective.policy_loss(jl, jo, ja,
                                        objective.effective_weights(jw, ja, c=1.3), jm)
    np.testing.assert_allclose(num / objective.loss_denominator(jm, cfg.aggregation),
                               weighted, rtol=1e-6)
    self.assertNotAlmostEqual(float(weighted), float(plain), places=4)

  def test_rcca_neg_mean_keeps_rccas_negative_totals(self):
    logp, old, adv, wbar, mask, _ = random_inputs(10)
    jl, jo, ja, jw, jm = f32(logp, old, adv, wbar, mask)
    cfg = objective.preset("grpo", policy_loss="rcca_neg_mean", rcca_negative_unblamed=0.0)
    num, stats = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
    want, _ = np_loss_and_grad(logp, old, adv,
                               np_negative_mean_weights(wbar, adv, mask, 0.0), mask,
                               0.2, 0.2, "seq-mean-token-mean")
    np.testing.assert_allclose(num / objective.loss_denominator(jm, cfg.aggregation), want,
                               rtol=1e-5)
    # The same total weight on negative responses as rcca under focus.
    focus = objective.preset("rcca", rcca_negative_unblamed=0.0)
    _, focus_stats = objective.loss_terms(jl, jo, ja, jw, jm, focus)
    np.testing.assert_allclose(stats["token_sums"]["negative_weight_sum"],
                               focus_stats["token_sums"]["negative_weight_sum"], rtol=1e-5)

  @parameterized.parameters("grpo", "rcca")
  def test_negative_scale_multiplies_the_failed_responses_weights(self, name):
    logp, old, adv, wbar, mask, _ = random_inputs(13)
    self.assertTrue((adv < 0).any() and (adv > 0).any())
    jl, jo, ja, jw, jm = f32(logp, old, adv, wbar, mask)
    cfg = objective.preset("grpo", policy_loss=name, negative_scale=0.3)
    num, stats = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
    base = (np.ones_like(logp) if name == "grpo"
            else np.asarray(objective.effective_weights(jw, ja)))
    weights = np.where(adv[:, None] < 0, 0.3, 1.0) * base
    want, _ = np_loss_and_grad(logp, old, adv, weights, mask, 0.2, 0.2,
                               "seq-mean-token-mean")
    # float32 weights and log-ratios against the float64 reference: a few ulps of the
    # sums, far inside 1e-5 relative.
    np.testing.assert_allclose(num / objective.loss_denominator(jm, cfg.aggregation), want,
                               rtol=1e-5)
    off = objective.preset("grpo", policy_loss=name)
    _, off_stats = objective.loss_terms(jl, jo, ja, jw, jm, off)
    np.testing.assert_allclose(stats["token_sums"]["negative_weight_sum"],
                               0.3 * off_stats["token_sums"]["negative_weight_sum"],
                               rtol=1e-6)
    with self.assertRaisesRegex(ValueError, "negative_scale=-1.0 must be >= 0"):
      objective.LossConfig(negative_scale=-1.0)

  @parameterized.parameters("grpo", "rcca")
  def test_positive_scale_multiplies_the_successful_responses_weights(self, name):
    # W-REINFORCE (positive_scale 0.1) and negative samples only (0).
    logp, old, adv, wbar, mask, _ = random_inputs(14)
    self.assertTrue((adv < 0).any() and (adv > 0).any())
    jl, jo, ja, jw, jm = f32(logp, old, adv, wbar, mask)
    base = (np.ones_like(logp) if name == "grpo"
            else np.asarray(objective.effective_weights(jw, ja)))
    for scale in (0.1, 0.0):
      cfg = objective.preset("grpo", policy_loss=name, positive_scale=scale)
      num, _ = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
      weights = np.where(adv[:, None] > 0, scale, 1.0) * base
      want, _ = np_loss_and_grad(logp, old, adv, weights, mask, 0.2, 0.2,
                                 "seq-mean-token-mean")
      np.testing.assert_allclose(num / objective.loss_denominator(jm, cfg.aggregation),
                                 want, rtol=1e-5)
    with self.assertRaisesRegex(ValueError, "positive_scale=-0.5 must be >= 0"):
      objective.LossConfig(positive_scale=-0.5)

  def test_new_modifiers_off_are_bitwise_the_loss_without_them(self):
    logp, old, adv, wbar, mask, _ = random_inputs(15)
    args = f32(logp, old, adv, wbar, mask)
    for name in ("grpo", "rcca", "rcca_neg_mean"):
      plain = objective.preset("grpo", policy_loss=name)
      self.assertEqual((plain.positive_scale, plain.negative_mass), (1.0, 0.0))
      off = objective.preset("grpo", policy_loss=name, positive_scale=1.0,
                             negative_mass=0.0)
      got = jax.grad(lambda lp, c: objective.loss_terms(lp, *args[1:], c)[0])
      np.testing.assert_array_equal(got(args[0], off), got(args[0], plain))
      np.testing.assert_array_equal(objective.loss_terms(*args, off)[0],
                                    objective.loss_terms(*args, plain)[0])

  def test_negative_mass_sets_each_failed_responses_gradient_mass(self):
    logp, old, adv, wbar, mask, _ = random_inputs(16)
    wbar = np.where(np.random.default_rng(16).uniform(size=wbar.shape) < 0.25, 3.0, 1.0)
    wbar[np.argmin(adv)] = 1.0  # a failed response with nothing blamed
    jl, jo, ja, jw, jm = f32(logp, old, adv, wbar, mask)
    slack = mask * (1.0 - np.exp(np.asarray(jl, np.float64)))
    for name in ("grpo", "rcca"):
      cfg = objective.preset("grpo", policy_loss=name, rcca_negative_unblamed=0.0,
                             negative_mass=0.1)
      base = (np.ones_like(logp) if name == "grpo" else np.asarray(
          objective.effective_weights(jw, ja, negative_unblamed=0.0), np.float64))
      have = (slack * base).sum(-1)
      factor = np.where(have > 0, 0.1 * slack.sum(-1) / np.where(have > 0, have, 1), 0.0)
      weights = np.where(adv[:, None] < 0, factor[:, None] * base, base)
      got = np.asarray(objective.negative_mass_weights(
          jnp.asarray(base, jnp.float32), ja, jm, jl, 0.1), np.float64)
      np.testing.assert_allclose(got, weights, rtol=1e-5)
      neg = adv < 0
      mass = (slack * got).sum(-1)
      if name == "grpo":
        np.testing.assert_allclose(mass[neg], 0.1 * slack.sum(-1)[neg], rtol=1e-5)
      else:  # focus: the unblamed failed response keeps no weight; the others 0.1 GRPO's
        blamed = (wbar * mask > 1).any(-1)
        np.testing.assert_allclose(mass[neg & blamed], 0.1 * slack.sum(-1)[neg & blamed],
                                   rtol=1e-5)
        self.assertEqual(float(np.abs(got[np.argmin(adv)]).sum()), 0.0)
      # The loss is that of these weights as constants: no gradient through p.
      num, _ = objective.loss_terms(jl, jo, ja, jw, jm, cfg)
      want, dwant = np_loss_and_grad(logp, old, adv, weights, mask, 0.2, 0.2,
                                     "seq-mean-token-mean")
      den = objective.loss_denominator(jm, cfg.aggregation)
      np.testing.assert_allclose(num / den, want, rtol=1e-5)
      grad = jax.grad(lambda lp: objective.loss_terms(lp, jo, ja, jw, jm, cfg)[0] / den)(jl)
      np.testing.assert_allclose(np.asarray(grad) * mask, dwant * mask, rtol=1e-4,
                                 atol=1e-7)
    # GRPO at negative mass 0.1 is GRPO at negative scale 0.1.
    a = objective.loss_terms(jl, jo, ja, jw, jm, objective.preset("grpo", negative_mass=0.1))
    b = objective.loss_terms(jl, jo, ja, jw, jm, objective.preset("grpo", negative_scale=0.1))
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
    with self.assertRaisesRegex(ValueError, "leave negative_scale at 1.0"):
      objective.LossConfig(negative_mass=0.1, negative_scale=0.5)
    with self.assertRaisesRegex(ValueError, "negative_mass=-1.0 must be >= 0"):
      objective.LossConfig(negative_mass=-1.0)

  @parameterized.parameters("grpo", "rcca", "rcca_neg_mean")
  def test_entropy_top_fraction_zeroes_the_other_tokens(self, name):
    logp, old, adv, wbar, mask, _ = random_inputs(11)
    entropy = np.random.default_rng(11).uniform(0, 3, logp.shape)
    jl, jo, ja, jw, jm, je = f32(logp, old, adv, wbar, mask, entropy)
    off = objective.preset("grpo", policy_loss=name)
    on = objective.preset("grpo", policy_loss=name, entropy_top_fraction=0.2)

    def fn(config, **entropy):
      return objective.loss_terms(jl, jo, ja, jw, jm, config, **entropy)

    base = {"grpo": jnp.ones_like(jl), "rcca": objective.effective_weights(jw, ja),
            "rcca_neg_mean": objective.negative_mean_weights(jw, ja, jm)}[name]
    selected = np_top_entropy_tokens(entropy, mask, 0.2)
    want, _ = objective.loss_terms(jl, jo, ja, base * selected, jm,
                                   objective.LossConfig(policy_loss="weighted"))
    got, stats = fn(on, entropy=je)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    self.assertGreater(float(stats["token_sums"]["zero_weight_share"]),
                       0.7 * float(stats["tokens"]))
    # Off, the entropy is not read: the loss is the one without it.
    nan = jnp.full_like(je, jnp.nan)
    np.testing.assert_array_equal(fn(off, entropy=nan)[0], fn(off)[0])
    with self.assertRaisesRegex(ValueError, "needs the per-token entropy"):
      fn(on)

  def test_objective_passes_the_entropy(self):
    logp, old, adv, wbar, mask, _ = random_inputs(12)
    entropy = np.random.default_rng(12).uniform(0, 3, logp.shape)
    jl, jo, ja, jw, jm, je = f32(logp, old, adv, wbar, mask, entropy)
    batch = {"old_logp": jo, "advantages": ja, "wbar": jw, "loss_mask": jm}
    cfg = objective.preset("grpo", entropy_top_fraction=0.2)
    got, _ = objective.PolicyObjective(cfg, 4).terms(jl, je, batch)
    want, _ = objective.loss_terms(jl, jo, ja, jw, jm, cfg, entropy=je)
    np.testing.assert_array_equal(got, want)

  def test_presets_and_errors(self):
    dapo = objective.preset("dapo")
    self.assertEqual((dapo.aggregation, dapo.eps_high), ("token-mean", 0.28))
    self.assertFalse(objective.preset("dr_grpo").scale_advantages_by_std)
    self.assertEqual(objective.preset("rcca", kl_beta=0.1).kl_beta, 0.1)
    with self.assertRaisesRegex(ValueError, "unknown policy loss"):
      objective.LossConfig(policy_loss="ppo")
    with self.assertRaisesRegex(ValueError, "unknown loss preset"):
      objective.preset("nope")
    with self.assertRaisesRegex(ValueError, "unknown loss config keys"):
      objective.LossConfig.from_mapping({"eps": 0.1})
    with self.assertRaisesRegex(ValueError, "entropy_top_fraction=1.5 must lie in"):
      objective.LossConfig(entropy_top_fraction=1.5)
    self.assertEqual(objective.LossConfig().entropy_top_fraction, 0.0)

  def test_former_loss_name_is_an_alias(self):
    # Configs and committed results (experiments/results/*/summary.json) name it.
    self.assertEqual(objective.policy_loss_name("grpo_neg_scaled"), "rcca_neg_mean")
    self.assertEqual(objective.policy_loss_name("rcca"), "rcca")
    self.assertEqual(objective.LossConfig(policy_loss="grpo_neg_scaled").policy_loss,
                     "grpo_neg_scaled")


class EffectiveWeightsTest(parameterized.TestCase):

  @parameterized.parameters((1.2, 1.0), (1.5, 0.5), (1.0, 1.0))
  def test_matches_numpy_on_random_inputs(self, c, positive_blamed):
    rng = np.random.default_rng(0)
    wbar = rng.choice([1.0, 1.5, 2.5, 3.0, 4.0], (16, 20)).astype(np.float32)
    adv = rng.choice([-1.3, -1e-7, 0.0, 1e-7, 0.9], 16).astype(np.float32)
    got = objective.effective_weights(jnp.asarray(wbar), jnp.asarray(adv), c=c,
                                      positive_blamed=positive_blamed)
    np.testing.assert_array_equal(got, np_effective_weights(wbar, adv, c,
                                                            positive_blamed))
    self.assertEqual(got.dtype, jnp.float32)

  def test_negative_unblamed_one_is_todays_formula_exactly(self):
    rng = np.random.default_rng(1)
    wbar = rng.choice([0.5, 1.0, 1.5, 3.0, 4.0], (16, 20)).astype(np.float32)
    adv = rng.choice([-1.3, -1e-7, 0.0, 0.9], 16).astype(np.float32)
    got = objective.effective_weights(jnp.asarray(wbar), jnp.asarray(adv), c=1.2,
                                      negative_unblamed=1.0)
    np.testing.assert_array_equal(got, np_effective_weights(wbar, adv, 1.2, 1.0))

  @parameterized.parameters(0.0, 0.25)
  def test_negative_unblamed_weights_the_unblamed_tokens_of_negative_responses(self, nu):
    wbar = jnp.asarray([[1.0, 1.5, 3.0, 4.0]] * 2)
    got = objective.effective_weights(wbar, jnp.asarray([-0.5, 0.7]), negative_unblamed=nu)
    np.testing.assert_allclose(got, [[nu, 1.5, 3.0, 4.0],  # blamed tokens keep wbar
                                     [1.2, 1.0, 1.0, 1.0]])  # positive: unchanged

  def test_method_examples(self):
    wbar = jnp.asarray([[1.0, 1.5, 3.0, 4.0]] * 3)
    got = objective.effective_weights(wbar, jnp.asarray([-0.5, 0.0, 0.7]))
    np.testing.assert_allclose(got, [[1.0, 1.5, 3.0, 4.0],   # negative: wbar
                                     [1.2, 1.0, 1.0, 1.0],   # zero counts as >= 0
                                     [1.2, 1.0, 1.0, 1.0]])

  def test_jittable_and_shape_errors(self):
    wbar = jnp.ones((2, 3))
    got = jax.jit(objective.effective_weights)(wbar, jnp.asarray([1.0, -1.0]))
    np.testing.assert_allclose(got, [[1.2] * 3, [1.0] * 3])
    with self.assertRaisesRegex(ValueError, "expected wbar"):
      objective.effective_weights(jnp.ones(3), jnp.ones(3))


class NegativeMeanWeightsTest(parameterized.TestCase):

  @parameterized.parameters(0.0, 0.5, 1.0)
  def test_matches_numpy_and_totals_equal_rcca(self, nu):
    rng = np.random.default_rng(2)
    wbar = rng.choice([1.0, 1.0, 1.5, 3.0, 4.0], (12, 10)).astype(np.float32)
    adv = rng.choice([-1.3, -0.2, 0.0, 0.9], 12).astype(np.float32)
    mask = (np.arange(10)[None] < rng.integers(0, 11, 12)[:, None]).astype(np.float32)
    got = objective.negative_mean_weights(jnp.asarray(wbar), jnp.asarray(adv),
                                          jnp.asarray(mask), negative_unblamed=nu)
    # float32 mean of <= 10 weights: relative error <= gamma_10 ~ 10 u = 6e-7 (u = 2^-24).
    np.testing.assert_allclose(got, np_negative_mean_weights(wbar, adv, mask, nu),
                               rtol=1e-6)
    self.assertEqual(got.dtype, jnp.float32)
    effective = objective.effective_weights(jnp.asarray(wbar), jnp.asarray(adv),
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
    got = objective.negative_mean_weights(wbar, jnp.asarray([-1.0, -0.5, -0.1, 0.7]), mask,
                                          negative_unblamed=0.0)
    np.testing.assert_allclose(got, [[1.5] * 4, [0.0] * 4, [2.0] * 4, [1.2, 1.0, 1.2, 1.2]])

  def test_jittable(self):
    got = jax.jit(objective.negative_mean_weights)(jnp.full((2, 3), 3.0),
                                                   jnp.asarray([-1.0, 1.0]),
                                                   jnp.ones((2, 3)))
    np.testing.assert_allclose(got, [[3.0] * 3, [1.0] * 3])  # wbar 3 > 1: blamed



class AliasTest(parameterized.TestCase):
  """The modules the objective was split over, kept for one release as aliases
  (docs/contracts.md#8-interfaces-of-the-second-wave)."""

  REPO = pathlib.Path(__file__).resolve().parents[2]
  # Alias -> the names its callers used that it still provides.
  ALIASES = {
      "grpo": ("AGGREGATIONS", "EQUAL_ATOL", "WEIGHT_BUCKETS", "group_advantages",
               "zero_advantage_group_fraction", "loss_denominator", "aggregate_numerator",
               "top_entropy_tokens", "policy_loss", "merge_stats", "finalize_stats"),
      "rcca": ("effective_weights", "negative_mean_weights"),
      "losses": ("LossConfig", "PRESETS", "POLICY_LOSS_ALIASES", "preset"),
      "objectives": ("RL_KEYS", "Objective", "PolicyObjective"),
  }

  @parameterized.parameters(*ALIASES)
  def test_alias_exposes_the_same_objects(self, name):
    module = importlib.import_module(f"rcca_jax.rl.{name}")
    self.assertIn("alias kept for one release", module.__doc__.lower())
    public = [n for n in vars(objective) if not n.startswith("_")]
    for attr in (*public, *self.ALIASES[name]):
      self.assertIs(getattr(module, attr), getattr(objective, attr), f"{name}.{attr}")

  def test_nothing_else_imports_the_aliases(self):
    aliases = {f"rcca_jax.rl.{name}" for name in self.ALIASES}
    found = []
    for top in ("rcca_jax", "tests", "benchmarks", "experiments"):
      for path in sorted((self.REPO / top).rglob("*")):
        if "results" in path.relative_to(self.REPO).parts:
          continue  # committed results stay as they were
        if path.suffix == ".py":
          sources = [path.read_text(encoding="utf-8")]
        elif path.suffix == ".ipynb":
          cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
          sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        else:
          continue
        for source in sources:
          for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
              names = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
              names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            else:
              continue
            found += [f"{path.relative_to(self.REPO)}: {n}" for n in sorted(names & aliases)]
    self.assertEqual(found, [])


if __name__ == "__main__":
  absltest.main()
