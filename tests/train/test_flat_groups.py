"""Groups without a reward difference: dynamic sampling fills the batch with groups that
have one, "drop" takes flat groups out of the loss, and a step with none applies no
update (train/flat_groups.py, `rl.resample_flat_rounds`, `rl.flat_groups`)."""

import jax
import numpy as np
import pytest
from absl.testing import absltest

from rcca_jax.rl import objective
from rcca_jax.train import config_check
from rcca_jax.train import flat_groups
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import trainer as trainer_lib
from rcca_jax.train.rollouts import Rollout
from tests.fixtures.trainer_fixtures import FakeGrader, trainer_config


def _rollouts(rewards, tag=""):
  out = []
  for i, reward in enumerate(rewards):
    record = {"reward": reward}
    out.append(Rollout(task=f"t{tag}{i // 2}", sample_id=i % 2, prompt=[1], tokens=[2, 3],
                       logprobs=np.zeros(2, np.float32), text="x",
                       offsets=np.zeros((2, 2), np.int32), record=record,
                       wbar=np.ones(2, np.float32)))
  return out


class FlatGroupsTest(absltest.TestCase):

  def test_signal_ignores_ungraded_members(self):
    groups = flat_groups.groups(_rollouts([0.5, 0.5, 0.1, 0.9, 0.3, None]), 2)
    self.assertEqual([flat_groups.has_signal(g) for g in groups], [False, True, False])
    # Flat exactly where GRPO's advantages are zero (rewards within objective.EQUAL_ATOL).
    near = _rollouts([0.5, 0.5 + 5e-7, 0.5, 0.5 + 2e-6])
    got = [flat_groups.has_signal(g) for g in flat_groups.groups(near, 2)]
    self.assertEqual(got, [False, True])
    adv = np.asarray(objective.group_advantages(np.asarray([0.5, 0.5 + 5e-7], np.float32), 2))
    np.testing.assert_array_equal(adv, [0.0, 0.0])
    with self.assertRaisesRegex(ValueError, "groups of 2"):
      flat_groups.groups(_rollouts([0.1, 0.2, 0.3]), 2)

  def test_fill_draws_until_enough_groups_have_a_difference(self):
    drawn = []

    def draw(k):
      drawn.append(k)
      return _rollouts([[0.2, 0.2, 0.4, 0.4], [0.1, 0.7, 0.3, 0.3]][k - 1], tag=f"r{k}")

    out, row = flat_groups.fill_with_signal(_rollouts([0.5, 0.5, 0.0, 1.0]), 2, 2, 5, draw)
    self.assertEqual(drawn, [1, 2])  # round 1 has no difference, round 2 has one
    self.assertEqual([r.task for r in out], ["t1", "t1", "tr20", "tr20"])
    self.assertEqual(row, {"sampling_rounds": 2.0, "groups_sampled": 6.0,
                           "groups_with_signal": 2.0})

  def test_fill_stops_at_the_round_limit_and_fills_with_flat_groups(self):
    out, row = flat_groups.fill_with_signal(
        _rollouts([0.5, 0.5, 0.3, 0.3]), 2, 2, 1, lambda k: _rollouts([0.2, 0.2, 0.1, 0.6], "x"))
    self.assertEqual([r.task for r in out], ["tx1", "tx1", "t0", "t0"])
    self.assertEqual(row["groups_with_signal"], 1.0)
    out, row = flat_groups.fill_with_signal(_rollouts([0.0, 1.0]), 2, 1, 3, None)
    self.assertEqual(row["sampling_rounds"], 0.0)  # nothing drawn when already full

  def test_drop_zeroes_flat_groups_loss_mask(self):
    rollouts = _rollouts([0.5, 0.5, 0.1, 0.9])
    out, row, in_loss = flat_groups.dynamic_sampling(rollouts, 2, rounds=0, mode="drop",
                                                     draw=None)
    self.assertIs(out, rollouts)
    self.assertEqual(row, {"groups_kept": 1.0})
    np.testing.assert_array_equal(in_loss, [False, False, True, True])
    batch = rollouts_lib.rl_batch(rollouts, rollouts_lib.group_advantages(rollouts, 2),
                                  max_len=4, pad_id=0, in_loss=in_loss)
    np.testing.assert_array_equal(batch["loss_mask"].sum(1), [0, 0, 2, 2])
    self.assertEqual(flat_groups.dynamic_sampling(rollouts, 2, rounds=0, mode="keep",
                                                  draw=None), (rollouts, {}, None))

  def test_config_fields_are_checked(self):
    config = trainer_config()
    config.rl.flat_groups = "skip"
    config.rl.resample_flat_rounds = -1
    found = config_check.problems(config, num_devices=1)
    self.assertIn("rl.flat_groups='skip' must be one of ('keep', 'drop')", found)
    self.assertIn("rl.resample_flat_rounds=-1 must be an integer >= 0", found)
    config.rl.update(flat_groups="drop", resample_flat_rounds=2)
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    self.assertIn("rl.resample_flat_rounds=2 with 2 processes: resampling is per process "
                  "(one process only)",
                  config_check.problems(config, num_devices=2, num_processes=2))


class _RoundGrader(FakeGrader):
  """Rewards by call: equal rewards on the first call of each RL step, then differing."""

  def __init__(self):
    super().__init__((0.5,))
    self.per_call = []

  def run(self, jobs, progress=None):
    self.per_call.append(len(jobs))
    self.rewards = (0.5,) if len(self.per_call) % 2 else (0.2, 0.9)
    return super().run(jobs, progress)


@pytest.mark.slow
class FlatGroupsTrainerTest(absltest.TestCase):

  def _train(self, grader, **rl):
    config = trainer_config()
    config.rl.update(num_iterations=1, mini_batches=1, **rl)
    config.rl.loss.kl_beta = 0.0
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(config, workdir, grader=grader) as trainer:
      trainer.train()
      trainer.open()
      sft = trainer.checkpoints.restore(trainer.checkpoints.sft)[0]
      rl = trainer.checkpoints.restore(trainer.checkpoints.rl)[0]
      rows = [r for r in trainer.metrics.rows() if r["stage"] == "rl"]
    return sft, rl, rows

  def test_a_step_without_signal_applies_no_update(self):
    sft, rl, rows = self._train(FakeGrader((0.5,)), flat_groups="drop")
    self.assertEqual([r["skipped_no_signal"] for r in rows], [1.0, 1.0])
    self.assertEqual(int(rl.step), 2)  # the counters advanced
    for a, b in zip(jax.tree.leaves(sft.params), jax.tree.leaves(rl.params)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # no update at all

  def test_resampling_finds_groups_with_a_difference(self):
    grader = _RoundGrader()
    _, _, rows = self._train(grader, flat_groups="drop", resample_flat_rounds=2)
    self.assertEqual(grader.per_call, [4, 4, 4, 4])  # one extra round per step
    for row in rows:
      self.assertEqual(row["sampling_rounds"], 1.0)
      self.assertEqual(row["groups_with_signal"], 2.0)
      self.assertEqual(row["groups_kept"], 2.0)
      self.assertNotIn("skipped_no_signal", row)
      self.assertAlmostEqual(row["reward_mean"], (0.2 + 0.9) / 2, places=6)


if __name__ == "__main__":
  absltest.main()
