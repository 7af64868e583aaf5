"""The ablation report's exact metrics: AUC, steps to a threshold, paired sign-flip
tests (seed and site level), recomputation from summary.json, older summaries."""

import itertools
import json
import os
import struct

import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.study import ablation_report
from rcca_jax.study import stats

COMMITTED = "experiments/results/ablation_small/summary.json"


def _write(path, name, obj):
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, name), "w", encoding="utf-8") as f:
    if name.endswith(".jsonl"):
      f.writelines(json.dumps(row) + "\n" for row in obj)
    else:
      json.dump(obj, f)


def _sites(p_bugs):
  """Eval-summary site records: bug sites t0/bug0, t1/bug0 and a neutral one."""
  out = [{"task_id": f"t{i}", "site": "bug0", "kind": "bug", "p_bug": p,
          "logp": {"reference": -1.0, "bug": float(np.log(p / (1 - p))) - 1.0}}
         for i, p in enumerate(p_bugs)]
  out.append({"task_id": "t0", "site": "neutral0", "kind": "neutral", "p_bug": None,
              "logp": {"reference": -1.0, "neutral": -2.0}})
  return out


def fake_exact_run(workdir, seed, arm, post, curve):
  """An arm's run whose evaluations log bug_prob_mean and pass_at_1 and write site
  records. `post` / each `curve` item: (p_bug of t0, p_bug of t1, pass_at_1)."""
  def point(values):
    p0, p1, pass_at_1 = values
    return {"pass_rate": 0.5, "reward_mean": 0.5, "bug_prob_mean": (p0 + p1) / 2,
            "pass_at_1": pass_at_1, "sampled_reward_mean": 0.6}

  sft = os.path.join(workdir, f"seed_{seed}", "sft")
  _write(sft, "metrics.jsonl", [{"stage": "eval", "step": 10, "after": "sft",
                                 **point(post)}])
  _write(os.path.join(sft, "eval", "sft_000010"), "summary.json",
         {**point(post), "sites": _sites(post[:2])})
  rows = []
  for step, values in zip((4, 8), curve):
    rows.append({"stage": "rl", "step": step, "reward_mean": 0.5, "pass_rate": 0.5})
    rows.append({"stage": "eval", "step": step, "after": "rl", **point(values)})
    _write(os.path.join(workdir, f"seed_{seed}", arm, "eval", f"rl_{step:06d}"),
           "summary.json", {**point(values), "sites": _sites(values[:2])})
  _write(os.path.join(workdir, f"seed_{seed}", arm), "metrics.jsonl", rows)


def _png_width(path):
  with open(path, "rb") as f:
    return struct.unpack(">I", f.read(24)[16:20])[0]


class SignFlipTest(parameterized.TestCase):

  @parameterized.parameters((5, 2 / 32), (6, 2 / 64), (8, 2 / 256))
  def test_all_positive_seeds_give_the_smallest_p(self, n, expected):
    self.assertAlmostEqual(stats.sign_flip_p(np.linspace(0.1, 0.3, n)),
                           expected)

  def test_known_cases(self):
    self.assertEqual(stats.sign_flip_p([1.0, -1.0]), 1.0)
    self.assertEqual(stats.sign_flip_p([0.0, 0.0, 0.0]), 1.0)
    # |mean| of +-1, +-2, +-3 reaches 2 only for (+,+,+) and (-,-,-).
    self.assertAlmostEqual(stats.sign_flip_p([1.0, 2.0, 3.0]), 2 / 8)
    self.assertTrue(np.isnan(stats.sign_flip_p([])))

  def test_enumeration_matches_brute_force_with_strata(self):
    rng = np.random.default_rng(1)
    d = rng.normal(0.2, 1.0, 7)
    strata = [0, 0, 0, 1, 1, 2, 2]
    def stat(x):
      return abs(np.mean([np.mean([v for v, s in zip(x, strata) if s == g])
                          for g in (0, 1, 2)]))
    observed = stat(d)
    hits = [stat(d * np.asarray(signs)) >= observed - 1e-12
            for signs in itertools.product([1.0, -1.0], repeat=7)]
    self.assertAlmostEqual(stats.sign_flip_p(d, strata), np.mean(hits))
    with self.assertRaisesRegex(ValueError, "2 strata labels for 7"):
      stats.sign_flip_p(d, [0, 1])

  def test_monte_carlo_above_the_enumeration_limit(self):
    p = stats.sign_flip_p(np.full(20, 0.1), reps=5000)
    self.assertAlmostEqual(p, 1 / 5001)  # only the draws (+..+), (-..-) reach it
    p = stats.sign_flip_p(np.random.default_rng(0).normal(0, 1, 40), reps=5000)
    self.assertTrue(0.05 < p <= 1.0, p)


class CurveMetricsTest(absltest.TestCase):

  RUN = {"seed": 0, "post_sft": {"bug_prob_mean": 0.6, "pass_at_1": 0.2},
         "evals": [{"step": 4, "bug_prob_mean": 0.3, "pass_at_1": 0.4},
                   {"step": 8, "bug_prob_mean": 0.05, "pass_at_1": 0.9}]}

  def test_auc_is_the_mean_over_evaluations_with_post_sft(self):
    self.assertAlmostEqual(stats.auc(self.RUN, "bug_prob_mean"), 0.95 / 3)
    self.assertAlmostEqual(stats.auc(self.RUN, "pass_at_1"), 0.5)
    self.assertIsNone(stats.auc(self.RUN, "other"))

  def test_steps_below_threshold(self):
    self.assertEqual(stats.steps_below(self.RUN, 0.1), 8)
    self.assertEqual(stats.steps_below(self.RUN, 0.7), 0)
    self.assertIsNone(stats.steps_below(self.RUN, 0.01))
    old = {"post_sft": {"pass_rate": 0.5}, "evals": [{"step": 4, "pass_rate": 1.0}]}
    self.assertIsNone(stats.steps_below(old, 0.1))


class ExactReportTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    post = (0.6, 0.8, 0.2)  # one SFT checkpoint per seed, shared by both arms
    fake_exact_run(self.dir, 0, "grpo", post, [(0.5, 0.7, 0.3), (0.4, 0.6, 0.4)])
    fake_exact_run(self.dir, 0, "rcca", post, [(0.3, 0.6, 0.4), (0.05, 0.13, 0.6)])
    fake_exact_run(self.dir, 1, "grpo", post, [(0.6, 0.8, 0.2), (0.5, 0.7, 0.3)])
    fake_exact_run(self.dir, 1, "rcca", post, [(0.5, 0.8, 0.3), (0.4, 0.7, 0.3)])
    self.summary = ablation_report.collect(self.dir, ["grpo", "rcca"], 2)

  def test_evaluations_carry_the_exact_metrics_and_sites(self):
    run = self.summary["arms"]["rcca"][0]
    self.assertEqual(run["post_sft"]["bug_prob_mean"], 0.7)
    self.assertEqual(run["evals"][1]["pass_at_1"], 0.6)
    self.assertEqual([(s["task_id"], s["site"]) for s in run["evals"][1]["sites"]],
                     [("t0", "bug0"), ("t1", "bug0"), ("t0", "neutral0")])

  def test_paired_auc_steps_and_site_test(self):
    c = self.summary["comparison"]["rcca"]
    # AUC of bug_prob_mean: seed 0 rcca (0.7 + 0.45 + 0.09) / 3, grpo (0.7 + 0.6 + 0.5) / 3;
    # seed 1 rcca (0.7 + 0.65 + 0.55) / 3, grpo (0.7 + 0.7 + 0.6) / 3.
    self.assertAlmostEqual(c["auc_bug_prob_mean_per_seed"][0], 1.24 / 3)
    test = c["paired_auc_bug_prob_mean"]
    self.assertEqual(test["seeds"], [0, 1])
    np.testing.assert_allclose(test["per_seed"], [(1.24 - 1.8) / 3, (1.9 - 2.0) / 3])
    self.assertAlmostEqual(test["p"], 0.5)  # 2 of the 4 sign vectors
    self.assertAlmostEqual(c["paired_auc_pass_at_1"]["per_seed"][0], (1.2 - 0.9) / 3)
    self.assertEqual(c["steps_to_bug_prob"], {"threshold": 0.1, "per_seed": [8, None]})
    self.assertEqual(self.summary["comparison"]["grpo"]["steps_to_bug_prob"]["per_seed"],
                     [None, None])
    self.assertNotIn("paired_auc_bug_prob_mean", self.summary["comparison"]["grpo"])
    site = c["site_test"]
    self.assertEqual((site["units"], site["seeds"], site["exact"]), (4, 2, True))
    # Per-site AUC differences: seed 0 t0 (0.6+0.3+0.05-0.6-0.5-0.4)/3,
    # t1 (0.8+0.6+0.13-0.8-0.7-0.6)/3; seed 1 t0 -0.2/3, t1 0.
    d = np.asarray([-0.55, -0.57, -0.2, 0.0]) / 3
    self.assertAlmostEqual(site["mean"], np.mean([d[:2].mean(), d[2:].mean()]))
    self.assertAlmostEqual(site["p"], stats.sign_flip_p(d, [0, 0, 1, 1]))

  def test_every_number_is_recomputed_from_summary_json(self):
    ablation_report.write_all(self.dir, self.summary)
    with open(os.path.join(self.dir, "summary.json"), encoding="utf-8") as f:
      saved = json.load(f)
    recomputed = json.loads(json.dumps(stats.compare(saved["arms"])))
    self.assertEqual(recomputed, saved["comparison"])
    table = ablation_report.markdown(saved)
    self.assertIn("| rcca | 0.700 | 0.320 | 0.523 | -0.110 [", table)
    self.assertIn("| 8, never | -0.110 (4 units, 2 seeds), p=", table)
    self.assertEqual(_png_width(os.path.join(self.dir, "ablation.png")), 4 * 5 * 120)

  def test_older_summaries_still_load(self):
    with open(COMMITTED, encoding="utf-8") as f:
      old = json.load(f)
    comp = stats.compare(old["arms"])
    self.assertNotIn("auc_bug_prob_mean", comp["rcca"])
    self.assertAlmostEqual(comp["rcca"]["paired_pass_rate_diff"],
                           old["comparison"]["rcca"]["paired_pass_rate_diff"])
    table = ablation_report.markdown(old)
    self.assertIn("| rcca |", table)
    self.assertNotIn("AUC p_bug", table)
    self.assertIn("Δ pass AUC", table)  # recomputed from the arms; "–" when absent
    path = os.path.join(self.create_tempdir().full_path, "old.png")
    ablation_report.plot(old, path)
    self.assertEqual(_png_width(path), 2 * 5 * 120)


if __name__ == "__main__":
  absltest.main()
