"""The sweep of ablation settings: config handling, checks and the order of runs."""

import os
import subprocess
import sys
from unittest import mock

import ml_collections
import numpy as np
from absl.testing import absltest

from experiments import ablation_small
from rcca_jax.study import ablation
from rcca_jax.study import __main__ as study_main
from rcca_jax.study import sweep
from rcca_jax.study import sweep_report
from rcca_jax.train import config_check
from tests.fixtures import sweep_fixtures


def sweep_config(settings="a,b"):
  config = ablation_small.get_config()
  config.sweep = ml_collections.ConfigDict(dict(settings=settings))
  config.settings = ml_collections.ConfigDict(dict(
      a="rl.num_steps=3;ablation.arms=grpo",
      b="rl.num_steps=5;rl.temperature=1.0;ablation.arms=grpo,rcca"))
  return config


class SweepTest(absltest.TestCase):

  def test_settings_apply_their_overrides_only(self):
    config = sweep_config()
    self.assertTrue(sweep.is_sweep(config))
    self.assertFalse(sweep.is_sweep(ablation_small.get_config()))
    a, b = (sweep.setting_config(config, n) for n in ("a", "b"))
    self.assertEqual((a.rl.num_steps, a.ablation.arms), (3, "grpo"))
    self.assertEqual((b.rl.num_steps, b.ablation.arms), (5, "grpo,rcca"))
    self.assertEqual(config.rl.num_steps, ablation_small.get_config().rl.num_steps)

  def test_unknown_setting_and_bad_overrides_are_listed_before_any_work(self):
    with self.assertRaisesRegex(ValueError, "unknown settings \\['c'\\]"):
      sweep.setting_names(sweep_config("a,c"))
    config = sweep_config()
    config.settings.a = "rl.no_such_field=1"
    config.settings.b = "rl.num_steps=5;ablation.arms=grpo,teleport"
    with mock.patch.object(ablation, "run") as run:
      with self.assertRaises(config_check.ConfigError) as ctx:
        sweep.run(config, self.create_tempdir().full_path, 2)
      run.assert_not_called()
    text = str(ctx.exception)
    self.assertIn("[a] arm override: no config field 'rl.no_such_field'", text)
    self.assertIn("[b] ablation.arms: unknown arms ['teleport']", text)

  def test_runs_each_setting_in_its_directory_in_order(self):
    workdir = self.create_tempdir().full_path
    calls = []
    def fake_run(config, path, seeds):
      calls.append((os.path.basename(path), config.rl.num_steps, seeds))
      return {"setting": os.path.basename(path)}
    with mock.patch.object(ablation, "run", side_effect=fake_run):
      out = sweep.run(sweep_config("b,a"), workdir, 2)
    self.assertEqual(calls, [("b", 5, 2), ("a", 3, 2)])
    self.assertEqual(list(out), ["b", "a"])

  def test_report_only_skips_settings_not_started(self):
    workdir = self.create_tempdir().full_path
    os.makedirs(os.path.join(workdir, "a"))
    with mock.patch.object(ablation, "run") as run:
      study_main._main_sweep(sweep_config("a,b"), workdir, 2, report_only=True)  # pylint: disable=protected-access
      run.assert_not_called()
    self.assertTrue(os.path.isfile(os.path.join(workdir, "a", "summary.json")))
    self.assertFalse(os.path.exists(os.path.join(workdir, "b")))
    self.assertFalse(os.path.exists(os.path.join(workdir, "sweep.md")))  # no runs yet

  def test_runs_keep_a_compilation_cache_in_the_workdir(self):
    workdir = self.create_tempdir().full_path
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    script = ("import sys, jax, jax.numpy as jnp; from rcca_jax.study import __main__ as m; "
              "print(m.use_compile_cache(sys.argv[1])); "
              "jax.jit(lambda x: jnp.sin(x) * 2)(jnp.ones(3)).block_until_ready()")
    out = subprocess.run([sys.executable, "-c", script, workdir], env=env, check=True,
                         capture_output=True, text=True).stdout
    cache = os.path.join(workdir, "jax_cache")
    self.assertEqual(out.strip(), cache)
    self.assertNotEmpty(os.listdir(cache))


class SweepReportTest(absltest.TestCase):

  def test_paired_auc_differences_come_from_the_runs(self):
    summaries = {"s3_4": sweep_fixtures.summary(0.15), "s1_0": sweep_fixtures.summary(0.0)}
    test = sweep_report.paired_auc(summaries["s3_4"])["rcca"]
    # AUC = mean over the three evaluations: each of seeds 0-3 is 2 x 0.15 / 3 lower.
    np.testing.assert_allclose(test["per_seed"], [-0.1] * 4 + [0.0], atol=1e-12)
    self.assertAlmostEqual(test["mean"], -0.08)
    # Exact sign flips over 2^5 patterns: as extreme are the four nonzero signs all
    # alike (2), times the zero's two (no-op) flips.
    self.assertAlmostEqual(test["p"], 4 / 32)
    self.assertEqual(sweep_report.paired_auc(summaries["s1_0"])["rcca"]["mean"], 0.0)
    text = sweep_report.markdown(summaries)
    self.assertIn("| s3_4 | rcca | 5 | 0.600 | 0.353 | -0.080 [", text)
    self.assertIn("| s1_0 | rcca | 5 | 0.600 | 0.433 | +0.000 [", text)
    self.assertIn("| s3_4 | grpo | 5 | 0.600 | 0.433 | – | – |", text)

  def test_writes_the_figure_and_table_of_settings_with_runs(self):
    workdir = self.create_tempdir().full_path
    sweep_report.write_all(workdir, {"a": sweep_fixtures.summary(0.1),
                                     "b": {"arms": {"grpo": []}}})
    with open(os.path.join(workdir, "sweep.md"), encoding="utf-8") as f:
      text = f.read()
    self.assertIn("| a | rcca |", text)
    self.assertNotIn("| b |", text)
    with open(os.path.join(workdir, "credit_sweep.png"), "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

  def test_band_is_the_standard_error_over_seeds(self):
    runs = [sweep_fixtures.run(0, (0.6, 0.4, 0.2)), sweep_fixtures.run(1, (0.6, 0.6, 0.4))]
    steps, mean, sem = sweep_report.mean_band(runs, "bug_prob_mean")
    np.testing.assert_array_equal(steps, [0, 4, 8])
    np.testing.assert_allclose(mean, [0.6, 0.5, 0.3])
    np.testing.assert_allclose(sem, [0.0, 0.1, 0.1], atol=1e-12)
    self.assertIsNone(sweep_report.mean_band([{**runs[0], "post_sft": {
        "pass_rate": 0.5, "reward_mean": 0.5}}], "bug_prob_mean"))


if __name__ == "__main__":
  absltest.main()
