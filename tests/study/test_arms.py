"""The control arms of experiments/ablation_small.py and the config fields behind them:
optimizer choice, the typed credit section, blame modes, focused weights."""

import ml_collections
from absl.testing import absltest, parameterized

from experiments import ablation_small
from experiments import tiny_cpu
from experiments import tiny_natural
from rcca_jax.study import ablation
from rcca_jax.study import overrides
from rcca_jax.train import config_check
from rcca_jax.train import sections

# arm -> (policy loss, blame, negative_unblamed, optimizer, aggregation, std scaling,
# entropy_top_fraction)
ARMS = {
    "rcca_focus": ("rcca", "evaluator", 0.0, "adamw", "seq-mean-token-mean", True, 0.0),
    "rcca_placebo": ("rcca", "placebo", 1.0, "adamw", "seq-mean-token-mean", True, 0.0),
    "rcca_oracle": ("rcca", "oracle", 1.0, "adamw", "seq-mean-token-mean", True, 0.0),
    "rcca_focus_placebo": ("rcca", "placebo", 0.0, "adamw", "seq-mean-token-mean", True,
                           0.0),
    "rcca_focus_oracle": ("rcca", "oracle", 0.0, "adamw", "seq-mean-token-mean", True,
                          0.0),
    "grpo_neg_scaled": ("rcca_neg_mean", "evaluator", 0.0, "adamw",
                        "seq-mean-token-mean", True, 0.0),
    "sibling_diff_focus": ("rcca", "sibling_diff", 0.0, "adamw", "seq-mean-token-mean",
                           True, 0.0),
    "entropy_top20": ("grpo", "evaluator", 1.0, "adamw", "seq-mean-token-mean", True, 0.2),
    "grpo_neg_const": ("grpo", "evaluator", 1.0, "adamw", "seq-mean-token-mean", True, 0.0),
    "grpo_sgd": ("grpo", "evaluator", 1.0, "sgd", "seq-mean-token-mean", True, 0.0),
    "rcca_sgd": ("rcca", "evaluator", 1.0, "sgd", "seq-mean-token-mean", True, 0.0),
    "grpo_token_mean": ("grpo", "evaluator", 1.0, "adamw", "token-mean", True, 0.0),
    "dr_grpo": ("grpo", "evaluator", 1.0, "adamw", "seq-mean-token-sum", False, 0.0),
}


class ArmsTest(parameterized.TestCase):

  def test_every_arm_passes_the_checks(self):
    config = ablation_small.get_config()
    config.ablation.arms = ",".join(config.arms)
    self.assertEqual(ablation.check_configs(config, 3), list(config.arms))

  @parameterized.parameters(*ARMS)
  def test_arm_sets_its_fields(self, name):
    c = ablation.arm_config(ablation_small.get_config(), 0, name)
    job = sections.job_config(c)
    loss, credit, opt = job.rl.loss, job.credit, job.rl.optimizer
    self.assertEqual((loss.policy_loss, credit.blame, loss.rcca_negative_unblamed,
                      opt.name, loss.aggregation, loss.scale_advantages_by_std,
                      loss.entropy_top_fraction), ARMS[name])
    self.assertEqual(loss.negative_scale, 0.1 if name == "grpo_neg_const" else 1.0)
    self.assertEqual(opt.learning_rate, ablation_small.SGD_LR if opt.name == "sgd"
                     else 1e-4)
    self.assertEqual(credit.weights(), {"direct": 3.0, "context": 1.5, "cap": 4.0})

  def test_override_types(self):
    config = ml_collections.ConfigDict(dict(a=None, b=True, c=1.0))
    overrides.set_field(config, "a", "0.5")
    overrides.set_field(config, "b", "false")
    overrides.set_field(config, "c", "0")
    self.assertEqual((config.a, config.b, config.c), (0.5, False, 0.0))
    with self.assertRaisesRegex(ValueError, "b='maybe': expected one of"):
      overrides.set_field(config, "b", "maybe")


class CreditFieldsTest(absltest.TestCase):

  def test_problems_are_named(self):
    config = tiny_natural.get_config()  # a natural run: oracle blame is refused
    config.credit = ml_collections.ConfigDict(dict(blame="oracle", negative_unblamed=-1.0))
    config.rl.optimizer.name = "adam"
    config.rl.loss.rcca_negative_unblamed = 0.0  # its name is credit.negative_unblamed
    config.credit.colour = 1
    config.rl.loss.entropy_top_fraction = 2.0
    text = "\n".join(config_check.problems(config, num_devices=1))
    for line in ("credit.colour: unknown field",
                 "rl.loss: entropy_top_fraction=2.0 must lie in [0, 1]",
                 "rl.loss.rcca_negative_unblamed: unknown field",
                 "credit: negative_unblamed=-1.0 must be >= 0",
                 "credit.blame='oracle' needs data.setting='controlled'",
                 "rl.optimizer: name='adam' is not an optimizer; expected one of adamw, sgd"):
      self.assertIn(line, text)

  def test_negative_unblamed_reaches_the_loss_only(self):
    config = tiny_cpu.get_config()
    job = sections.job_config(config)
    self.assertEqual(job.rl.loss.rcca_negative_unblamed, 1.0)
    config.credit = ml_collections.ConfigDict(dict(negative_unblamed=0.25))
    job = sections.job_config(config)
    self.assertEqual(job.rl.loss.rcca_negative_unblamed, 0.25)
    self.assertEqual(job.credit.weights(),
                     {"direct": 3.0, "context": 1.5, "cap": 4.0})

  def test_trainer_takes_the_typed_section(self):
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    config = tiny_cpu.get_config()
    config.model.update(hidden_size=32, intermediate_size=64)
    config.credit = ml_collections.ConfigDict(dict(context=1.0, blame="placebo",
                                                   negative_unblamed=0.0))
    trainer = trainer_lib.Trainer(config, self.create_tempdir().full_path)
    self.assertEqual(trainer.credit_weights, {"direct": 3.0, "context": 1.0, "cap": 4.0})
    self.assertEqual((trainer.credit.blame, trainer.loss.rcca_negative_unblamed),
                     ("placebo", 0.0))
    trainer.close()


if __name__ == "__main__":
  absltest.main()
