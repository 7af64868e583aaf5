"""The trainer keeps the best dev reward's RL state as `best` and warns on a collapse."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from experiments import tiny_natural
from rcca_jax.train import trainer as trainer_lib


def _config(keep_best=True):
  config = tiny_natural.get_config()
  config.model.update(hidden_size=32, intermediate_size=64)
  config.data.families = ("dark_mode",)
  config.checkpoint.keep_best = keep_best
  return config


def _fresh(trainer):
  return trainer.programs.fresh_state(trainer.job.rl.optimizer)


def _state(fresh, shift: float, step: int):
  """`fresh` with its parameters shifted by `shift`, at optimizer step `step`."""
  return fresh.replace(params=jax.tree.map(lambda x: x + shift, fresh.params),
                       step=jnp.asarray(step, jnp.int32))


def _first_leaf(state):
  return np.asarray(jax.tree.leaves(state.params)[0])


class KeepBestTest(absltest.TestCase):

  def test_best_is_kept_and_restored(self):
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(_config(), workdir, mode="train") as trainer:
      fresh = _fresh(trainer)
      self.assertTrue(trainer.dev.keep_if_best(_state(fresh, 0.0, 0), 0.3, 0))
      best = _state(fresh, 1.0, 4)
      self.assertTrue(trainer.dev.keep_if_best(best, 0.6, 4))
      self.assertFalse(trainer.dev.keep_if_best(_state(fresh, 2.0, 8), 0.5, 8))
      self.assertFalse(trainer.dev.keep_if_best(_state(fresh, 3.0, 12), 0.6, 12))  # a tie
      self.assertFalse(trainer.dev.keep_if_best(_state(fresh, 4.0, 16), None, 16))
    with trainer_lib.Trainer(_config(), workdir, mode="eval") as trainer:  # reopened
      self.assertEqual(trainer.checkpoints.best.data_position(),
                       {"prompt_batches": 4, "rl_step": 4, "dev_reward": 0.6})
      name, state = trainer.checkpoints.state_for("best", trainer.programs.fresh_state)
      self.assertEqual(name, "best")
      self.assertEqual(int(state.step), 4)
      np.testing.assert_allclose(_first_leaf(state), _first_leaf(best))
      # A resumed run that redoes RL step 4 replaces the best saved from it.
      self.assertTrue(trainer.dev.keep_if_best(_state(fresh, 5.0, 4), 0.2, 4))
      self.assertEqual(trainer.checkpoints.best.data_position()["dev_reward"], 0.2)

  def test_without_keep_best_there_is_no_best(self):
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(_config(keep_best=False), workdir, mode="train") as trainer:
      self.assertFalse(trainer.dev.keep_if_best(_state(_fresh(trainer), 0.0, 0), 0.3, 0))
      with self.assertRaisesRegex(FileNotFoundError, "no best checkpoint"):
        trainer.checkpoints.state_for("best", trainer.programs.fresh_state)

  def test_a_kept_checkpoint_by_stage_and_step(self):
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(_config(), workdir, mode="train") as trainer:
      fresh, ckpt = _fresh(trainer), trainer.checkpoints
      for step, shift in ((2, 1.0), (4, 2.0)):
        ckpt.save(ckpt.sft, _state(fresh, shift, step), {}, every=1)
      ckpt.sft.checkpointer.wait()
      name, state = ckpt.state_for("sft:2", trainer.programs.fresh_state)
      self.assertEqual((name, int(state.step)), ("sft", 2))
      np.testing.assert_allclose(_first_leaf(state), _first_leaf(_state(fresh, 1.0, 2)))
      self.assertEqual(int(ckpt.state_for("sft", trainer.programs.fresh_state)[1].step), 4)
      with self.assertRaisesRegex(FileNotFoundError, r"no sft checkpoint 3 .*kept: \[2, 4\]"):
        ckpt.state_for("sft:3", trainer.programs.fresh_state)
      with self.assertRaisesRegex(ValueError, "checkpoint 'sft:x'"):
        ckpt.state_for("sft:x", trainer.programs.fresh_state)

  def test_collapse_warning_fires_on_a_drop_not_on_a_rise(self):
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(_config(), workdir, mode="train") as trainer:
      self.assertIsNone(trainer.dev.warn_on_collapse({"reward_mean": 0.0}, "x"))  # no post-SFT
      trainer.metrics.write("eval", 300, {"after": "sft", "reward_mean": 0.5,
                                          "gate_runtime": 0.9, "pass_rate": 0.0})
      line = trainer.dev.warn_on_collapse({"reward_mean": 0.3, "gate_runtime": 0.9,
                                       "pass_rate": 0.0}, "after RL step 8")
      self.assertIn("reward_mean 0.500 -> 0.300", line)
      self.assertNotIn("gate_runtime", line)
      self.assertIsNone(trainer.dev.warn_on_collapse(
          {"reward_mean": 0.8, "gate_runtime": 1.0, "pass_rate": 0.5}, "after RL step 16"))


if __name__ == "__main__":
  absltest.main()
