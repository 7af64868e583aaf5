"""The job config's typed sections: defaults defined once, the schema derived."""

import dataclasses
import importlib
import json
import os
from unittest import mock

import ml_collections
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.credit import controlled
from rcca_jax.data import draws
from rcca_jax.rl import objective
from rcca_jax.rl import optim
from rcca_jax.study import overrides
from rcca_jax.train import checkpoints as checkpoints_lib
from rcca_jax.train import config_check
from rcca_jax.train import sections
from rcca_jax.train import workdir_guard
from experiments import tiny_cpu
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
    self.assertIsInstance(job.rl.optimizer, optim.OptimizerConfig)
    for name, value in config.rl.optimizer.items():
      self.assertEqual(getattr(job.rl.optimizer, name), value, name)

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
    for section in (job.rl.loss, job.rl.optimizer, job.sft.optimizer, job.data.fresh,
                    job.data.controlled, job.mesh, job.credit, job.eval.evaluator):
      self.assertTrue(dataclasses.is_dataclass(section), section)
      with self.assertRaises(dataclasses.FrozenInstanceError):
        setattr(section, dataclasses.fields(section)[0].name, None)


class NestedSectionsTest(absltest.TestCase):
  """Every nested section is built once, by the config layer, as a frozen dataclass."""

  def test_rl_loss_is_the_loss_config_and_overrides_reach_it(self):
    config = tiny_cpu.get_config()
    overrides.set_field(config, "rl.loss.negative_scale", "0.25")  # --config.rl.loss...
    overrides.set_field(config, "rl.policy_loss", "grpo")
    overrides.set_field(config, "credit.negative_unblamed", "0.5")
    job = sections.job_config(config)
    self.assertIsInstance(job.rl.loss, objective.LossConfig)
    self.assertEqual(job.rl.loss, objective.LossConfig(
        policy_loss="grpo", negative_scale=0.25, rcca_negative_unblamed=0.5))
    # Without an rl.loss section at all: the defaults, with the fields named elsewhere.
    del config.rl["loss"]
    self.assertEqual(sections.job_config(config).rl.loss, objective.LossConfig(
        policy_loss="grpo", rcca_negative_unblamed=0.5))

  def test_optimizers_take_their_stage_length(self):
    config = tiny_cpu.get_config()
    config.rl.update(num_steps=5, num_iterations=2, mini_batches=3)
    job = sections.job_config(config)
    self.assertIsInstance(job.sft.optimizer, optim.OptimizerConfig)
    self.assertEqual((job.sft.optimizer.total_steps, job.sft.optimizer.warmup_steps),
                     (300, 30))
    self.assertEqual(job.rl.optimizer.total_steps, 30)  # optimizer updates: 5 x 2 x 3
    self.assertEqual(job.rl.optimizer.learning_rate, 2e-4)
    config.sft.num_steps = 4  # the warm-up is cut to a shorter schedule
    config.rl.optimizer.total_steps = 7  # an explicit length is kept
    job = sections.job_config(config)
    self.assertEqual((job.sft.optimizer.total_steps, job.sft.optimizer.warmup_steps), (4, 4))
    self.assertEqual(job.rl.optimizer.total_steps, 7)
    self.assertEqual(sections.optimizer_config(config.rl.optimizer.to_dict(), 99),
                     job.rl.optimizer)  # the same builder; an explicit length wins

  def test_data_and_mesh_sections(self):
    job = sections.job_config(tiny_cpu.get_config())
    self.assertEqual(job.data.controlled, sections.ControlledSection(
        path="", spec=controlled.ControlledSpec(
            families=tiny_cpu.FAMILIES, rates=(0.6,),
            operators=("handler_op", "misspell_id", "throw"))))
    self.assertEqual(job.data.fresh, draws.FreshSpec())
    self.assertEqual(job.mesh.sizes, {"data": -1, "fsdp": 1, "expert": 1, "tensor": 1})
    config = tiny_natural.get_config()
    config.data.fresh.update(train_per_family=3, exclude=["a.jsonl"])
    del config["mesh"]
    job = sections.job_config(config)
    self.assertIsNone(job.data.controlled.spec)  # the natural setting reads none of it
    self.assertEqual(job.data.fresh, draws.FreshSpec(train_per_family=3,
                                                     exclude=("a.jsonl",)))
    self.assertEqual(job.mesh, sections.MeshSection())  # every axis 1
    self.assertIsInstance(job.model, dict)  # the one mapping: see JobConfig.model

  def test_unknown_nested_keys_are_named_with_their_path(self):
    for path in ("rl.loss.kl_betta", "rl.optimizer.lr", "sft.optimizer.lr",
                 "data.fresh.train", "data.controlled.colour", "mesh.pipeline",
                 "model.hidden", "credit.colour", "eval.evaluator.load_timeout_s"):
      config = tiny_cpu.get_config()
      *parents, leaf = path.split(".")
      node = config
      for part in parents:
        node = node[part]
      node[leaf] = 1
      self.assertIn(f"{path}: unknown field",
                    config_check.problems(config, num_devices=1, mode="plan"))
      with self.assertRaisesRegex(ValueError, f"^unknown fields: {path}$"):
        sections.job_config(config)

  def test_a_bad_nested_value_is_named_by_job_config_too(self):
    config = tiny_cpu.get_config()
    config.rl.optimizer.name = "adam"
    with self.assertRaisesRegex(ValueError, "^rl.optimizer: name='adam' is not an optimizer"):
      sections.job_config(config)
    config = tiny_cpu.get_config()
    config.data.controlled.rates = (1.5,)
    with self.assertRaisesRegex(ValueError, r"^data.controlled: data.controlled.rates must "):
      sections.job_config(config)

  def test_checkpoints_keep_the_optimizers_they_are_given(self):
    job = sections.job_config(tiny_cpu.get_config())
    sft_opt = optim.OptimizerConfig(learning_rate=0.5, total_steps=3)
    rl_opt = optim.OptimizerConfig(name="sgd", learning_rate=0.25, total_steps=9)
    given = []
    with mock.patch.object(sections, "optimizer_config",
                           side_effect=AssertionError("built by the config layer")):
      ckpts = checkpoints_lib.Checkpoints(
          self.create_tempdir().full_path, job, target=None, updates_per_batch=3,
          sft_optimizer=sft_opt, rl_optimizer=rl_opt)
      try:
        self.assertIs(ckpts.sft.opt_config, sft_opt)
        self.assertIs(ckpts.rl.opt_config, rl_opt)
        self.assertEqual((ckpts.sft.num_steps, ckpts.rl.num_steps), (300, 16))
        self.assertEqual(ckpts.state_for("base", given.append), ("base", None))
        self.assertEqual(given, [sft_opt])
      finally:
        ckpts.close()

  def test_job_config_json_reads_back_to_the_same_job(self):
    config = tiny_cpu.get_config()
    overrides.set_field(config, "rl.loss.negative_scale", "0.5")
    workdir = self.create_tempdir().full_path
    workdir_guard.check_saved_config(workdir, config.to_dict())
    with open(os.path.join(workdir, workdir_guard.CONFIG_FILE), encoding="utf-8") as f:
      saved = json.load(f)
    self.assertEqual(sections.job_config(saved), sections.job_config(config))
    self.assertEqual(workdir_guard.check_saved_config(workdir, config.to_dict()), [])


if __name__ == "__main__":
  absltest.main()
