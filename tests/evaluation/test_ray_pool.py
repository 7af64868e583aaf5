"""Grading on Ray actors (`evaluation.ray_pool`) on a real local Ray instance.

One Ray instance (2 CPUs) serves the whole module; the pools use it and leave it up.
"""

import json
import os
import re
import subprocess
import sys

from absl.testing import absltest
import pytest

from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import grader as grader_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.record import UNSCORABLE
from rcca_jax.evaluation.pool import EvalPool, Job
from rcca_jax.evaluation.ray_pool import RayPool
from tests.fixtures.app_fixtures import HEADING_TASK, app, heading_app, mark_record
import test_hostile_apps as hostile

ray = pytest.importorskip("ray")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "data", "examples")
CONFIG = EvalConfig(load_timeout=2.0, step_timeout=1.0, rubric_timeout=5.0,
                    response_deadline=20.0)


def _example_jobs() -> list[Job]:
  tasks = {t.id: t for t in tasks_lib.load_tasks(os.path.join(EXAMPLES, "tasks.jsonl"))}
  return [Job(tasks[r.task_id], r.response, r.sample_id) for r in
          responses_lib.load_responses(os.path.join(EXAMPLES, "responses.jsonl"))]


def _comparable(records: list[dict]) -> list[dict]:
  """Records without their timings and with the page session's per-browser app number
  (`http://app-N.rcca.invalid/` in stack traces) blanked: the rest must match exactly."""
  return [json.loads(re.sub(r"app-\d+\.rcca\.invalid", "app-N.rcca.invalid",
                            json.dumps({k: v for k, v in r.items() if k != "timing"})))
          for r in records]


def _pool_records(jobs: list[Job]) -> list[dict]:
  with EvalPool(CONFIG, workers=2) as pool:
    return list(pool.run(jobs))


class BackendChoiceTest(absltest.TestCase):
  """Choosing the backend needs no Ray instance."""

  def test_make_grader(self):
    self.assertIsInstance(grader_lib.make_grader(CONFIG, backend="pool"), EvalPool)
    pool = grader_lib.make_grader(CONFIG, backend="ray", ray_address="")
    self.assertIsInstance(pool, RayPool)
    pool.close()  # nothing started, nothing to stop
    with self.assertRaisesRegex(ValueError, "pool.*ray"):
      grader_lib.make_grader(CONFIG, backend="threads")

  def test_cli_refuses_an_address_without_the_ray_backend(self):
    proc = subprocess.run(
        [sys.executable, "-m", "rcca_jax.evaluate", "--tasks", "t", "--responses", "r",
         "--out", "o", "--ray-address=head:6379"],
        capture_output=True, text=True, timeout=120, check=False)
    self.assertEqual(proc.returncode, 2)
    self.assertIn("--ray-address needs --backend=ray", proc.stderr)


@pytest.mark.browser
@pytest.mark.slow
class RayPoolTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

  @classmethod
  def tearDownClass(cls):
    ray.shutdown()
    super().tearDownClass()

  def test_same_records_as_the_process_pool_on_the_examples(self):
    error = {"task_id": "x", "sample_id": 7, "error": "bad line"}  # passed through
    jobs = _example_jobs()
    jobs.insert(1, error)
    with RayPool(CONFIG, workers=2) as pool:
      records = list(pool.run(jobs))
      self.assertEqual(pool.stats["actor_deaths"], 0)
    self.assertTrue(ray.is_initialized())  # the module's instance is not ours to stop
    self.assertEqual(records[1], error)
    self.assertEqual(_comparable(records), _comparable(_pool_records(jobs)))
    self.assertEqual([(r["task_id"], r["sample_id"]) for r in records],
                     [(j.task.id, j.sample_id) if isinstance(j, Job) else ("x", 7)
                      for j in jobs])

  def test_the_post_process_runs_in_the_actors_workers(self):
    # Sent by reference: each actor imports it, and its pool's worker runs it.
    jobs = [Job(HEADING_TASK, heading_app(text), i) for i, text in enumerate(("Hi", "Bye"))]
    with RayPool(CONFIG, workers=2, post_process=mark_record) as pool:
      records = list(pool.run(jobs))
    self.assertEqual([r["reward"] for r in records], [1.0, 0.7])
    self.assertEqual([r["marked"][1] for r in records], [len(j.response) for j in jobs])
    self.assertNotIn(os.getpid(), [r["marked"][0] for r in records])

  def test_actor_killed_mid_run_is_replaced_and_its_response_retried(self):
    jobs = _example_jobs() * 2
    with RayPool(CONFIG, workers=2) as pool:
      records = []
      for record in pool.run(jobs):
        if not records:  # both actors are busy with the next responses: kill them
          for actor in pool.actors:
            ray.kill(actor)
        records.append(record)
      self.assertGreaterEqual(pool.stats["actor_deaths"], 1)
    self.assertEqual(_comparable(records), _comparable(_pool_records(jobs)))

  def test_response_lost_twice_is_recorded_failed(self):
    jobs = _example_jobs()[:2]
    # No actor answers within 0.1 s (its browser alone takes longer to start).
    with RayPool(CONFIG, workers=2, actor_timeout=0.1) as pool:
      records = list(pool.run(jobs))
      self.assertEqual(pool.stats["actor_deaths"], 4)
    for record, job in zip(records, jobs):
      self.assertEqual(record["task_id"], job.task.id)
      self.assertIs(record["gates"]["runtime"], False)
      self.assertIsNone(record["reward"])  # unscorable: no verdict on the app
      self.assertIn("retried once", record[UNSCORABLE])

  def test_hostile_apps_same_records_and_nothing_reaches_the_network(self):
    with hostile.LoopbackServer() as server:
      url = server.url
      bodies = [
          hostile.GOOD,
          "<button id=b>x</button><script>while (true) {}</script>",
          '<button id="b" onclick="for (;;) {}">x</button><p id="out"></p>',
          "<button id=b>x</button><script>const a = []; for (;;) "
          "a.push(new Array(1e6).fill(1));</script>",
          f'<button id="b">x</button><img src="{url}/i.png"><script>fetch("{url}/f")'
          f'.catch(() => 0); location.href = "{url}/nav";</script>',
          '<button id="b">x</button><script>alert(1); confirm(2); prompt(3); '
          'window.open("http://example.com");</script>',
          "<button id=b>x</button><script>null.boom();</script>",
      ]
      jobs = [Job(hostile.TASK, app(b), i)
              for i, b in enumerate(bodies)]
      with RayPool(CONFIG, workers=2) as pool:
        records = list(pool.run(jobs))
      self.assertEqual(server.hits, 0)
    self.assertEqual(records[0]["reward"], 1.0)
    self.assertEqual(_comparable(records), _comparable(_pool_records(jobs)))


@pytest.mark.browser
@pytest.mark.slow
class RayCliTest(absltest.TestCase):
  """`python -m rcca_jax.evaluate --backend=ray` starts and stops its own Ray."""

  def test_cli_ray_backend_matches_the_pool(self):
    tmp = self.create_tempdir().full_path
    outs = {}
    for backend in ("pool", "ray"):
      outs[backend] = os.path.join(tmp, f"{backend}.jsonl")
      proc = subprocess.run(
          [sys.executable, "-m", "rcca_jax.evaluate",
           "--tasks", os.path.join(EXAMPLES, "tasks.jsonl"),
           "--responses", os.path.join(EXAMPLES, "responses.jsonl"),
           "--out", outs[backend], "--workers", "2", f"--backend={backend}"],
          capture_output=True, text=True, timeout=300, check=False)
      self.assertEqual(proc.returncode, 0, proc.stderr)
    read = lambda path: _comparable([json.loads(l) for l in open(path)])
    self.assertEqual(read(outs["ray"]), read(outs["pool"]))


if __name__ == "__main__":
  absltest.main()
