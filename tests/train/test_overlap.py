"""`train.overlap.RolloutSource`: which policy samples which step, grading alongside,
and the rollouts sampled ahead kept across a resume (fakes, no model)."""

import os
import threading

import pytest
from absl.testing import absltest

from rcca_jax.train import overlap
from rcca_jax.train import trainer as trainer_lib
from tests.fixtures.trainer_fixtures import FakeGrader, trainer_config


class _Fakes:
  """A sampler that records (policy, step) and a grader that records its thread."""

  def __init__(self):
    self.sampled: list[tuple[str, int]] = []
    self.graded: list[list] = []
    self.grade_threads: list[str] = []

  def sample(self, state, step):
    self.sampled.append((state, step))
    return [f"{state}:{step}"]

  def grade(self, rollouts):
    self.grade_threads.append(threading.current_thread().name)
    self.graded.append(list(rollouts))


def _source(fakes, overlap_steps, ahead_dir, num_steps=3):
  return overlap.RolloutSource(fakes.sample, fakes.grade, overlap_steps=overlap_steps,
                               num_steps=num_steps, ahead_dir=ahead_dir)


def _get(source, state, step):
  """A trainer's RL step's use of the source: sample, then grade."""
  rollouts = source.sample(state, step)
  return rollouts, source.grade(rollouts, state, step)


class RolloutSourceTest(absltest.TestCase):

  def test_no_overlap_samples_each_step_with_its_own_policy(self):
    fakes = _Fakes()
    source = _source(fakes, 0, self.create_tempdir().full_path)
    got = [_get(source, f"policy{n}", n)[0] for n in range(3)]
    self.assertEqual(got, [["policy0:0"], ["policy1:1"], ["policy2:2"]])
    self.assertEqual(fakes.graded, got)
    self.assertEqual(set(fakes.grade_threads), {threading.current_thread().name})

  def test_overlap_samples_the_next_step_with_the_current_policy(self):
    fakes = _Fakes()
    source = _source(fakes, 1, self.create_tempdir().full_path)
    got, times = [], []
    for n in range(3):
      rollouts, t = _get(source, f"policy{n}", n)
      got.append(rollouts)
      times.append(t)
    # Step 0 samples itself; step n+1 is sampled by policy n, one step off-policy.
    self.assertEqual(got, [["policy0:0"], ["policy0:1"], ["policy1:2"]])
    self.assertEqual(fakes.sampled, [("policy0", 0), ("policy0", 1), ("policy1", 2)])
    self.assertEqual(fakes.graded, got)
    self.assertEqual(set(fakes.grade_threads), {"grade-rollouts"})
    self.assertEqual(set(times[0]), {"sample_s", "eval_s"})

  def test_rollouts_sampled_ahead_survive_a_resume(self):
    ahead = self.create_tempdir().full_path
    first = _Fakes()
    source = _source(first, 1, ahead)
    _get(source, "policy0", 0)
    source.save(1)  # the checkpoint of 1 step done
    resumed = _Fakes()
    again = _source(resumed, 1, ahead)
    rollouts, _ = _get(again, "restored1", 1)
    self.assertEqual(rollouts, ["policy0:1"])  # as the uninterrupted run: not resampled
    self.assertEqual(resumed.sampled, [("restored1", 2)])
    again.save(2)
    self.assertLen(os.listdir(ahead), 1)  # older ones removed

  def test_a_grading_error_reaches_the_caller(self):
    fakes = _Fakes()

    def fail(rollouts):
      raise RuntimeError("grader down")

    source = overlap.RolloutSource(fakes.sample, fail, overlap_steps=1, num_steps=2,
                                   ahead_dir=self.create_tempdir().full_path)
    with self.assertRaisesRegex(RuntimeError, "grader down"):
      _get(source, "policy0", 0)


class _FailingGrader(FakeGrader):
  """A `FakeGrader` whose `fail_on`-th run raises (the job dies mid-RL)."""

  def __init__(self, fail_on: int):
    super().__init__()
    self.fail_on = fail_on

  def run(self, jobs, progress=None):
    if self.calls + 1 == self.fail_on:
      raise RuntimeError("grader lost")
    return super().run(jobs, progress)


@pytest.mark.slow
class OverlapTrainerTest(absltest.TestCase):
  """The trainer with `rl.overlap_steps=1`: a run that dies in step 3 and resumes
  trains step 3 on the rollouts the uninterrupted run used (same loss)."""

  def _config(self):
    config = trainer_config()
    config.rl.update(num_steps=3, overlap_steps=1, num_iterations=1, mini_batches=1,
                     recompute_old_logprobs=False)
    config.rl.loss.kl_beta = 0.0
    return config

  def test_resume_trains_on_the_rollouts_sampled_ahead(self):
    whole = self.create_tempdir().full_path
    with trainer_lib.Trainer(self._config(), whole, grader=FakeGrader()) as trainer:
      trainer.train()
    split = self.create_tempdir().full_path
    with trainer_lib.Trainer(self._config(), split, grader=_FailingGrader(3)) as trainer:
      with self.assertRaisesRegex(RuntimeError, "grader lost"):
        trainer.train()
    self.assertTrue(os.listdir(os.path.join(split, "checkpoints", "rl_ahead")))
    with trainer_lib.Trainer(self._config(), split, grader=FakeGrader()) as trainer:
      trainer.train()
    rows = {d: [r for r in trainer_lib.run_log.read_rows(d) if r["stage"] == "rl"]
            for d in (whole, split)}
    self.assertEqual([r["step"] for r in rows[split]], [1, 2, 3])
    for a, b in zip(rows[whole], rows[split]):
      self.assertEqual(a["loss"], b["loss"], (a["step"], a["loss"], b["loss"]))
      self.assertEqual(a["response_len"], b["response_len"])


if __name__ == "__main__":
  absltest.main()
