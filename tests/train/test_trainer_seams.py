"""The trainer's seams without a browser: an injected `Grader`, one sampler per run,
the reference KL with μ updates over mini-batches, ungraded responses, reuse."""

import math
from unittest import mock

import pytest
from absl.testing import absltest

from rcca_jax.evaluation.grader import Grader
from rcca_jax.train import programs as programs_lib
from rcca_jax.train import trainer as trainer_lib
from tests.fixtures.trainer_fixtures import FakeGrader, trainer_config


@pytest.mark.slow
class TrainerSeamsTest(absltest.TestCase):

  def test_injected_grader_kl_mini_batches_and_a_second_run(self):
    grader = FakeGrader()
    self.assertIsInstance(grader, Grader)
    workdir = self.create_tempdir().full_path
    with mock.patch.object(programs_lib, "JaxSampler",
                           wraps=programs_lib.JaxSampler) as built:
      with trainer_lib.Trainer(trainer_config(), workdir, grader=grader) as trainer:
        trainer.train()
        rows = trainer.metrics.rows()
        trainer.train()  # finished: reopens, restores, does nothing, closes again
        self.assertEqual(trainer.metrics.rows(), rows)
    self.assertEqual(built.call_count, 1)  # one sampler, updated every step
    self.assertEqual((grader.calls, grader.closed), (2, 2))
    rl = [r for r in rows if r["stage"] == "rl"]
    self.assertEqual([r["step"] for r in rl], [1, 2])
    for row in rl:
      self.assertEqual(row["updates"], 4.0)
      self.assertTrue(math.isfinite(row["kl"]), row)
      self.assertEqual(row["no_reward"], 1.0)
      self.assertAlmostEqual(row["reward_mean"], (0.2 + 0.9 + 0.5) / 3, places=6)
      self.assertEqual(row["sequences"], 3.0)  # the rewardless response left the batch
      self.assertIn("sampler_logprob_gap", row)
    self.assertLess(rl[0]["kl/u1"], 1e-9)  # the reference is the policy at RL step 0
    self.assertGreater(rl[1]["kl"], 0.0)

    # Resume with one more RL step: checkpoints count updates (4 per RL step), rows
    # and the data position count RL steps.
    config = trainer_config()
    config.rl.num_steps = 3
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader()) as trainer:
      self.assertEqual(trainer.checkpoints.rl.checkpointer.latest_step(), 8)
      trainer.train()
      trainer.open()  # train() closed it; reopened, it reads the new checkpoint
      self.assertEqual(trainer.checkpoints.rl.checkpointer.latest_step(), 12)
      rl = [r for r in trainer.metrics.rows() if r["stage"] == "rl"]
    self.assertEqual([r["step"] for r in rl], [1, 2, 3])
    self.assertEqual(rl[:2], [r for r in rows if r["stage"] == "rl"])

  def test_bfloat16_rollouts_are_scored_with_the_policys_weights(self):
    # `rl.rollout_dtype`: the sampler's copy rounds the matmul weights, the trainer
    # recomputes the old log-probs with the float32 policy; the gap between the two is
    # the rounding's (the float32 sampler's is float32 rounding, under 1e-5).
    gaps = {}
    for dtype in ("", "bfloat16"):
      config = trainer_config()
      config.rl.update(num_steps=1, rollout_dtype=dtype)
      with mock.patch.object(programs_lib, "JaxSampler",
                             wraps=programs_lib.JaxSampler) as built:
        with trainer_lib.Trainer(config, self.create_tempdir().full_path,
                                 grader=FakeGrader()) as trainer:
          trainer.train()
          rl = [r for r in trainer.metrics.rows() if r["stage"] == "rl"]
      self.assertEqual(built.call_args.kwargs["rollout_dtype"], dtype)
      gaps[dtype] = rl[0]["sampler_logprob_gap"]
    self.assertLess(gaps[""], 1e-5)
    self.assertGreater(gaps["bfloat16"], 1e-4)


if __name__ == "__main__":
  absltest.main()
