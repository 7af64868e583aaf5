"""RL batches padded to their longest row rounded up to `rl.length_bucket` (issue 50):
the rows are those of the `max_len` batch cut short, the RL step on them gives the same
loss and gradients within float32 rounding, and a run compiles one step per length
bucket it meets."""

import jax
import numpy as np
from absl.testing import absltest, parameterized

from rcca_jax.data import batching
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts
from rcca_jax.train import rollouts
from tests.fixtures import rl_fixtures

OPT = optim.OptimizerConfig(learning_rate=1e-3, total_steps=10)


def _rollouts(lengths, seed: int = 0) -> list[rollouts.Rollout]:
  """Groups of 4 rollouts of (prompt, response) `lengths`, random tokens and rewards."""
  rng = np.random.default_rng(seed)
  out = []
  for i, (p, n) in enumerate(lengths):
    prompt = [int(t) for t in rng.integers(2, 64, p)]
    out.append(rl_fixtures.random_rollout(rng, prompt, n, i % 4))
  return out


def _batch(items, max_len: int, bucket: int) -> dict[str, np.ndarray]:
  return rollouts.rl_batch(items, rollouts.group_advantages(items, 4), max_len=max_len,
                           pad_id=0, length_bucket=bucket)


# Rows of 9 to 19 tokens: 20 wide in buckets of 10, 40 at most.
LENGTHS = [(4, 5), (3, 12), (5, 9), (4, 15), (6, 2), (5, 14), (3, 8), (6, 11)]


class BucketLengthTest(absltest.TestCase):

  def test_rounds_up_to_the_bucket_and_stops_at_max_len(self):
    cases = {(0, 480, 64): 64, (1, 480, 64): 64, (64, 480, 64): 64, (65, 480, 64): 128,
             (385, 480, 64): 448, (449, 480, 64): 480, (480, 480, 64): 480,
             (500, 480, 64): 480, (300, 480, 0): 480, (7, 8, 64): 8}
    for (longest, max_len, bucket), want in cases.items():
      self.assertEqual(batching.bucket_length(longest, max_len, bucket), want,
                       (longest, max_len, bucket))
    with self.assertRaises(ValueError):
      batching.bucket_length(10, 480, -1)

  def test_bucketed_rows_are_the_full_rows_cut_short(self):
    items = _rollouts(LENGTHS)
    full, short = _batch(items, 40, 0), _batch(items, 40, 10)
    self.assertEqual(full["input_ids"].shape, (8, 40))
    self.assertEqual(short["input_ids"].shape, (8, 20))
    self.assertEqual(set(full), set(short))
    for name, x in full.items():
      if x.ndim == 2:
        np.testing.assert_array_equal(short[name], x[:, :20], err_msg=name)
        # What was cut is padding only: no token, no loss, the fill values.
        np.testing.assert_array_equal(x[:, 20:], np.full_like(x[:, 20:], x[0, -1]),
                                      err_msg=name)
      else:
        np.testing.assert_array_equal(short[name], x, err_msg=name)
    self.assertEqual(full["attention_mask"][:, 20:].sum(), 0.0)

  def test_a_row_longer_than_max_len_is_refused(self):
    with self.assertRaisesRegex(ValueError, "longer than max_len=16"):
      _batch(_rollouts(LENGTHS), 16, 10)


class SameStepTest(parameterized.TestCase):

  @parameterized.parameters(("llama",), ("ling",))
  def test_gradients_within_float32_rounding_of_the_full_width(self, family):
    """The step on rows cut to the bucket against rows of `max_len`.

    Every real position computes the same values from the same inputs: positions are
    counted from the row's start, attention is causal (no real query sees a padded
    key) and padded keys are masked to an exact 0 weight, the KDA recurrence runs
    forward in time, and padded positions carry loss mask 0, so their per-token loss
    terms and every gradient contribution they make are exact zeros (their activations
    are finite). The two steps therefore sum the same nonzero terms; only the
    contraction lengths differ (attention over L keys, weight gradients over B*L
    positions), which lets XLA block and order the float32 sums differently. A sum of
    n terms in any order is within gamma_n = n*u/(1 - n*u) of exact relative to the sum
    of the terms' magnitudes (u = 2^-24; Higham §3.1, §4.2), so the two gradients
    differ by at most 2 * gamma_n of that scale, n counted at the full width
    (`rl_fixtures.assert_within_rounding`). A wrong cut (a response token or its
    old log-prob dropped, a position shifted) moves entries by a share of order one
    of that scale, some 1 / (2 gamma_n) ~ 10^4 times the bound here."""
    items = _rollouts(LENGTHS, seed=1)
    config = objective_lib.preset("rcca", kl_beta=0.05)
    objective = ts.PolicyObjective(config, 4)
    fmodel = rl_fixtures.functional_model(family)
    fn = jax.jit(ts.make_gradient_fn(fmodel, objective))
    rng = np.random.default_rng(2)
    out, batches = {}, {}
    for bucket in (0, 10):
      batch = _batch(items, 40, bucket)
      batch["ref_logp"] = np.where(
          batch["loss_mask"] > 0, batch["old_logp"]
          + 0.1 * rng.standard_normal(batch["old_logp"].shape), 0.0).astype(np.float32)
      if bucket:  # the same reference values on the cut rows
        batch["ref_logp"] = batches[0]["ref_logp"][:, :batch["input_ids"].shape[1]]
      batches[bucket] = batch
      loss, grads, stats, _ = fn(fmodel.params, fmodel.model_state,
                                 ts.numpy_batch(batch, objective.keys))
      out[bucket] = (loss, grads, objective_lib.finalize_stats(stats))
    self.assertEqual(batches[10]["input_ids"].shape, (8, 20))
    (loss0, grads0, m0), (loss1, grads1, m1) = out[0], out[10]
    self.assertGreater(abs(float(loss0)), 1e-3)
    # The loss: per-row sums of up to 40 terms, then 8 rows: 2 * gamma_48 ~ 6e-6 of
    # the summed magnitudes (each |term| is at most a few times |loss| here).
    np.testing.assert_allclose(loss1, loss0, rtol=1e-5, atol=1e-7)
    full = batches[0]
    scale = rl_fixtures.gradient_term_scale(fmodel, full, config)
    rl_fixtures.assert_within_rounding(grads1, grads0, scale,
                                       rl_fixtures.family_reduction_length(family, full))
    for name in m0:
      np.testing.assert_allclose(m1[name], m0[name], rtol=1e-5, atol=1e-7, err_msg=name)


class CompileCountTest(absltest.TestCase):

  def test_one_step_and_one_logprob_program_per_bucket(self):
    """8 steps whose longest rows fall in 4 buckets of 10 (max_len 40: at most 4)
    compile the train step and the log-prob program 4 times each."""
    fmodel = rl_fixtures.functional_model("llama")
    objective = ts.PolicyObjective(objective_lib.preset("grpo"), 4)
    step, _ = ts.build_step(fmodel, objective, OPT)
    logp = logprobs_lib.compile_logprob_fn(fmodel, ts.StepConfig(), 1)
    state = ts.init_state(fmodel, OPT)
    responses = (5, 12, 7, 25, 14, 33, 9, 28)  # longest rows 10..38 tokens
    widths = []
    for i, n in enumerate(responses):
      lengths = [(4, n)] + [(3, 4)] * 7
      batch = _batch(_rollouts(lengths, seed=i), 40, 10)
      widths.append(batch["input_ids"].shape[1])
      old = logp(state.params, state.model_state, batch)
      self.assertEqual(old.shape, batch["input_ids"].shape)
      state, metrics = step(state, ts.numpy_batch(batch, objective.keys))
    self.assertTrue(np.isfinite(float(metrics["loss"])))
    self.assertEqual(widths, [10, 20, 20, 30, 20, 40, 20, 40])
    self.assertEqual(step._cache_size(), 4)  # pylint: disable=protected-access
    self.assertEqual(logp._cache_size(), 4)  # pylint: disable=protected-access


if __name__ == "__main__":
  absltest.main()
