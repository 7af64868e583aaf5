"""Faults are not verdicts: unscorable responses leave the batch, non-finite updates are
skipped and never saved, and a run stops with one line (train/faults.py)."""

import signal

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from tests.fixtures import rl_fixtures
from rcca_jax.data import selection
from rcca_jax.evaluation.pool import GRADING_FAILED
from rcca_jax.evaluation.record import UNSCORABLE
from rcca_jax.rl import objective
from rcca_jax.rl import optim
from rcca_jax.rl import sft
from rcca_jax.rl import train_step as ts
from rcca_jax.train import checkpoints
from rcca_jax.train import faults
from rcca_jax.train import rollouts
from rcca_jax.train import row_reduce
from rcca_jax.train import trainer

GATES = {"format": True, "source": True, "runtime": True}


def _rollouts(rewards, unscorable=()):
  """Two groups of four one-token rollouts; rows in `unscorable` carry a grading
  failure's record (its static reward 0.1 kept, as an old record would have it)."""
  task = selection.select_tasks("data/tasks/dev.jsonl", limit=1)[0]
  out = []
  for row, reward in enumerate(rewards):
    record = {"reward": reward, "gates": dict(GATES), "rubrics": [
        {"id": "r1", "passed": reward == 1.0, "detail": ""}]}
    if row in unscorable:
      record = {"reward": 0.1, "gates": dict(GATES, runtime=False), "rubrics": [],
                GRADING_FAILED: "the evaluation worker died", UNSCORABLE: "worker died"}
    out.append(rollouts.Rollout(
        task=task, sample_id=row % 4, prompt=[5, 6], tokens=[7, 8],
        logprobs=np.array([-0.5, -0.5], np.float32), text="ab",
        offsets=np.array([[0, 1], [1, 2]]), record=record,
        wbar=np.ones(2, np.float32)))
  return out


class UnscorableTest(absltest.TestCase):

  def test_unscorable_rows_are_masked_and_left_out_of_the_baseline(self):
    rewards = [1.0, 0.2, 0.7, 0.0, 0.5, 0.9, 0.1, 0.3]
    items = _rollouts(rewards, unscorable=(1, 6))
    adv = rollouts.group_advantages(items, 4)
    batch = rollouts.rl_batch(items, adv, max_len=6, pad_id=0)
    self.assertEqual(rollouts.unscorable_rows(items), [1, 6])
    for row in (1, 6):
      self.assertEqual(adv[row], 0.0)
      self.assertFalse(batch["loss_mask"][row].any())
    # The others' advantages: GRPO's over each group without the unscorable member.
    kept = [[0, 2, 3], [4, 5, 7]]
    for rows in kept:
      want = objective.group_advantages(np.asarray([rewards[i] for i in rows], np.float32),
                                        len(rows))
      np.testing.assert_allclose(adv[rows], want, rtol=1e-6)
      self.assertTrue(all(batch["loss_mask"][i].any() for i in rows))

  def test_record_stats_count_unscorable_and_keep_them_out_of_the_rates(self):
    items = _rollouts([1.0, 0.0, 1.0, 0.0], unscorable=(1,))
    items[2].record["rubrics"].append({"id": "r2", "passed": None,
                                       "detail": "ungraded: judge unavailable"})
    stats = rollouts.record_stats([r.record for r in items])
    self.assertEqual((stats["unscorable"], stats["grading_failed"]), (1.0, 1.0))
    self.assertEqual(stats["ungraded_rubrics"], 1.0)
    self.assertAlmostEqual(stats["reward_mean"], 2 / 3)  # 1, 1, 0: not the 0.1
    self.assertAlmostEqual(stats["gates_pass"], 1.0)  # the failed record's gate left out
    self.assertAlmostEqual(stats["pass_rate"], 1 / 3)  # row 2 has a rubric ungraded

  def test_shares_weigh_rates_by_their_scorable_rollouts(self):
    a = {"reward_mean": 1.0, "gates_pass": 1.0, "no_reward": 0, "unscorable": 3,
         "grading_failed": 3, "loss": 2.0}
    b = {"reward_mean": 0.0, "gates_pass": 0.0, "no_reward": 0, "unscorable": 0,
         "grading_failed": 0, "loss": 2.0}
    row = row_reduce.combine([(a, 4), (b, 4)])
    self.assertAlmostEqual(row["reward_mean"], 0.2)  # 1 of 5 scorable rollouts
    self.assertAlmostEqual(row["gates_pass"], 0.2)
    self.assertEqual(row["grading_failed"], 3)
    self.assertEqual(row["loss"], 2.0)


class NonFiniteTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    fmodel = ts.FunctionalModel(rl_fixtures.small_model())
    cls.opt = optim.OptimizerConfig(learning_rate=1e-2, total_steps=10)
    cls.state = ts.init_state(fmodel, cls.opt)
    cls.step = staticmethod(ts.compile_step(sft.make_sft_step(fmodel, cls.opt), sft.SFT_KEYS))
    cls.batch = ts.numpy_batch(rl_fixtures.rl_batch(seed=4), sft.SFT_KEYS)

  def _copy(self, state):
    return jax.tree.map(lambda x: jnp.array(x, copy=True), state)  # the step donates

  def test_a_non_finite_update_is_skipped_and_still_counted(self):
    before = self._copy(self.state)
    poisoned = before.params["embed_tokens"]["embedding"].at[0, 0].set(jnp.inf)
    bad = before.replace(params={**before.params, "embed_tokens": {"embedding": poisoned}})
    want = jax.device_get(bad)
    after, metrics = self.step(self._copy(bad), self.batch)
    self.assertEqual(float(metrics["skipped_nonfinite"]), 1.0)
    self.assertFalse(np.isfinite(float(metrics["loss"])))
    self.assertEqual(int(after.step), 1)
    for got, old in zip(jax.tree.leaves((after.params, after.opt_state)),
                        jax.tree.leaves((want.params, want.opt_state))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(old))
    self.assertFalse(checkpoints.all_finite(after.params))

  def test_a_finite_update_is_applied(self):
    after, metrics = self.step(self._copy(self.state), self.batch)
    self.assertEqual(float(metrics["skipped_nonfinite"]), 0.0)
    self.assertTrue(checkpoints.all_finite((after.params, after.opt_state)))
    moved = [not np.array_equal(a, b) for a, b in
             zip(jax.tree.leaves(after.params), jax.tree.leaves(self.state.params))]
    self.assertTrue(any(moved))

  def test_guard_stops_after_n_in_a_row(self):
    guard = faults.NonFiniteGuard("SFT", 3)
    for step, skipped in enumerate((1, 1, 0, 1, 1), 1):
      guard.update(skipped)
      guard.check(step, lambda: 4)  # never 3 in a row yet
    self.assertEqual((guard.in_row, guard.total), (2, 4))
    with self.assertRaisesRegex(faults.RunStopped, r"SFT step 6: 3 updates in a row "
                                r".*last checkpoint: step 4"):
      guard.update(1)
      guard.check(6, lambda: 4)


def _tiny_config():
  from experiments import tiny_natural  # pylint: disable=import-outside-toplevel
  config = tiny_natural.get_config()
  config.model.update(hidden_size=32, intermediate_size=64)
  config.data.families = ("dark_mode",)
  config.sft.update(num_steps=3, batch_size=2, log_every=1, checkpoint_every=100)
  config.rl.num_steps = 0
  return config


class TrainerFaultsTest(absltest.TestCase):

  def test_time_based_sft_checkpoints(self):
    config = _tiny_config()
    config.eval.enabled = False
    config.checkpoint.every_seconds = 1e-6  # every step: each takes longer than this
    workdir = self.create_tempdir().full_path
    with trainer.Trainer(config, workdir) as job:
      job.train()
      self.assertEqual(job.checkpoints.sft.checkpointer.all_steps(), [2, 3])  # max_to_keep 2

  def test_a_broken_dev_task_file_fails_before_sft(self):
    bad = self.create_tempfile("dev.jsonl", content="{not json\n").full_path
    config = _tiny_config()
    config.eval.tasks = bad
    workdir = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, f"{bad}:1"):
      trainer.Trainer(config, workdir).train()
    self.assertFalse([r for r in trainer.run_log.read_rows(workdir) if r["stage"] == "sft"])
    self.assertIsNone(trainer.Trainer(config, workdir).checkpoints.sft.checkpointer.latest_step())


class PreemptionWatchTest(absltest.TestCase):

  def test_sigterm_sets_the_flag_and_close_restores_the_handler(self):
    previous = signal.getsignal(signal.SIGTERM)
    watch = faults.PreemptionWatch()
    try:
      self.assertFalse(watch.requested(1))
      signal.raise_signal(signal.SIGTERM)
      self.assertTrue(watch.requested(2))
    finally:
      watch.close()
    self.assertIs(signal.getsignal(signal.SIGTERM), previous)
    self.assertEqual(faults.Preempted("x").exit_code, faults.EXIT_PREEMPTED)


if __name__ == "__main__":
  absltest.main()
