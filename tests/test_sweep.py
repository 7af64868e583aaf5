"""The sweep of ablation settings: config handling, checks and the order of runs."""

import os
from unittest import mock

import ml_collections
from absl.testing import absltest

from experiments import ablation_small
from rcca_jax import ablation
from rcca_jax import sweep
from rcca_jax.train import config_check


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


if __name__ == "__main__":
  absltest.main()
