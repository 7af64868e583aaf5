"""The job config's typed sections: defaults defined once, the schema derived."""

import dataclasses
import importlib

import ml_collections
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.rl import objective
from rcca_jax.train import config_check
from rcca_jax.train import sections
from experiments import tiny_natural

EXPERIMENTS = ("tiny_cpu", "tiny_natural", "tiny_grpo", "tiny_rcca", "ablation_small",
               "credit_sweep", "moe_124b", "smollm2_natural")


class SectionsTest(parameterized.TestCase):

  @parameterized.parameters(*EXPERIMENTS)
  def test_every_experiment_builds(self, name):
    config = importlib.import_module(f"experiments.{name}").get_config()
    job = sections.job_config(config)
    self.assertEqual(job.rl.num_steps, config.rl.num_steps)
    self.assertEqual(job.data.families, tuple(config.data.families))
    self.assertEqual(dict(job.rl.optimizer), config.rl.optimizer.to_dict())

  def test_left_out_fields_take_the_section_defaults(self):
    config = tiny_natural.get_config()
    del config.rl["overlap_steps"], config.eval["samples_per_request"]
    del config.eval["collapse_margin"], config["checkpoint"]
    job = sections.job_config(config)
    self.assertEqual((job.rl.overlap_steps, job.eval.samples_per_request,
                      job.eval.collapse_margin, job.checkpoint.keep_best),
                     (0, sections.SAMPLES_PER_REQUEST, 0.1, True))
    self.assertEqual(config_check.problems(config, num_devices=1, mode="plan"), [])

  def test_defaults_follow_the_owning_classes(self):
    self.assertEqual(sections.default("rl.loss.eps_low"), objective.LossConfig.eps_low)
    self.assertEqual(sections.default("rl.overlap_steps"), 0)
    self.assertEqual(sections.default("credit.direct"), 3.0)
    self.assertIs(sections.default("rl.num_steps"), dataclasses.MISSING)
    with self.assertRaises(KeyError):
      sections.default("rl.gruop_size")

  def test_value_reads_a_partial_config(self):
    config = ml_collections.ConfigDict(dict(data=dict(setting="controlled")))
    self.assertEqual(sections.value(config, "data.setting"), "controlled")
    self.assertEqual(sections.value(config, "eval.grading_cache"), "")
    self.assertIsNone(sections.value(config, "rl.num_steps"))  # required: no default

  def test_the_schema_is_derived(self):
    rl = config_check.SCHEMA["rl"]
    self.assertEqual(set(rl), {f.name for f in dataclasses.fields(sections.RlSection)})
    self.assertNotIn("policy_loss", rl["loss"])  # rl.policy_loss is its one name
    self.assertIn("path", config_check.SCHEMA["data"]["controlled"])

  def test_missing_required_and_unknown_fields_are_named(self):
    config = tiny_natural.get_config()
    del config.sft["num_steps"]
    config.rl.gruop_size = 4
    found = config_check.problems(config, num_devices=1, mode="plan")
    self.assertIn("sft.num_steps: missing (a required field)", found)
    self.assertIn("rl.gruop_size: unknown field", found)
    with self.assertRaisesRegex(ValueError, "unknown fields: rl.gruop_size"):
      sections.job_config(config)

  def test_sections_are_frozen(self):
    job = sections.job_config(tiny_natural.get_config())
    with self.assertRaises(dataclasses.FrozenInstanceError):
      job.rl.num_steps = 3  # type: ignore[misc]


if __name__ == "__main__":
  absltest.main()
