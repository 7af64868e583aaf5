"""The on-disk grading cache: keys, what is never stored, equality with fresh grading in
the browser, failed workers, reproduced hangs, and concurrent writers."""

import dataclasses
import json
import multiprocessing
import os
import pathlib
import shutil
from unittest import mock

from absl.testing import absltest
import pytest

from experiments import tiny_cpu
from rcca_jax.credit.localize import localize_record
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluate import evaluate_files, make_jobs
from rcca_jax.evaluation import grading_cache as cache_lib
from rcca_jax.evaluation import pool as pool_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.grader import make_grader
from rcca_jax.train import config_check
from tests.fixtures.app_fixtures import die_once

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "examples"
TASK = tasks_lib.parse_task({
    "id": "p", "request": "a heading",
    "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "shows Hi",
                 "check": 'expect text "h1" == "Hi"'}]})


def _app(text: str, script: str = "") -> str:
  return (f"```html\n<!DOCTYPE html><html><body><h1>{text}</h1><script>{script}</script>"
          "</body></html>\n```")


def _example_jobs(indices) -> list[pool_lib.Job]:
  tasks = tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl")
  items = responses_lib.load_responses(EXAMPLES / "responses.jsonl")
  jobs = make_jobs(tasks, items)
  return [jobs[i] for i in indices]


def _without_timing(record: dict) -> dict:
  return {k: v for k, v in record.items() if k != "timing"}


def _stored(directory: str) -> list[str]:
  return sorted(p.name for p in pathlib.Path(directory).rglob("*.json"))


class KeyTest(absltest.TestCase):

  def test_key_changes_with_each_part(self):
    post, config = localize_record, EvalConfig()
    version = cache_lib.code_version(post)
    base = cache_lib.job_key(TASK, _app("Hi"), config, post, version)
    self.assertEqual(base, cache_lib.job_key(TASK, _app("Hi"), EvalConfig(), post,
                                             cache_lib.code_version(post)))
    other_task = dataclasses.replace(TASK, request="a big heading")
    variants = [
        cache_lib.job_key(TASK, _app("Hi!"), config, post, version),
        cache_lib.job_key(other_task, _app("Hi"), config, post, version),
        cache_lib.job_key(TASK, _app("Hi"), EvalConfig(load_timeout=6.0), post, version),
        cache_lib.job_key(TASK, _app("Hi"), EvalConfig(reward={"floor": 0.3}), post,
                          version),
        cache_lib.job_key(TASK, _app("Hi"), config, None, version),
        cache_lib.job_key(TASK, _app("Hi"), config, post, "another version"),
    ]
    self.assertLen(set(variants + [base]), len(variants) + 1)
    # The name the pool took as a string before it took the function: keys are
    # computed as they were.
    self.assertEqual(cache_lib.post_process_name(post),
                     "rcca_jax.credit.localize:localize_record")
    self.assertEqual(cache_lib.post_process_name(None), "")

  def test_the_version_covers_the_grading_code(self):
    names = {str(p.relative_to(cache_lib._PACKAGE))
             for p in cache_lib.grading_files(localize_record)}
    for name in ("evaluation/evaluator.py", "evaluation/page_session.py",
                 "evaluation/grading_cache.py", "credit/localize.py", "credit/context.py",
                 "credit/targets.py", "base/dsl.py", "base/rubric_dsl.lark"):
      self.assertIn(name, names)
    self.assertNotIn("credit/localize.py",
                     {str(p.relative_to(cache_lib._PACKAGE))
                      for p in cache_lib.grading_files(None)})
    self.assertNotEqual(cache_lib.code_version(localize_record), cache_lib.code_version(None))

  def test_an_edit_of_the_post_process_module_regrades(self):
    # The version of a copy of the package, edited file by file.
    package = pathlib.Path(self.create_tempdir().full_path) / "rcca_jax"
    shutil.copytree(cache_lib._PACKAGE, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    self.enter_context(mock.patch.object(cache_lib, "_PACKAGE", package))
    self.addCleanup(cache_lib.code_version.cache_clear)
    directory = self.create_tempdir().full_path
    job = pool_lib.Job(TASK, _app("Hi"), 0)

    def graded(edit: str = "") -> bool:
      """Whether `job` is graded (not served) after `edit` gets a comment line."""
      if edit:
        with open(package / edit, "a", encoding="utf-8") as f:
          f.write("# edited\n")
      cache_lib.code_version.cache_clear()
      grader = cache_lib.CachedGrader(_CannedGrader(), directory, config=EvalConfig(),
                                      post_process=localize_record)
      list(grader.run([job]))
      return grader.stats["cache_misses"] == 1

    self.assertTrue(graded())
    self.assertFalse(graded())
    self.assertFalse(graded("train/trainer.py"))  # not grading code
    self.assertTrue(graded("credit/localize.py"))  # the post-process's module
    self.assertFalse(graded())
    self.assertTrue(graded("credit/context.py"))  # a module it imports

  def test_what_is_never_stored(self):
    ok = {"reward": 1.0, "issues": [], "rubrics": [{"id": "r1", "passed": True}]}
    self.assertTrue(cache_lib.cacheable(ok, has_judge=False))
    for bad in ({**ok, pool_lib.GRADING_FAILED: "the evaluation worker died"},
                {**ok, "error": "evaluator error: boom"},
                {**ok, "post_process_error": "KeyError: x"},
                {**ok, "issues": [{"stage": "runtime", "evidence": {"crash": "gone"}}]}):
      self.assertFalse(cache_lib.cacheable(bad, has_judge=False), bad)
    judged = {**ok, "rubrics": [{"id": "r1", "passed": None,
                                 "detail": "ungraded: judge timed out"}]}
    self.assertFalse(cache_lib.cacheable(judged, has_judge=True))
    self.assertTrue(cache_lib.cacheable(judged, has_judge=False))
    hang = {**ok, "issues": [{"stage": "runtime", "evidence": {"hang": "load timeout"}}]}
    self.assertTrue(cache_lib.is_hang(hang))
    self.assertFalse(cache_lib.is_hang(ok))


class ConfigTest(absltest.TestCase):

  def test_grading_cache_field(self):
    config = tiny_cpu.get_config()
    self.assertEqual(config.eval.grading_cache, "")  # off by default
    config.eval.grading_cache = self.create_tempdir().full_path
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.eval.grading_cache = self.create_tempfile().full_path
    self.assertEqual(config_check.problems(config, num_devices=1), [
        f"eval.grading_cache={config.eval.grading_cache!r} must be a directory path "
        "('' = no cache)"])


def _write_many(directory: str, seed: int, rounds: int) -> None:
  """Stores records under 20 shared keys, of a size that differs by writer and round."""
  grader = cache_lib.CachedGrader(None, directory, config=EvalConfig(), post_process=None)
  for r in range(rounds):
    for k in range(20):
      record = {"task_id": "t", "sample_id": 0, "reward": 1.0, "issues": [],
                "pad": "x" * (1000 * ((seed + r + k) % 7 + 1)), "writer": seed}
      assert grader._store(f"{k:02d}" * 32, record)
      grader._load(f"{(k + 7) % 20:02d}" * 32)  # reads while the other writes


class ConcurrentWritersTest(absltest.TestCase):

  def test_two_processes_write_the_same_keys(self):
    directory = self.create_tempdir().full_path
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(directory, seed, 30)) for seed in (0, 1)]
    for p in procs:
      p.start()
    for p in procs:
      p.join(120)
      self.assertEqual(p.exitcode, 0)
    grader = cache_lib.CachedGrader(None, directory, config=EvalConfig(), post_process=None)
    for k in range(20):
      record = grader._load(f"{k:02d}" * 32)
      self.assertIn(record["writer"], (0, 1))
      self.assertEqual(set(record["pad"]), {"x"})
    self.assertLen(_stored(directory), 20)  # no temporary file left behind


class _CannedGrader:
  """Answers every job with one passing record (the cache is what is tested)."""
  stats: dict = {}

  def run(self, jobs, progress=None):
    del progress
    for job in jobs:
      yield {"task_id": job.task.id, "sample_id": job.sample_id, "reward": 1.0,
             "gates": {}, "rubrics": [], "issues": []}

  def close(self):
    pass


def _grade_on_a_full_disk(directory: str, queue) -> None:
  """In a child: a file-size limit of 16 bytes (SIGXFSZ ignored, so writes fail with
  EFBIG as on a full disk), then two jobs through the cache."""
  import resource  # pylint: disable=import-outside-toplevel
  import signal  # pylint: disable=import-outside-toplevel
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
  grader = cache_lib.CachedGrader(_CannedGrader(), directory, config=EvalConfig(),
                                  post_process=None)
  jobs = [pool_lib.Job(TASK, _app(text), i) for i, text in enumerate(("Hi", "Ho"))]
  records = list(grader.run(jobs))
  queue.put(([r["reward"] for r in records], grader.stats))


class FullDiskTest(absltest.TestCase):

  def test_a_failed_write_is_counted_and_the_record_still_served(self):
    directory = self.create_tempdir().full_path
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_grade_on_a_full_disk, args=(directory, queue))
    child.start()
    rewards, stats = queue.get(timeout=120)
    child.join(30)
    self.assertEqual(child.exitcode, 0)
    self.assertEqual(rewards, [1.0, 1.0])
    self.assertEqual((stats["cache_write_errors"], stats["cache_stored"]), (2, 0))
    self.assertEqual(_stored(directory), [])  # no partial record left behind


def _check_equal_to_fresh(test, indices):
  """Fresh grading vs the cache's cold run vs its warm run, field by field. The warm run
  grades only the hangs (stored once reproduced); without hangs its pool never starts
  a worker."""
  jobs = _example_jobs(indices)
  config = EvalConfig()
  with make_grader(config, workers=2, post_process=localize_record) as pool:
    fresh = list(pool.run(jobs, progress=False))
  unique = {(j.task.id, j.response): cache_lib.is_hang(r) for j, r in zip(jobs, fresh)}
  hangs = sum(unique.values())
  directory = test.create_tempdir().full_path
  with make_grader(config, workers=2, post_process=localize_record,
                   cache_dir=directory) as cold:
    first = list(cold.run(jobs, progress=False))
    test.assertIn("timeouts", cold.stats)
    copies = sum(unique[(j.task.id, j.response)] for j in jobs)  # each hang copy graded
    test.assertEqual(cold.stats["cache_misses"], len(unique) - hangs + copies)
    test.assertEqual(cold.stats["cache_hits"], len(jobs) - cold.stats["cache_misses"])
    test.assertLen(_stored(directory), cold.stats["cache_stored"])
  relabeled = [dataclasses.replace(j, sample_id=100 + i) for i, j in enumerate(jobs)]
  warm = make_grader(config, workers=2, post_process=localize_record, cache_dir=directory)
  second = list(warm.run(relabeled, progress=False))
  if not hangs:
    test.assertEqual(warm.grader._workers, [])  # nothing was graded
    test.assertEqual(warm.stats["cache_hits"], len(jobs))
  warm.close()
  test.assertTrue(any(i["stage"] == "rubric" and i["direct"] for r in fresh
                      for i in r["issues"]))  # the comparison covers issues and spans
  for i, (a, b, c) in enumerate(zip(fresh, first, second)):
    test.assertEqual(set(a), set(b))
    for field in a:
      if field != "timing":
        test.assertEqual(a[field], b[field], (i, field))
    test.assertEqual(c["sample_id"], 100 + i)
    if not cache_lib.is_hang(a):
      test.assertEqual(_without_timing({**c, "sample_id": a["sample_id"]}),
                       _without_timing(a))
  return fresh


@pytest.mark.browser
class CacheInTheBrowserTest(absltest.TestCase):

  def test_records_equal_fresh_grading(self):
    # counter reference, a "no html" variant, a failing temperature app twice.
    fresh = _check_equal_to_fresh(self, [0, 5, 10, 10])
    self.assertFalse(any(cache_lib.is_hang(r) for r in fresh))

  @pytest.mark.slow
  def test_records_equal_fresh_grading_on_every_example(self):
    _check_equal_to_fresh(self, list(range(14)))

  def test_evaluate_files_with_a_cache(self):
    directory = self.create_tempdir().full_path
    responses = (EXAMPLES / "responses.jsonl").read_text().splitlines()
    path = self.create_tempfile(content="\n".join([responses[0], responses[10]]) + "\n")
    outs = []
    for name in ("first", "second"):
      out = os.path.join(directory, f"{name}.jsonl")
      summary = evaluate_files(str(EXAMPLES / "tasks.jsonl"), path.full_path, out,
                               config=EvalConfig(), post_process=localize_record,
                               cache_dir=os.path.join(directory, "cache"))
      self.assertEqual(summary.count, 2)
      with open(out, encoding="utf-8") as f:
        outs.append([_without_timing(json.loads(line)) for line in f])
    self.assertEqual(outs[0], outs[1])
    self.assertLen(_stored(os.path.join(directory, "cache")), 2)

  def test_a_dead_worker_is_not_cached_and_a_retry_grades(self):
    directory = self.create_tempdir().full_path
    marker = os.path.join(self.create_tempdir().full_path, "died")
    os.environ["DIE_ONCE_MARKER"] = marker
    self.addCleanup(os.environ.pop, "DIE_ONCE_MARKER")
    job = pool_lib.Job(TASK, _app("Hi"), 0)
    # infra_retries=0: the death itself is recorded (by default the pool grades the
    # response again on a new worker: tests/evaluation/test_pool_faults.py).
    with make_grader(EvalConfig(infra_retries=0), post_process=die_once,
                     cache_dir=directory) as grader:
      (failed,) = grader.run([job], progress=False)
      self.assertTrue(os.path.exists(marker))  # the worker really died
      self.assertEqual(grader.stats["worker_deaths"], 1)
      self.assertIn("worker died", failed[pool_lib.GRADING_FAILED])
      self.assertFalse(grader.path(grader.key(job)).exists())
      self.assertEqual(_stored(directory), [])
      (retried,) = grader.run([job], progress=False)
      self.assertEqual(grader.stats["cache_misses"], 2)
      self.assertEqual(retried["reward"], 1.0)
      self.assertNotIn(pool_lib.GRADING_FAILED, retried)
      self.assertTrue(grader.path(grader.key(job)).exists())
      (hit,) = grader.run([job], progress=False)
      self.assertEqual(grader.stats["cache_hits"], 1)
      self.assertEqual(_without_timing(hit), _without_timing(retried))

  def test_an_overrun_is_not_cached(self):
    directory = self.create_tempdir().full_path
    config = EvalConfig(load_timeout=30.0, step_timeout=30.0, response_deadline=3.0)
    job = pool_lib.Job(TASK, _app("Hi", "while (true) {}"), 0)
    with make_grader(config, cache_dir=directory) as grader:
      (record,) = grader.run([job], progress=False)
      self.assertEqual(grader.stats["timeouts"], 2)  # graded again on a new worker
      self.assertIn("deadline of 3s exceeded", record[pool_lib.GRADING_FAILED])
      self.assertIn("graded 2 times", record[pool_lib.GRADING_FAILED])
    self.assertEqual(list(pathlib.Path(directory).rglob("*.*")), [])

  def test_a_hang_is_stored_once_reproduced(self):
    directory = self.create_tempdir().full_path
    config = EvalConfig(load_timeout=1.0)
    jobs = [pool_lib.Job(TASK, _app("Hi", "while (true) {}"), 0),
            pool_lib.Job(TASK, _app("Hi"), 1)]
    with make_grader(config, cache_dir=directory) as grader:
      first = list(grader.run(jobs, progress=False))
      self.assertTrue(cache_lib.is_hang(first[0]))
      self.assertEqual(first[1]["reward"], 1.0)
      hang_path = grader.path(grader.key(jobs[0]))
      self.assertFalse(hang_path.exists())  # one hang: a marker only
      self.assertTrue(hang_path.with_suffix(".hang").exists())
      self.assertEqual(grader.stats["cache_stored"], 1)
      second = list(grader.run(jobs, progress=False))
      self.assertTrue(cache_lib.is_hang(second[0]))
      self.assertTrue(hang_path.exists())  # reproduced: stored
      self.assertEqual((grader.stats["cache_misses"], grader.stats["cache_hits"]), (3, 1))
      third = list(grader.run(jobs[:1], progress=False))
      self.assertEqual(grader.stats["cache_hits"], 2)
      self.assertEqual(_without_timing(third[0]), _without_timing(second[0]))
    with open(hang_path, encoding="utf-8") as f:
      self.assertEqual(json.load(f)["task_id"], "p")


if __name__ == "__main__":
  absltest.main()
