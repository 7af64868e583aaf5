"""The pool never hangs: fake Chromium executables that never become ready, fail every
launch or fail once; whatever happens, `close()` leaves no process or profile behind
(docs/faults.md#6-the-evaluation-pool)."""

import dataclasses
import importlib.util
import os
import pathlib
import sys

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.evaluation import browser
from rcca_jax.evaluation import cdp
from rcca_jax.evaluation import pool as pool_lib
from rcca_jax.evaluation.config import EvalConfig
from tests.fixtures.app_fixtures import HEADING_TASK, die_once, heading_app

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "fault_matrix.py"
_SPEC = importlib.util.spec_from_file_location("fault_matrix", _PATH)
fault_matrix = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("fault_matrix", fault_matrix)
_SPEC.loader.exec_module(fault_matrix)
_leftovers = fault_matrix.processes_naming


class PoolFaultsTest(parameterized.TestCase):

  def _fake(self, body: str) -> str:
    return fault_matrix.fake_chromium(pathlib.Path(self.create_tempdir().full_path), body)

  def _run(self, executable: str, config: EvalConfig, workers: int, jobs: int = 2):
    """(records or the exception, seconds, the pool's temporary directory, stats)."""
    return fault_matrix.grade_with(executable, workers, jobs,
                                   **dataclasses.asdict(config))

  def _assert_clean(self, tmp):
    self.assertFalse(os.path.exists(tmp), f"{tmp} left")
    self.assertEqual(_leftovers(tmp), [])

  @parameterized.parameters(1, 2)
  @pytest.mark.slow  # below the parameterization, so that every generated test keeps it
  def test_a_browser_that_never_becomes_ready(self, workers):
    config = EvalConfig(worker_start_timeout=3.0)
    out, seconds, tmp, stats = self._run(self._fake(fault_matrix.NEVER_READY), config,
                                         workers)
    self.assertIsInstance(out, RuntimeError)
    self.assertIn("not ready within worker_start_timeout=3s", str(out))
    # 2 starts of at most 3 s, 0.5 s apart, plus spawning and killing them.
    self.assertLess(seconds, 2 * 3.0 + 0.5 + 10.0)
    self.assertEqual(stats["start_failures"], 2 * workers)
    self._assert_clean(tmp)

  def test_a_browser_that_fails_every_launch(self):
    out, seconds, tmp, _ = self._run(self._fake(fault_matrix.FAILS), EvalConfig(), 1)
    self.assertIsInstance(out, RuntimeError)
    self.assertIn("fake chromium: no display (exit 1)", str(out))
    self.assertLess(seconds, 40.0)
    self._assert_clean(tmp)

  def test_a_browser_that_fails_once(self):
    real = browser.find_chromium()
    out, _, tmp, stats = self._run(self._fake(fault_matrix.FAILS_ONCE.format(real=real)),
                                  EvalConfig(), 1, jobs=3)
    self.assertNotIsInstance(out, RuntimeError, out)
    self.assertEqual([r["reward"] for r in out], [1.0, 1.0, 1.0])
    self.assertEqual(stats["start_failures"], 1)
    self._assert_clean(tmp)

  def test_the_browser_gets_a_minimal_environment(self):
    env = cdp.browser_env({"PATH": "/bin", "LC_ALL": "C", "HOME": "/root",
                           "RCCA_JUDGE_API_KEY": "sk-secret", "AWS_SECRET_ACCESS_KEY": "x"})
    self.assertEqual(env, {"PATH": "/bin", "LC_ALL": "C", "HOME": "/root"})


@pytest.mark.browser
class InfrastructureRetryTest(absltest.TestCase):

  def test_a_worker_that_dies_mid_job_is_replaced_and_the_job_graded_again(self):
    marker = os.path.join(self.create_tempdir().full_path, "died")
    os.environ["DIE_ONCE_MARKER"] = marker  # die_once: the worker exits once
    self.addCleanup(os.environ.pop, "DIE_ONCE_MARKER")
    with pool_lib.EvalPool(EvalConfig(), workers=1,
                           post_process=die_once) as pool:
      records = list(pool.run([pool_lib.Job(HEADING_TASK, heading_app("Hi"), i) for i in range(2)]))
      stats = dict(pool.stats)
      tmp = pool.tmp_dir
    self.assertTrue(os.path.exists(marker))  # a worker really exited mid-job
    self.assertEqual((stats["worker_deaths"], stats["retried"]), (1, 1))
    self.assertEqual([r["reward"] for r in records], [1.0, 1.0])
    self.assertFalse(any(pool_lib.GRADING_FAILED in r for r in records))
    self.assertFalse(os.path.exists(tmp))
    self.assertEqual(_leftovers(tmp), [])


@pytest.mark.browser
class BrowserEnvironmentTest(absltest.TestCase):

  def test_a_running_browser_does_not_see_the_api_key(self):
    os.environ["RCCA_JUDGE_API_KEY"] = "sk-secret-in-env"
    pool = pool_lib.EvalPool(EvalConfig(), workers=1)
    try:
      records = list(pool.run([pool_lib.Job(HEADING_TASK, heading_app("Hi"), 0)]))
      browsers = [pid for pid in _leftovers(pool.tmp_dir)
                  if b"--user-data-dir" in open(f"/proc/{pid}/cmdline", "rb").read()]
      environs = [open(f"/proc/{pid}/environ", "rb").read() for pid in browsers]
    finally:
      del os.environ["RCCA_JUDGE_API_KEY"]
      pool.close()
    self.assertEqual(records[0]["reward"], 1.0)
    self.assertNotEmpty(environs)
    for environ in environs:
      self.assertNotIn(b"sk-secret-in-env", environ)
      self.assertIn(b"PATH=", environ)


if __name__ == "__main__":
  absltest.main()
