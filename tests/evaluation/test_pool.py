"""Worker pool: order, deadlines with kill-and-replace, recycling, post-processing."""

import os
import signal
import time

from absl.testing import absltest
import pytest

from rcca_jax.evaluation import pool as pool_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.record import UNSCORABLE
from tests.fixtures.app_fixtures import HEADING_TASK, heading_app, mark_record


def _alive(pgid: int) -> bool:
  """Whether a process of group `pgid` is still running (zombies do not count)."""
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
      continue
    if int(fields[2]) == pgid and fields[0] != "Z":
      return True
  return False


def _cmdline(pid: int) -> bytes:
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
      return f.read()
  except OSError:
    return b""


def _running(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


class CheckPostProcessTest(absltest.TestCase):

  def test_only_module_level_functions(self):
    self.assertIs(pool_lib.check_post_process(mark_record), mark_record)
    self.assertIsNone(pool_lib.check_post_process(None))
    with self.assertRaisesRegex(TypeError, "expected a function such as"):
      pool_lib.check_post_process("rcca_jax.credit.localize:localize_record")

    def nested(record, response):
      del response
      return record

    for fn in (nested, lambda record, response: record):
      with self.assertRaisesRegex(TypeError, "not a module-level function"):
        pool_lib.check_post_process(fn)

  def test_pool_fails_fast_on_a_bad_post_process(self):
    with self.assertRaisesRegex(TypeError, "not a module-level function"):
      pool_lib.EvalPool(EvalConfig(), workers=1, post_process=lambda r, s: r)


@pytest.mark.browser
class PoolTest(absltest.TestCase):

  def test_order_post_process_passthrough_and_recycling(self):
    jobs = [pool_lib.Job(HEADING_TASK, heading_app("Hi" if i % 2 == 0 else "Bye"), i)
            for i in range(6)]
    jobs.insert(2, {"task_id": "x", "sample_id": 9, "reward": 0.0, "error": "bad line"})
    with pool_lib.EvalPool(EvalConfig(recycle_worker_after=2), workers=2,
                           post_process=mark_record) as pool:
      records = list(pool.run(jobs))
      self.assertGreaterEqual(pool.stats["recycled"], 1)
      self.assertEqual(pool.stats["worker_deaths"], 0)
    self.assertLen(records, 7)
    self.assertEqual(records[2]["error"], "bad line")
    graded = [r for r in records if "error" not in r]
    self.assertEqual([r["sample_id"] for r in graded], list(range(6)))
    self.assertEqual([r["reward"] for r in graded], [1.0, 0.7, 1.0, 0.7, 1.0, 0.7])
    pids = [r["marked"][0] for r in graded]
    self.assertNotIn(os.getpid(), pids)  # post-processing ran in the workers
    self.assertGreaterEqual(len(set(pids)), 3)  # no worker did more than 2 apps
    self.assertLessEqual(max(pids.count(p) for p in pids), 2)
    self.assertEqual(graded[0]["marked"][1], len(jobs[0].response))

  def test_overrun_is_killed_replaced_and_recorded(self):
    config = EvalConfig(load_timeout=30.0, step_timeout=30.0, response_deadline=3.0)
    jobs = [pool_lib.Job(HEADING_TASK, heading_app("Hi"), 0),
            pool_lib.Job(HEADING_TASK, heading_app("Hi", "while (true) {}"), 1),
            pool_lib.Job(HEADING_TASK, heading_app("Hi"), 2)]
    with pool_lib.EvalPool(config, workers=1) as pool:
      start = time.monotonic()
      records = list(pool.run(jobs))
      elapsed = time.monotonic() - start
      self.assertEqual(pool.stats["timeouts"], 2)  # graded again on a new worker
      self.assertEqual(pool.stats["retried"], 1)
    # The hung response's grading never finished: unscorable, no reward (the default
    # load and step timeouts would have made its hang a verdict long before 3 s).
    self.assertEqual([r["reward"] for r in records], [1.0, None, 1.0])
    self.assertIn("deadline of 3s exceeded; the worker was killed; graded 2 times",
                  records[1][UNSCORABLE])
    self.assertIn("deadline of 3s exceeded", records[1]["issues"][0]["message"])
    self.assertIs(records[1]["gates"]["source"], True)
    self.assertLess(elapsed, 2 * 3.0 + 20.0)

  def test_worker_group_is_gone_after_a_kill(self):
    config = EvalConfig(load_timeout=30.0, step_timeout=30.0, response_deadline=2.0)
    pool = pool_lib.EvalPool(config, workers=1)
    try:
      worker = pool._spawn()
      pgid = worker.proc.pid
      deadline = time.monotonic() + 60
      while not worker.ready and time.monotonic() < deadline:
        if worker.conn.poll(0.1):
          worker.ready = worker.conn.recv()[0] == "ready"
      self.assertTrue(worker.ready)
      self.assertTrue(_alive(pgid))
      family = pool_lib.descendants(pgid)
      browsers = [p for p in family if b"chrom" in _cmdline(p)]
      self.assertNotEmpty(browsers)  # the worker's own Chromium, in its own group
      worker.kill()
      time.sleep(0.5)
      self.assertFalse(_alive(pgid))
      self.assertEqual([p for p in family if _running(p)], [])
    finally:
      pool._workers = []
      try:
        os.killpg(pgid, signal.SIGKILL)
      except ProcessLookupError:
        pass


if __name__ == "__main__":
  absltest.main()
