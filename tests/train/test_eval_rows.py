"""Evaluation rows: summaries per family, category and difficulty, and the base-model
row of `--mode=eval` (no checkpoint)."""

import os
import types

import pytest
from absl.testing import absltest

from rcca_jax.train import eval_loop
from tests.fixtures import trainer_fixtures


def _rollout(task_id, category, difficulty, passed, runs=True, text="app", split=None):
  task = types.SimpleNamespace(id=task_id, category=category, difficulty=difficulty,
                               extra={"split": split} if split else {})
  record = {"reward": 1.0 if passed else (0.2 if runs else 0.1),
            "gates": {"format": True, "source": True, "runtime": runs},
            "rubrics": [{"id": "r1", "passed": passed}]}
  return types.SimpleNamespace(task=task, record=record, reward=record["reward"], text=text)


class SummaryRowsTest(absltest.TestCase):

  def test_groups_by_family_category_and_difficulty(self):
    rollouts = [_rollout("counter-1", "Tools", "easy", True),
                _rollout("counter-2", "Tools", "hard", False),
                _rollout("snake-1", "Games", None, True)]
    summary = eval_loop.summarize(rollouts)
    self.assertEqual({k: v["n"] for k, v in summary["families"].items()},
                     {"counter": 2, "snake": 1})
    self.assertEqual({k: v["pass_rate"] for k, v in summary["categories"].items()},
                     {"Games": 1.0, "Tools": 0.5})
    self.assertEqual({k: v["pass_rate"] for k, v in summary["difficulties"].items()},
                     {"easy": 1.0, "hard": 0.0, "unknown": 1.0})
    flat = eval_loop.flat_metrics(summary)
    self.assertEqual((flat["counter/pass_rate"], flat["category/Tools/pass_rate"],
                      flat["difficulty/hard/pass_rate"]), (0.5, 0.5, 0.0))
    self.assertNotIn("categories", eval_loop.headline(summary))
    self.assertAlmostEqual(eval_loop.headline(summary)["pass_rate"], 2 / 3)
    self.assertNotIn("splits", summary)  # only where tasks name a split

  def test_groups_by_split_where_tasks_name_one(self):
    rollouts = [_rollout("c-f0-000001", None, None, True, split="dev"),
                _rollout("c-f0-000002", None, None, False, split="dev"),
                _rollout("c-f0-n000001", None, None, False, split="novel")]
    summary = eval_loop.summarize(rollouts)
    self.assertEqual({k: (v["n"], v["pass_rate"]) for k, v in summary["splits"].items()},
                     {"dev": (2, 0.5), "novel": (1, 0.0)})
    flat = eval_loop.flat_metrics(summary)
    self.assertEqual((flat["split/dev/pass_rate"], flat["split/novel/pass_rate"]), (0.5, 0.0))
    self.assertNotIn("splits", eval_loop.headline(summary))


class PassAtKTest(absltest.TestCase):

  def test_unbiased_estimator_against_enumeration(self):
    import itertools  # pylint: disable=import-outside-toplevel
    for n, c, k in ((8, 0, 4), (8, 1, 4), (8, 3, 4), (8, 5, 4), (4, 1, 4), (6, 2, 1)):
      draws = list(itertools.combinations([True] * c + [False] * (n - c), k))
      exact = sum(any(d) for d in draws) / len(draws)
      # Both are ratios of small integers; the product form rounds each of its k
      # factors once (relative error <= k * 2**-52).
      self.assertAlmostEqual(eval_loop.pass_at_k(n, c, k), exact, places=12)

  def test_pass_at_4_needs_four_samples_of_every_request(self):
    four = [_rollout("a-1", None, None, p) for p in (True, False, False, False)]
    four += [_rollout("b-1", None, None, False) for _ in range(4)]
    stats = eval_loop.pass_stats(four)
    self.assertEqual((stats["pass_at_1"], stats["pass_at_4"]), (0.125, 0.5))
    self.assertNotIn("pass_at_4", eval_loop.pass_stats(four[:3] + four[4:]))
    self.assertNotIn("pass_at_8", stats)

  def test_pass_at_16_and_distinct_passing_apps(self):
    # a: 16 samples, 2 pass with the same text, 1 with another; b: none passes.
    a = [_rollout("a-1", None, None, i < 3, text="x" if i < 2 else "y") for i in range(16)]
    b = [_rollout("b-1", None, None, False) for _ in range(16)]
    stats = eval_loop.pass_stats(a + b)
    self.assertEqual(stats["pass_at_16"], 0.5)
    self.assertAlmostEqual(stats["pass_at_8"],
                           (eval_loop.pass_at_k(16, 3, 8) + 0.0) / 2, places=12)
    self.assertEqual(stats["distinct_passing_mean"], (2 + 0) / 2)

  def test_sampled_gates_per_family(self):
    # counter: 1 of 4 samples passes, 2 throw on load; snake: 2 samples, both run.
    samples = [_rollout("counter-1", None, None, True),
               _rollout("counter-1", None, None, False),
               _rollout("counter-2", None, None, False, runs=False),
               _rollout("counter-2", None, None, False, runs=False),
               _rollout("snake-1", None, None, False),
               _rollout("snake-1", None, None, False)]
    stats = eval_loop.pass_stats(samples)
    self.assertEqual(stats["sampled_gates_pass"], 4 / 6)
    families = stats["sampled_families"]
    self.assertEqual({f: (v["n"], v["gates_pass"], v["pass_rate"])
                      for f, v in families.items()},
                     {"counter": (4, 0.5, 0.25), "snake": (2, 1.0, 0.0)})
    summary = {**eval_loop.summarize(samples[:1]), **stats}
    flat = eval_loop.flat_metrics(summary)
    self.assertEqual((flat["sampled/counter/gates_pass"], flat["sampled/snake/gates_pass"]),
                     (0.5, 1.0))
    self.assertNotIn("sampled_families", flat)
    self.assertNotIn("sampled_families", eval_loop.headline(summary))


@pytest.mark.slow
class BaseModelRowTest(absltest.TestCase):

  def test_eval_mode_evaluates_the_base_model_without_checkpoint(self):
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    workdir = self.create_tempdir().full_path
    config = trainer_fixtures.trainer_config()
    config.eval.update(num_tasks=3, per_family=1, max_new_tokens=4)
    with trainer_lib.Trainer(config, workdir, mode="eval",
                             grader=trainer_fixtures.FakeGrader()) as trainer:
      with self.assertRaisesRegex(FileNotFoundError, "no checkpoint"):
        trainer.evaluate_checkpoint("data/tasks/dev.jsonl")
      summary = trainer.evaluate_checkpoint("data/tasks/dev.jsonl", checkpoint="base")
    self.assertEqual(summary["samples"], 3)
    # eval.per_family caps each family of the file (its first 3 tasks share one family).
    self.assertLen(summary["families"], 3)
    self.assertIn("categories", summary)
    self.assertIn("difficulties", summary)
    self.assertTrue(os.path.isfile(os.path.join(workdir, "eval", "base_000000_dev",
                                                "summary.json")))


if __name__ == "__main__":
  absltest.main()
