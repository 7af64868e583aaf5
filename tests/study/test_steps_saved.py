"""Steps saved (docs/ablation.md#metrics): RL steps and seconds until mean p_bug is below
half its post-SFT value, and until it is at or below GRPO's final value, their paired
ratios to GRPO, recomputed from summaries alone."""

import math
import os
import tempfile

import numpy as np
from absl.testing import absltest

from rcca_jax.study import ablation_report
from rcca_jax.study import stats
from rcca_jax.study import sweep_report


def run(seed: int, bug_probs, seconds_per_step: float = 10.0) -> dict:
  """Post-SFT then evaluations every 3 RL steps with these mean p_bug."""
  points = [{"pass_rate": 0.5, "reward_mean": 0.5, "bug_prob_mean": p, "pass_at_1": 0.3}
            for p in bug_probs]
  return {"seed": seed, "post_sft": points[0], "rl_steps": 3 * (len(points) - 1),
          "rl": {}, "evals": [dict(step=3 * i, rl_seconds=3 * i * seconds_per_step, **p)
                              for i, p in enumerate(points[1:], start=1)]}


def summary() -> dict:
  """GRPO halves p_bug at step 9 on seeds 0-2, never on seed 3; focus at step 3 or 6,
  never on seed 2; focus's steps take 12 s against GRPO's 10 s."""
  grpo = [run(0, (0.6, 0.5, 0.4, 0.29)), run(1, (0.5, 0.4, 0.3, 0.2)),
          run(2, (0.6, 0.5, 0.45, 0.25)), run(3, (0.6, 0.5, 0.4, 0.35))]
  focus = [run(0, (0.6, 0.25, 0.2, 0.1), 12.0), run(1, (0.5, 0.3, 0.2, 0.1), 12.0),
           run(2, (0.6, 0.5, 0.45, 0.4), 12.0), run(3, (0.6, 0.2, 0.1, 0.1), 12.0)]
  return {"arms": {"grpo": grpo, "rcca_focus": focus}}


class StepsSavedTest(absltest.TestCase):

  def test_first_evaluation_below_half_of_post_sft(self):
    self.assertEqual(stats.reaches_fraction(run(0, (0.6, 0.3, 0.29, 0.1))),
                     (6, 60.0))  # 0.29 < 0.5 x 0.6; 0.3 is not
    self.assertIsNone(stats.reaches_fraction(run(0, (0.6, 0.3, 0.3))))
    self.assertEqual(stats.reaches_fraction(run(0, (0.5, 0.4)), 0.9), (3, 30.0))
    no_metric = run(0, (0.6, 0.2))
    del no_metric["evals"][0]["bug_prob_mean"]
    self.assertIsNone(stats.reaches_fraction(no_metric))

  def test_first_evaluation_at_or_below_a_value(self):
    self.assertEqual(stats.reaches_value(run(0, (0.6, 0.3, 0.29, 0.1)), 0.29),
                     (6, 60.0))  # at the value counts
    self.assertIsNone(stats.reaches_value(run(0, (0.6, 0.3, 0.29)), 0.2))
    # Post-SFT is not an RL evaluation: a run already below the value needs one step.
    self.assertEqual(stats.reaches_value(run(0, (0.1, 0.2, 0.05)), 0.15),
                     (6, 60.0))

  def test_steps_to_the_baselines_final_value(self):
    # GRPO's finals per seed: 0.29, 0.2, 0.25, 0.35, each first reached at its step 9.
    comp = stats.compare(summary()["arms"])
    grpo = comp["grpo"]["steps_to_baseline_bug_prob"]
    self.assertEqual((grpo["steps"], grpo["targets"]), ([9, 9, 9, 9], [0.29, 0.2, 0.25, 0.35]))
    self.assertNotIn("match_steps_ratio", comp["grpo"])
    focus = comp["rcca_focus"]
    self.assertEqual(focus["steps_to_baseline_bug_prob"]["steps"], [3, 6, None, 3])
    # The greedy pass rate's steps to GRPO's final one stay beside it (all 0.5: step 0).
    self.assertEqual(focus["steps_to_baseline_final"], [0, 0, 0, 0])
    steps = focus["match_steps_ratio"]
    self.assertEqual((steps["seeds"], steps["arm_never"], steps["baseline_never"]),
                     ([0, 1, 3], [2], []))
    np.testing.assert_allclose(steps["per_seed"], [3 / 9, 6 / 9, 3 / 9])
    np.testing.assert_allclose(steps["geomean"], (2 / 27) ** (1 / 3))
    np.testing.assert_allclose(focus["match_seconds_ratio"]["per_seed"],
                               [36 / 90, 72 / 90, 36 / 90])
    self.assertEqual(sweep_report.half_ratios(summary(), measure="match")["rcca_focus"],
                     steps)

  def test_figure_shows_the_match_ratio_where_no_run_halves(self):
    slow = {"arms": {"grpo": [run(0, (0.6, 0.55, 0.5))],
                     "rcca_focus": [run(0, (0.6, 0.5, 0.4))]}}
    label, ratios = sweep_report.steps_ratios(slow)
    self.assertEqual(label, "RL steps to grpo's final p_bug / its own, 95% CI")
    self.assertEqual(ratios["rcca_focus"]["per_seed"], [0.5])  # step 3 against GRPO's 6
    label, _ = sweep_report.steps_ratios(summary())
    self.assertEqual(label, "RL steps to half p_bug / grpo's, 95% CI")

  def test_ratio_test_pairs_seeds_both_reached(self):
    test = stats.ratio_test({0: 3.0, 1: 6.0, 2: None, 3: 3.0},
                            {0: 9.0, 1: 6.0, 2: 9.0, 3: None})
    self.assertEqual(test["seeds"], [0, 1])
    np.testing.assert_allclose(test["per_seed"], [1 / 3, 1.0])
    np.testing.assert_allclose(test["geomean"], math.sqrt(1 / 3))
    self.assertEqual((test["arm_never"], test["baseline_never"]), ([2], [3]))
    lo, hi = test["interval"]
    self.assertTrue(1 / 3 - 1e-12 <= lo <= test["geomean"] <= hi <= 1.0 + 1e-12)
    self.assertNotIn("geomean", stats.ratio_test({0: None}, {0: 3.0}))

  def test_comparison_from_the_summary_alone(self):
    comp = stats.compare(summary()["arms"])
    self.assertEqual(comp["grpo"]["steps_to_half"]["steps"], [9, 9, 9, None])
    self.assertNotIn("half_steps_ratio", comp["grpo"])
    focus = comp["rcca_focus"]
    self.assertEqual(focus["steps_to_half"]["steps"], [3, 6, None, 3])
    self.assertEqual(focus["steps_to_half"]["seconds"], [36.0, 72.0, None, 36.0])
    steps = focus["half_steps_ratio"]
    self.assertEqual(steps["seeds"], [0, 1])
    np.testing.assert_allclose(steps["geomean"], math.sqrt(3 / 9 * 6 / 9))
    self.assertEqual((steps["arm_never"], steps["baseline_never"]), ([2], [3]))
    np.testing.assert_allclose(focus["half_seconds_ratio"]["per_seed"],
                               [36 / 90, 72 / 90])
    self.assertEqual(sweep_report.half_ratios(summary())["rcca_focus"], steps)
    self.assertIn("0.47 [0.33, 0.67] (2 seeds", ablation_report.ratio_cell(steps))
    self.assertIn("1 arm never; 1 baseline never", ablation_report.ratio_cell(steps))

  def test_baseline_mean_curve_crossing(self):
    # GRPO's mean over seeds: 0.575 post-SFT, then 0.475, 0.3875, 0.2725 (< 0.2875).
    self.assertEqual(sweep_report.baseline_half_step(summary()), 9)
    slow = {"arms": {"grpo": [run(0, (0.6, 0.5, 0.4))]}}
    self.assertIsNone(sweep_report.baseline_half_step(slow))
    self.assertIn("s1_0: step 9", sweep_report.half_markdown({"s1_0": summary()}))

  def test_head_to_head_pairs_two_arms_by_seed(self):
    # The placebo: seed 0 like focus, seed 1 slower (halves at 9), seed 3 absent.
    data = summary()
    data["arms"]["rcca_focus_placebo"] = [
        run(0, (0.6, 0.25, 0.2, 0.1)), run(1, (0.5, 0.4, 0.3, 0.2)),
        run(2, (0.6, 0.5, 0.45, 0.4))]
    test = sweep_report.head_to_head(data, "rcca_focus", "rcca_focus_placebo")
    self.assertEqual(test["auc"]["seeds"], [0, 1, 2])
    # AUCs (means over the 4 points): seed 1 focus 0.275, placebo 0.35; seeds 0, 2 equal.
    np.testing.assert_allclose(test["auc"]["per_seed"], [0.0, -0.075, 0.0], atol=1e-12)
    self.assertEqual(test["steps_ratio"]["seeds"], [0, 1])  # seed 2: neither got there
    np.testing.assert_allclose(test["steps_ratio"]["per_seed"], [1.0, 6 / 9])
    # The placebo's finals 0.1, 0.2, 0.4, each reached at its step 9; focus: 9, 6, 9.
    np.testing.assert_allclose(test["match_ratio"]["per_seed"], [1.0, 6 / 9, 1.0])
    self.assertIsNone(sweep_report.head_to_head(data, "rcca_focus", "grpo_neg_scaled"))
    text = sweep_report.controls_markdown({"s1_0": data})
    self.assertIn("| s1_0 | rcca_focus − rcca_focus_placebo | -0.025 [", text)
    self.assertIn("| 0.87 [0.67, 1.00] (3 seeds) |", text)  # (6/9)^(1/3)
    self.assertNotIn("grpo_neg_scaled", text)

  def test_tables_and_figure(self):
    text = ablation_report.markdown({"comparison": stats.compare(
        summary()["arms"]), "arms": summary()["arms"]})
    self.assertIn("| rcca_focus | 3, 6, never, 3 | 36, 72, never, 36 | 0.47 [", text)
    self.assertIn("| rcca_focus | 3, 6, never, 3 | 36, 72, never, 36 | 0.42 [", text)
    with tempfile.TemporaryDirectory() as d:
      sweep_report.write_all(d, {"s1_0": summary()})
      with open(os.path.join(d, "sweep.md"), encoding="utf-8") as f:
        text = f.read()
      self.assertIn("| s1_0 | rcca_focus | 3, 6, never, 3 | 0.47 [", text)
      self.assertIn("(2 seeds; 1 arm never; 1 baseline never) | 3, 6, never, 3 | 0.42 [",
                    text)
      self.assertIn("Head to head", text)
      self.assertGreater(os.path.getsize(os.path.join(d, "credit_sweep.png")), 10_000)


if __name__ == "__main__":
  absltest.main()
