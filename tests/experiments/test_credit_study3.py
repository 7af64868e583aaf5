"""experiments/credit_study3.py: its settings and the balance x location grid of arms,
each arm the loss and credit it says (issue 51)."""

import dataclasses

from absl.testing import absltest, parameterized

from experiments import credit_study2
from experiments import credit_study3 as study3
from rcca_jax.rl import objective
from rcca_jax.study import ablation
from rcca_jax.study import sweep
from rcca_jax.train import sections

GRID = study3.GRID.split(",")


def job(setting: str, arm: str) -> sections.JobConfig:
  config = sweep.setting_config(study3.get_config(), setting)
  return sections.job_config(ablation.arm_config(config, 0, arm))


class SettingsTest(parameterized.TestCase):

  def test_every_setting_and_arm_passes_the_checks(self):
    config = study3.get_config()
    self.assertEqual(sweep.check(config, 1), ["multi_bug", "low_overlap", "long"])
    for name in config.settings:
      setting = sweep.setting_config(config, name)
      self.assertEqual(ablation.check_configs(setting, 1), GRID, name)
    for arm in study3.PILOT_ARMS.split(","):
      self.assertIn(arm, GRID)

  def test_what_each_setting_changes(self):
    spec = {name: job(name, "grpo").data.controlled.spec
            for name in ("low_overlap", "long", "multi_bug", "s1_0", "s3_4")}
    self.assertEqual((spec["low_overlap"].bug_sites, spec["low_overlap"].neutral_sites,
                      spec["low_overlap"].rates), (3, 4, (0.8,)))
    # low_overlap is s3_4 with every bug at one high rate: the same site search.
    self.assertEqual(dataclasses.replace(spec["low_overlap"], rates=spec["s3_4"].rates),
                     spec["s3_4"])
    self.assertEqual((spec["long"].bug_sites, spec["long"].neutral_sites,
                      spec["long"].padding), (1, 0, 100))
    self.assertEqual(dataclasses.replace(spec["long"], padding=0), spec["s1_0"])
    self.assertEqual((spec["multi_bug"].bug_sites, spec["multi_bug"].neutral_sites), (3, 0))
    long = job("long", "grpo")
    self.assertEqual((long.sft.max_len, long.rl.max_new_tokens, long.eval.max_new_tokens),
                     (study3.LONG_TOKENS,) * 3)
    self.assertGreaterEqual(long.model["max_position_embeddings"],
                            long.rl.max_prompt_len + long.rl.max_new_tokens)
    # The reference settings are credit study 2's, arms aside.
    two = credit_study2.get_config()
    for name in ("s1_0", "s3_4"):
      self.assertEqual(study3.get_config().settings[name].split(";ablation.arms=")[0],
                       two.settings[name].split(";ablation.arms=")[0])


class ArmsTest(parameterized.TestCase):

  @parameterized.parameters(*study3.NEG_GRID.items(), ("grpo", 1.0))
  def test_balance_grid_is_a_constant_negative_weight(self, arm, scale):
    loss = job("s1_0", arm).rl.loss
    self.assertEqual((loss.policy_loss, loss.negative_scale, loss.positive_scale,
                      loss.negative_mass), ("grpo", scale, 1.0, 0.0))

  @parameterized.parameters(("rcca_focus", 0.0), ("rcca_nu03", 0.3), ("rcca", 1.0),
                            ("rcca_focus_mass01", 0.0), ("rcca_focus_neg_only", 0.0))
  def test_each_location_arm_and_its_placebo_differ_in_the_blame_only(self, arm, unblamed):
    focus, placebo = job("low_overlap", arm), job("low_overlap", arm + "_placebo")
    self.assertEqual((focus.credit.blame, placebo.credit.blame), ("evaluator", "placebo"))
    self.assertEqual(focus.rl.loss.rcca_negative_unblamed, unblamed)
    self.assertEqual(dataclasses.replace(placebo, credit=focus.credit), focus)

  @parameterized.parameters(*range(1, study3.PLACEBO_DRAWS + 1))
  def test_placebo_draws_differ_from_the_placebo_in_the_draw_only(self, draw):
    placebo = job("low_overlap", "rcca_focus_placebo")
    other = job("low_overlap", f"rcca_focus_placebo_d{draw}")
    self.assertEqual(other.credit.placebo_draw, draw)
    self.assertEqual(dataclasses.replace(other, credit=placebo.credit), placebo)

  def test_mass_sign_and_preset_arms(self):
    mass = job("low_overlap", "rcca_focus_mass01").rl.loss
    self.assertEqual((mass.policy_loss, mass.negative_mass, mass.negative_scale),
                     ("rcca", study3.MASS, 1.0))
    self.assertEqual(job("low_overlap", "w_reinforce").rl.loss,
                     objective.preset("grpo", positive_scale=0.1))
    self.assertEqual(job("low_overlap", "grpo_neg_only").rl.loss,
                     objective.preset("grpo", positive_scale=0.0))
    neg_only = job("low_overlap", "rcca_focus_neg_only").rl.loss
    self.assertEqual(neg_only, objective.preset("rcca", positive_scale=0.0,
                                                rcca_negative_unblamed=0.0))
    self.assertEqual(job("long", "rcca_focus_oracle").credit.blame, "oracle")

  @parameterized.parameters(*objective.PRESETS)
  def test_a_loss_preset_as_overrides_is_the_preset(self, name):
    config = study3.get_config()
    config.arms[name] = study3.preset_arm(name)
    got = sections.job_config(ablation.arm_config(config, 0, name)).rl.loss
    self.assertEqual(got, objective.preset(name))

  def test_dapo_and_dr_grpo_are_the_objectives_presets(self):
    for name in ("dapo", "dr_grpo"):
      self.assertEqual(job("multi_bug", name).rl.loss, objective.preset(name))


if __name__ == "__main__":
  absltest.main()
