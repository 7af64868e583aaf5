"""Issue 54's study report (experiments/natural_v2_report.py) on a summary built by
hand: every number below is worked out from the points."""

import json
import os

import numpy as np
from absl.testing import absltest

from experiments import natural_v2_report as report_lib
from rcca_jax.train import eval_loop

DEV = report_lib.DEV


def point(dev, shares=None, **extra):
  p = {"pass_rate": dev * 2 / 3, "reward_mean": 0.4, DEV: dev,
       "split/novel/pass_rate": 0.0, "counter_copy/pass_rate": dev, **extra}
  if shares is not None:  # request id -> share of 16 samples passing
    p.update(pass_at_1_tasks=shares, samples_per_request=16)
  return p


POST_SHARES = {"counter_copy-f0-000000": 0.25, "counter_copy-f0-000001": 0.0,
               "counter_copy-f0-n000000": 0.0}


def run(seed, curve, end_shares):
  """A run whose dev pass is 0.2 post-SFT, then `curve` at steps 25, 50, ..."""
  evals = [{"step": 25 * (i + 1), "rl_seconds": 1.0, **point(v)}
           for i, v in enumerate(curve[:-1])]
  evals.append({"step": 25 * len(curve), "rl_seconds": 1.0,
                **point(curve[-1], end_shares)})
  return {"seed": seed, "post_sft": point(0.2, POST_SHARES), "evals": evals,
          "rl_steps": 25 * len(curve), "rl": {}}


def summary():
  end = {"counter_copy-f0-000000": 0.5, "counter_copy-f0-000001": 0.0625,
         "counter_copy-f0-n000000": 1.0}
  return {"arms": {
      "grpo": [run(0, [0.3, 0.3], end), run(1, [0.2, 0.4], end)],
      "rcca": [run(0, [0.4, 0.5], end), run(1, [0.2, 0.3], POST_SHARES)]}}


class ReportTest(absltest.TestCase):

  def test_split_of_an_id(self):
    self.assertEqual(report_lib.split_of_id("counter_copy-f0-n000012"), "novel")
    self.assertEqual(report_lib.split_of_id("counter_copy-f0-000012"), "dev")

  def test_pass_at_k_counts_the_dev_requests_alone(self):
    p = point(0.2, {"a-f0-000000": 0.25, "a-f0-000001": 0.0, "a-f0-n000000": 1.0})
    self.assertAlmostEqual(report_lib.pass_at(p, 1), 0.125)
    self.assertAlmostEqual(report_lib.pass_at(p, 16), 0.5)
    self.assertAlmostEqual(report_lib.pass_at(p, 4),
                           (eval_loop.pass_at_k(16, 4, 4) + 0.0) / 2)
    self.assertAlmostEqual(report_lib.pass_at(p, 1, "novel"), 1.0)
    self.assertIsNone(report_lib.pass_at(point(0.2), 1))  # not sampled

  def test_gains_pass_at_k_and_pairs(self):
    rep = report_lib.report(summary())
    grpo, rcca = rep["arms"]["grpo"], rep["arms"]["rcca"]
    np.testing.assert_allclose(grpo["gain_per_seed"], [0.1, 0.2], atol=1e-12)
    self.assertAlmostEqual(grpo["gain"], 0.15)
    lo, hi = grpo["gain_interval"]
    self.assertTrue(0.1 - 1e-12 <= lo <= hi <= 0.2 + 1e-12, (lo, hi))
    self.assertAlmostEqual(grpo["auc"], np.mean([(0.2 + 0.3 + 0.3) / 3,
                                                 (0.2 + 0.2 + 0.4) / 3]))
    self.assertAlmostEqual(rcca["best"], np.mean([0.5, 0.3]))
    # pass@16 on the two dev requests: 1 of 2 post-SFT; at the end both pass (the
    # second passes 1 of 16 times) for GRPO, and one seed of rcca is unchanged.
    self.assertAlmostEqual(grpo["post_sft_pass_at_16"], 0.5)
    self.assertAlmostEqual(grpo["final_pass_at_16"], 1.0)
    self.assertAlmostEqual(rcca["final_pass_at_16"], 0.75)
    self.assertAlmostEqual(grpo["final_pass_at_1"], (0.5 + 0.0625) / 2)
    paired = rep["paired"]["rcca"]
    np.testing.assert_allclose(paired["final"]["per_seed"], [0.2, -0.1], atol=1e-12)
    np.testing.assert_allclose(paired["final_pass_at_16"]["per_seed"], [0.0, -0.5])
    np.testing.assert_allclose(paired["auc"]["per_seed"], [0.1, -0.1 / 3], atol=1e-12)
    self.assertNotIn("grpo", rep["paired"])
    self.assertEqual(rep["families"]["rcca"]["counter_copy"],
                     {"post_sft": 0.2, "final": np.mean([0.5, 0.3])})

  def test_focus_against_its_placebo_and_the_gates(self):
    def gated(seed, curve, gates):
      r = run(seed, curve, POST_SHARES)
      r["evals"][-1]["split/dev/gates_pass"] = gates
      return r
    rep = report_lib.report({"arms": {
        "grpo": [gated(0, [0.3], 0.8), gated(1, [0.3], 0.9)],
        "rcca_focus": [gated(0, [0.4], 0.7), gated(1, [0.3], 0.6)],
        "rcca_focus_placebo": [gated(1, [0.2], 0.9), gated(2, [0.5], 0.5)]}})
    np.testing.assert_allclose(rep["paired"]["rcca_focus"]["final_gates"]["per_seed"],
                               [-0.1, -0.3], atol=1e-12)
    pair = rep["pairs"]["rcca_focus - rcca_focus_placebo"]
    self.assertEqual(pair["final"]["seeds"], [1])  # the seeds both arms have
    np.testing.assert_allclose(pair["final"]["per_seed"], [0.1], atol=1e-12)
    np.testing.assert_allclose(pair["final_gates"]["per_seed"], [-0.3], atol=1e-12)
    self.assertIn("| rcca_focus - rcca_focus_placebo | +0.050 [+0.050, +0.050] p=1.00 "
                  "(n=1) | +0.100 [",
                  report_lib.markdown(rep))

  def test_command_prints_the_tables_and_writes_the_report(self):
    tmp = self.create_tempdir().full_path
    path, out = os.path.join(tmp, "summary.json"), os.path.join(tmp, "report.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(summary(), f)
    self.assertEqual(report_lib.main([path, "--json", out]), 0)
    with open(out, encoding="utf-8") as f:
      self.assertAlmostEqual(json.load(f)["arms"]["grpo"]["gain"], 0.15)
    text = report_lib.markdown(report_lib.report(summary()))
    self.assertIn("| grpo | 2 | 50, 50 | 0.200 | 0.350 | +0.150 [", text)
    self.assertIn("| rcca | +", text)
    self.assertIn("| grpo | 0.200 -> 0.350 |", text)


if __name__ == "__main__":
  absltest.main()
