"""experiments/credit_onestep_stats.py: pooled pairs, bootstrap over batches, the
comparisons and the resolution, on hand-made pairs."""

import numpy as np
from absl.testing import absltest

from experiments import credit_onestep_stats as onestep_stats


class StatisticsTest(absltest.TestCase):
  def test_cluster_stat_pools_pairs_and_resamples_batches(self):
    values = np.asarray([1.0, 3.0, 2.0])
    s = onestep_stats.cluster_stat(values, [0, 0, 1], reps=500, seed=0)
    self.assertEqual((s["mean"], s["pairs"], s["batches"]), (2.0, 3, 2))
    self.assertTrue(1.0 <= s["interval"][0] <= s["interval"][1] <= 3.0)
    same = onestep_stats.cluster_stat(np.full(4, 0.5), [0, 1, 2, 3], reps=100, seed=0)
    self.assertEqual((same["interval"], same["half_width"]), ([0.5, 0.5], 0.0))
    self.assertIsNone(onestep_stats.cluster_stat(np.zeros(0), [], reps=10, seed=0)["mean"])

  def test_comparisons(self):
    self.assertEqual(onestep_stats.comparisons(["grpo", "rcca_focus", "rcca_focus_placebo"]),
                     [("rcca_focus", "rcca_focus_placebo"), ("rcca_focus", "grpo"),
                      ("rcca_focus_placebo", "grpo")])
    # Every arm X beside X_placebo is a location contrast, after focus - placebo.
    arms = ["rcca", "rcca_placebo", "rcca_focus_mass01", "rcca_focus",
            "rcca_focus_placebo", "rcca_focus_mass01_placebo"]
    self.assertEqual(onestep_stats.comparisons(arms),
                     [("rcca_focus", "rcca_focus_placebo"), ("rcca", "rcca_placebo"),
                      ("rcca_focus_mass01", "rcca_focus_mass01_placebo")])

  def test_placebo_draws_are_compared_as_their_mean(self):
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo", "rcca_focus_placebo_d2",
            "rcca_focus_placebo_d10"]
    self.assertEqual(onestep_stats.draws_of(onestep_stats.PLACEBO_MEAN, arms),
                     ["rcca_focus_placebo", "rcca_focus_placebo_d2",
                      "rcca_focus_placebo_d10"])
    self.assertEqual(onestep_stats.draws_of("grpo", arms), ["grpo"])
    self.assertEqual(onestep_stats.comparisons(arms),
                     [("rcca_focus", "rcca_focus_placebo"),
                      ("rcca_focus", onestep_stats.PLACEBO_MEAN), ("rcca_focus", "grpo"),
                      ("rcca_focus_placebo", "grpo"), (onestep_stats.PLACEBO_MEAN, "grpo")])
    pairs = [{"before": 0.0, "after": {"rcca_focus_placebo": 0.3,
                                       "rcca_focus_placebo_d2": -0.1,
                                       "rcca_focus_placebo_d10": 0.1}}]
    mean = onestep_stats.PLACEBO_MEAN
    np.testing.assert_allclose(onestep_stats.changes(pairs, mean, "margin"), [0.1])
    p = [onestep_stats.p_bugs(np.asarray([m]))[0] - 0.5 for m in (0.3, -0.1, 0.1)]
    np.testing.assert_allclose(onestep_stats.changes(pairs, mean, "p_bug"), [np.mean(p)])

  def test_resolution_against_the_mean_of_the_draws(self):
    rng = np.random.default_rng(0)
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo", "rcca_focus_placebo_d1"]
    pairs = [{"step": step, "blamed": bool(step % 2), "before": 0.0,
              "after": dict(zip(arms, rng.normal(size=len(arms))))} for step in range(8)]
    stats = onestep_stats.statistics(pairs, arms, reps=200, seed=0)
    r = onestep_stats.resolution(stats, 18.0, "")
    mean = onestep_stats.find_difference(stats, "rcca_focus", onestep_stats.PLACEBO_MEAN)
    self.assertEqual(r["placebo_mean"]["draws"], 2)
    self.assertEqual(r["placebo_mean"]["blamed_margin"],
                     mean["blamed"]["margin"]["half_width"])
    focus = onestep_stats.changes(pairs, "rcca_focus", "margin")
    placebos = [onestep_stats.changes(pairs, a, "margin") for a in arms[2:]]
    self.assertAlmostEqual(mean["all"]["margin"]["mean"],
                           float(np.mean(focus - np.mean(placebos, axis=0))))
    self.assertIn("Against the mean of 2 placebo layouts", onestep_stats.resolution_text(r))

  def test_property_shares_sum_the_batches_counts(self):
    got = onestep_stats.property_shares([{"tokens": 10, "responses": 2, "fix": 0.5,
                                    "fix_pairs": 1},
                                   {"tokens": 30, "responses": 2, "fix": 1.0,
                                    "fix_pairs": 2}])
    self.assertEqual((got["shares"]["response_tokens"], got["shares"]["fix"]), (10.0, 0.5))
    self.assertIsNone(got["shares"]["bug_token_share"])
    self.assertEqual(onestep_stats.property_shares([])["counts"], {})


if __name__ == "__main__":
  absltest.main()
