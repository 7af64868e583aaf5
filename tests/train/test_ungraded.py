"""docs/method.md#2-gated-reward: a response whose rubrics are all ungraded has no reward
and leaves the RL batch without biasing its group."""

import numpy as np
from absl.testing import absltest

from rcca_jax import evaluate
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import evaluator
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.record import RubricResult
from rcca_jax.rl import objective
from rcca_jax.train import rollouts

TASK = tasks_lib.parse_task({
    "id": "u", "request": "A greeting page",
    "rubrics": [
        {"id": "r1", "kind": "initial", "level": "core", "text": "Shows Hi"},
        {"id": "r2", "kind": "initial", "level": "behavior", "text": "Looks friendly"}]})


def _record(rubrics):
  return evaluator.build_record(TASK, 0, [True, True, True], rubrics, (0, 10), [],
                                EvalConfig()).to_json()


def _rollout(sample_id, reward):
  return rollouts.Rollout(
      task=TASK, sample_id=sample_id, prompt=[5, 6], tokens=[7, 8, 9],
      logprobs=np.full(3, -0.5, np.float32), text="abc",
      offsets=np.array([[0, 1], [1, 2], [2, 3]]),
      record={"reward": reward, "gates": {}, "rubrics": []},
      wbar=np.ones(3, np.float32))


class UngradedTest(absltest.TestCase):

  def test_all_ungraded_has_no_reward_some_ungraded_are_left_out(self):
    none = _record([RubricResult("r1", None), RubricResult("r2", None)])
    self.assertIsNone(none["reward"])
    self.assertIsNone(none["rubric_score"])
    self.assertEqual(none["no_reward"], "all 2 rubrics ungraded")
    some = _record([RubricResult("r1", None), RubricResult("r2", False, "major")])
    self.assertAlmostEqual(some["reward"], 1 - 0.15)
    self.assertNotIn("no_reward", some)
    gated = evaluator.build_record(TASK, 0, [True, False], [RubricResult("r1", None),
                                                            RubricResult("r2", None)],
                                   (0, 10), [], EvalConfig()).to_json()
    self.assertEqual(gated["reward"], 0.05)  # a failed gate still decides

  def test_group_advantages_leave_rewardless_responses_out_of_their_group(self):
    # A group with an ungraded member, a flat one and a graded one; the values are those
    # the trainer's batch carried before the advantages became a phase of their own.
    rewards = [1.0, None, 0.2, 0.6, 0.5, 0.5, 0.5, 0.5, 0.9, 0.1, 0.3, 0.0]
    items = [_rollout(i % 4, r) for i, r in enumerate(rewards)]
    last = [1.6470595598220825, -0.6445015668869019, -0.07161121815443039,
            -0.9309466481208801]
    want = {True: [1.2247411012649536, 0.0, -1.2247413396835327, 0.0, *[0.0] * 4, *last],
            False: [0.3999999761581421, 0.0, -0.40000003576278687, 0.0, *[0.0] * 4,
                    0.574999988079071, -0.22499999403953552, -0.02499997615814209,
                    -0.32499998807907104]}
    for scale_by_std, values in want.items():
      adv = rollouts.group_advantages(items, 4, scale_by_std)
      self.assertEqual(adv.dtype, np.float32)
      np.testing.assert_array_equal(adv, np.asarray(values, np.float32))
    graded = rollouts.group_advantages(items[8:], 4)  # all graded: one call of grpo's
    np.testing.assert_array_equal(graded, np.asarray(last, np.float32))
    np.testing.assert_array_equal(
        graded, objective.group_advantages(np.asarray(rewards[8:], np.float32), 4))

  def test_rl_batch_drops_rewardless_rows_without_biasing_their_group(self):
    rewards = [1.0, None, 0.2, 0.6, 0.5, 0.5, 0.9, 0.1]
    items = [_rollout(i % 4, r) for i, r in enumerate(rewards)]
    adv = rollouts.group_advantages(items, 4)
    batch = rollouts.rl_batch(items, adv, max_len=6, pad_id=0)
    np.testing.assert_array_equal(batch["advantages"], adv)
    want_first = objective.group_advantages(np.array([1.0, 0.2, 0.6], np.float32), 3)
    np.testing.assert_allclose(adv[[0, 2, 3]], want_first, rtol=1e-6)
    self.assertEqual(adv[1], 0.0)
    np.testing.assert_allclose(
        adv[4:], objective.group_advantages(np.array(rewards[4:], np.float32), 4), rtol=1e-6)
    self.assertEqual(batch["loss_mask"][1].sum(), 0.0)  # left out of the loss
    np.testing.assert_array_equal(batch["loss_mask"][0], [0, 0, 1, 1, 1, 0])
    self.assertEqual(float(objective.loss_denominator(batch["loss_mask"],
                                                 "seq-mean-token-mean")), 7.0)

  def test_stats_count_rewardless_responses_apart(self):
    good = {"reward": 0.8, "gates": {"format": True, "source": True, "runtime": True},
            "rubrics": [{"id": "r1", "passed": True}]}
    none = dict(good, reward=None, rubric_score=None, no_reward="all 1 rubrics ungraded",
                rubrics=[{"id": "r1", "passed": None}])
    stats = rollouts.record_stats([good, none])
    self.assertAlmostEqual(stats["reward_mean"], 0.8)
    self.assertEqual(stats["no_reward"], 1.0)
    summary = evaluate.Summary()
    summary.add(good)
    summary.add(none)
    self.assertIn("mean reward 0.8000", summary.line())
    self.assertIn("no reward 1", summary.line())
    self.assertEqual(summary.ungraded, 1)


if __name__ == "__main__":
  absltest.main()
