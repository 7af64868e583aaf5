"""Combining every process's RL metrics row: counters summed, means weighted."""

from absl.testing import absltest

from rcca_jax.train import row_reduce


class CombineTest(absltest.TestCase):

  def test_one_share_is_returned_as_it_is(self):
    row = {"reward_mean": 0.1 + 0.2, "loss": 1.0, "no_reward": 1}
    self.assertEqual(row_reduce.combine([(row, 3)]), row)

  def test_counters_sum_and_means_weight_by_rollouts(self):
    # Process 0: 8 rollouts, 2 without a reward; process 1: 4 rollouts, all rewarded.
    a = {"reward_mean": 0.5, "pass_rate": 0.25, "no_reward": 2, "timeouts": 1,
         "cache_hits": 5, "loss": 0.7, "arm": "rcca"}
    b = {"reward_mean": 0.8, "pass_rate": 1.0, "no_reward": 0, "timeouts": 0,
         "cache_hits": 4, "loss": 0.7, "arm": "rcca"}
    out = row_reduce.combine([(a, 8), (b, 4)])
    self.assertEqual((out["no_reward"], out["timeouts"], out["cache_hits"]), (2, 1, 9))
    # reward_mean over the 6 + 4 rewarded rollouts, pass_rate over all 12.
    self.assertAlmostEqual(out["reward_mean"], (6 * 0.5 + 4 * 0.8) / 10)
    self.assertAlmostEqual(out["pass_rate"], (8 * 0.25 + 4 * 1.0) / 12)
    self.assertAlmostEqual(out["loss"], 0.7)  # global metrics: equal in every share
    self.assertEqual(out["arm"], "rcca")

  def test_partial_metrics_and_zero_weights(self):
    a = {"reward_mean": 0.2, "no_reward": 4, "only_here": 3.0, "flag": True}
    b = {"reward_mean": 0.6, "no_reward": 4}
    out = row_reduce.combine([(a, 4), (b, 4)])
    self.assertAlmostEqual(out["reward_mean"], 0.4)  # no rewarded rollout: plain mean
    self.assertEqual(out["only_here"], 3.0)  # combined over the shares that have it
    self.assertIs(out["flag"], True)  # booleans are not averaged


if __name__ == "__main__":
  absltest.main()
