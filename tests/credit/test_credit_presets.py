"""`credit.preset`: a named credit method switched on in any config (credit/presets.py)."""

import dataclasses

from absl.testing import absltest, parameterized

from experiments import ablation_small
from experiments import moe_124b
from rcca_jax.credit import presets
from rcca_jax.study import ablation
from rcca_jax.study import overrides
from rcca_jax.train import config_check
from rcca_jax.train import sections


def _with(config, **fields):
  for name, value in fields.items():
    overrides.set_field(config, name.replace("__", "."), str(value))
  return config


def _no_preset(job: sections.JobConfig) -> sections.JobConfig:
  return dataclasses.replace(job, credit=dataclasses.replace(job.credit, preset=""))


class PresetTest(parameterized.TestCase):

  @parameterized.parameters(*presets.PRESETS)
  def test_preset_is_the_arm_of_its_name(self, name):
    # The same job, field by field, as ablation_small's arm: the preset names it.
    config = ablation_small.get_config()
    arm = sections.job_config(ablation.arm_config(config, 0, name))
    config.arms[name] = f"credit.preset={name}"
    job = sections.job_config(ablation.arm_config(config, 0, name))
    self.assertEqual(job.credit.preset, name)
    self.assertEqual(_no_preset(job), arm)

  def test_recommended_preset_sets_the_loss(self):
    job = sections.job_config(_with(ablation_small.get_config(),
                                    credit__preset="grpo_neg_const"))
    loss = job.rl.loss
    self.assertEqual((loss.policy_loss, loss.negative_scale), ("grpo", 0.1))

  def test_field_at_the_presets_value_is_no_conflict(self):
    config = _with(ablation_small.get_config(), rl__policy_loss="grpo",
                   rl__loss__negative_scale=0.1, credit__preset="grpo_neg_const")
    self.assertEqual(config_check.problems(config, num_devices=1, mode="plan"), [])
    self.assertEqual(sections.job_config(config).rl.loss.negative_scale, 0.1)

  def test_field_set_otherwise_is_an_error_naming_it(self):
    config = _with(ablation_small.get_config(), rl__loss__negative_scale=0.2,
                   credit__preset="grpo_neg_const")
    found = config_check.problems(config, num_devices=1, mode="plan")
    self.assertEqual(found, [
        "credit.preset='grpo_neg_const' sets rl.loss.negative_scale=0.1 but the config "
        "sets 0.2: leave rl.loss.negative_scale at its default (1.0) or drop the preset"])
    with self.assertRaisesRegex(ValueError, r"sets rl\.loss\.negative_scale=0\.1"):
      sections.job_config(config)

  def test_unknown_preset_is_reported_once(self):
    config = _with(ablation_small.get_config(), credit__preset="focus")
    found = config_check.problems(config, num_devices=1, mode="plan")
    self.assertLen(found, 1)
    self.assertStartsWith(found[0], "credit: credit.preset='focus': expected \"\" or one of")
    with self.assertRaisesRegex(ValueError, "credit.preset='focus'"):
      sections.job_config(config)

  def test_checks_see_the_presets_fields(self):
    # A preset's value that another check reads: oracle blame needs the controlled
    # setting, and `rcca` sets blame back to the evaluator's.
    config = _with(moe_124b.get_config(), credit__blame="oracle")
    self.assertIn("credit.blame='oracle' needs data.setting='controlled' (the known bug "
                  "sites)", config_check.problems(config, num_devices=1, mode="plan"))
    config.credit.preset = "rcca"
    self.assertIn("credit.preset='rcca' sets credit.blame='evaluator' but the config sets "
                  "'oracle': leave credit.blame at its default ('evaluator') or drop the "
                  "preset", config_check.problems(config, num_devices=1, mode="plan"))

  def test_paper_scale_config_keeps_the_papers_method(self):
    job = sections.job_config(moe_124b.get_config())
    loss = job.rl.loss
    self.assertEqual((job.credit.preset, loss.policy_loss, loss.rcca_negative_unblamed,
                      loss.negative_scale, job.credit.blame), ("", "rcca", 1.0, 1.0,
                                                               "evaluator"))


if __name__ == "__main__":
  absltest.main()
