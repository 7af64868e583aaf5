"""Fresh tasks (`data.fresh`): draws beyond the committed corpus, disjoint from the dev
and test requests, and the job's train and dev sets built from them."""

import os

import pytest
from absl.testing import absltest

from experiments import natural_small
from rcca_jax.data import draws
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.selection import load_task_file
from rcca_jax.rl import optim
from rcca_jax.train import config_check
from rcca_jax.train import sections
from rcca_jax.train import trainer as trainer_lib
from rcca_jax.train import workdir_guard
from rcca_jax.train.task_sources import TaskSources
from tests.fixtures.trainer_fixtures import FakeGrader

FAMILIES = ("dark_mode", "counter")


class FreshSplitsTest(absltest.TestCase):

  def test_disjoint_deterministic_and_dev_fixed_as_train_grows(self):
    committed = frozenset(t.request for path in ("data/tasks/dev.jsonl", "data/tasks/test.jsonl",
                                                 "data/tasks/train.jsonl")
                          for t in load_task_file(path))
    small = draws.fresh_splits(FAMILIES, 30, 4, 1, committed)
    large = draws.fresh_splits(FAMILIES, 60, 4, 1, committed)
    self.assertLen(small["train"], 60)
    self.assertLen(small["dev"], 8)
    self.assertEqual(small["dev"], large["dev"])  # dev drawn first: unchanged
    self.assertEqual({t.id for t in small["train"]} - {t.id for t in large["train"]}, set())
    requests = [t.request for t in large["train"] + large["dev"]]
    self.assertLen(set(requests), len(requests))
    self.assertEmpty(set(requests) & committed)
    ids = [t.id for t in large["train"] + large["dev"]]
    self.assertLen(set(ids), len(ids))
    self.assertEqual({tasks_lib.family_of(t) for t in large["train"]}, set(FAMILIES))
    self.assertEqual([tasks_lib.family_of(t) for t in large["dev"]],
                     ["dark_mode"] * 4 + ["counter"] * 4)
    self.assertTrue(all(t.reference for t in large["train"]))
    draws.fresh_splits.cache_clear()
    self.assertEqual(draws.fresh_splits(FAMILIES, 30, 4, 1, committed), small)
    other = draws.fresh_splits(FAMILIES, 30, 4, 2, committed)
    self.assertNotEqual([t.request for t in other["dev"]], [t.request for t in small["dev"]])

  def test_family_of_id_inverts_both_id_schemes(self):
    fresh = draws.fresh_splits(("char_counter",), 2, 1, 7, frozenset())
    for task in fresh["train"] + fresh["dev"] + tuple(load_task_file("data/tasks/dev.jsonl")):
      self.assertEqual(draws.family_of_id(task.id), tasks_lib.family_of(task), task.id)
    self.assertEqual(draws.family_of_id("tip_splitter-f12-000003"), "tip_splitter")

  def test_excluded_requests_are_never_drawn(self):
    first = draws.fresh_splits(("counter",), 5, 0, 0, frozenset())["train"]
    excluded = frozenset(t.request for t in first[:3])
    again = draws.fresh_splits(("counter",), 5, 0, 0, excluded)["train"]
    self.assertEmpty({t.request for t in again} & excluded)

  def test_spec_validates(self):
    self.assertFalse(draws.FreshSpec().enabled)
    self.assertTrue(draws.FreshSpec(dev_per_family=1).enabled)
    with self.assertRaisesRegex(ValueError, "train_per_family=-1 must be an integer >= 0"):
      draws.FreshSpec(train_per_family=-1)
    with self.assertRaisesRegex(ValueError, "exclude=.*must be task file paths"):
      draws.FreshSpec(exclude=("",))
    with self.assertRaisesRegex(ValueError, "unknown families: nope"):
      draws.fresh_splits(("nope",), 1, 0, 0, frozenset())


def small_config(preset: str = "rl"):
  config = natural_small.get_config(preset)
  config.data.families = FAMILIES
  config.data.fresh.update(train_per_family=20, dev_per_family=3)
  config.eval.per_family = 4
  return config


class TaskSourcesTest(absltest.TestCase):

  def test_train_and_dev_sets_with_fresh_tasks(self):
    from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
    config = small_config()
    workdir = self.create_tempdir().full_path
    job = sections.job_config(config)
    sources = TaskSources(job, AutoTokenizer.from_pretrained("data/tokenizer"), workdir,
                          grade_pairs=None)
    train = sources.train()
    listed = [t for t in load_task_file("data/tasks/train.jsonl")
              if tasks_lib.family_of(t) in FAMILIES]
    self.assertEqual(train[:len(listed)], listed)
    self.assertLen(train, len(listed) + 40)
    self.assertLen(sources.train(per_family=90), 180)  # the file's 88, then 2 fresh
    dev = sources.dev()
    # eval.per_family=4 of each family: the committed file's 5 fill it (file first).
    self.assertEqual([t.id.rsplit("-", 1)[0] for t in dev], ["counter"] * 4 + ["dark_mode"] * 4)
    written = tasks_lib.load_tasks(os.path.join(workdir, "fresh_dev_tasks.jsonl"))
    self.assertEqual(tuple(written), sources.fresh()["dev"])
    self.assertEmpty({t.request for t in written} & {t.request for t in train})
    self.assertLen(sources.sft_examples(), len(train))

  def test_fresh_dev_alone(self):
    config = small_config()
    config.eval.update(tasks="", per_family=0)
    job = sections.job_config(config)
    sources = TaskSources(job, None, self.create_tempdir().full_path, grade_pairs=None)
    self.assertEqual([t.id for t in sources.dev()], [t.id for t in sources.fresh()["dev"]])
    self.assertLen(sources.dev(), 6)


class ConfigCheckTest(absltest.TestCase):

  def test_fresh_fields_are_checked(self):
    config = small_config()
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.data.fresh.dev_per_family = -1
    config.eval.every_sft_steps = -2
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "data.fresh: dev_per_family=-1 must be an integer >= 0",
        "eval.every_sft_steps=-2 must be >= 0"])
    config = small_config()
    config.data.families = ()
    self.assertIn("data.fresh needs data.families (the families whose generators it draws)",
                  config_check.problems(config, num_devices=1))
    config.data.families = ("dark_mode", "nope")
    self.assertIn("data.families: unknown families for data.fresh: nope",
                  config_check.problems(config, num_devices=1))
    config = small_config()
    config.data.fresh.exclude = ("no/such.jsonl",)
    self.assertIn("data.fresh.exclude[0]='no/such.jsonl': no such file or directory",
                  config_check.problems(config, num_devices=1))
    config = small_config()
    config.data.fresh.dev_per_family = 0
    config.eval.tasks = ""
    self.assertIn("eval.tasks is empty and data.fresh.dev_per_family is 0: no dev tasks to "
                  "evaluate (or set eval.enabled=False)",
                  config_check.problems(config, num_devices=1))
    self.assertEqual(config_check.problems(config, num_devices=1, mode="eval"), [])

  def test_longer_sft_continues_a_finished_sft_at_its_last_learning_rate(self):
    pilot, longer = natural_small.get_config("pilot"), natural_small.get_config("longer_sft")
    self.assertEqual(config_check.problems(longer, num_devices=1), [])
    job = sections.job_config(longer)
    schedule = optim.learning_rate_schedule(job.sft.optimizer)
    peak = pilot.sft.optimizer.learning_rate
    end = peak * pilot.sft.optimizer.end_lr_ratio
    # float32 schedule arithmetic: a few ulps of 1.5e-4.
    for step in (6000, 7500, 8999):
      self.assertAlmostEqual(float(schedule(step)), end, delta=1e-6 * end)
    self.assertGreater(float(schedule(5000)), 2 * end)  # the pilot's decay, unchanged
    # Resuming the pilot's directory changes exactly what the docstring's flag allows.
    changes = workdir_guard.config_changes(pilot.to_dict(), longer.to_dict())
    self.assertEqual([name for name, _, _ in changes],
                     ["eval.every_sft_steps", "eval.samples_per_request", "sft.num_steps",
                      "sft.optimizer.total_steps"])

  def test_longer_rl_shares_the_longer_sft_and_changes_only_rl(self):
    longer, rl = natural_small.get_config("longer_sft"), natural_small.get_config("longer_rl")
    self.assertEqual(config_check.problems(rl, num_devices=1), [])
    # The ablation's SFT stage is the finished longer_sft run: same SFT fields.
    self.assertEqual(rl.sft.to_dict(), longer.sft.to_dict())
    changes = workdir_guard.config_changes(longer.to_dict(), rl.to_dict())
    self.assertEqual([name for name, _, _ in changes],
                     ["eval.samples_per_request", "rl.num_steps",
                      "rl.optimizer.learning_rate"])
    self.assertEqual((rl.rl.num_steps, rl.rl.optimizer.learning_rate), (40, 6e-5))

  def test_fresh_needs_the_natural_setting(self):
    config = small_config()
    config.data.setting = "controlled"
    self.assertIn("data.fresh draws natural-setting tasks: it needs data.setting='natural'",
                  config_check.problems(config, num_devices=1))


if __name__ == "__main__":
  absltest.main()


@pytest.mark.slow
class SftCurveTest(absltest.TestCase):

  def test_dev_evaluation_every_sft_steps_on_fresh_dev(self):
    config = small_config("pilot")  # the SFT curve alone
    config.model = natural_small.model_config(hidden=64, layers=1)
    config.data.fresh.update(train_per_family=4, dev_per_family=1)
    config.sft.update(num_steps=5, batch_size=2, log_every=1, checkpoint_every=2)
    config.eval.update(tasks="", per_family=0, every_sft_steps=2, max_new_tokens=8,
                       num_reports=0)
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader()) as trainer:
      trainer.train()
      rows = trainer.metrics.rows()
    evals = [(r["after"], r["step"]) for r in rows if r["stage"] == "eval"]
    self.assertEqual(evals, [("sft", 2), ("sft", 4), ("sft", 5)])
    self.assertEqual(sorted(os.listdir(os.path.join(workdir, "eval"))),
                     ["sft_000002", "sft_000004", "sft_000005"])
    dev = tasks_lib.load_tasks(os.path.join(workdir, "fresh_dev_tasks.jsonl"))
    self.assertEqual([tasks_lib.family_of(t) for t in dev], list(FAMILIES))
