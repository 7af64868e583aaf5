"""The restart loop (`python -m rcca_jax.restart`) on real child processes: 75 and a
death by a signal restart, 0 / 2 / 3 end it, SIGTERM reaches the job."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from absl.testing import absltest

from rcca_jax import restart

# The child counts its runs in a file and exits with the status listed for that run
# ("kill": SIGKILL itself; "term": wait for SIGTERM, then exit 75 as a preempted job).
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    path, plan = sys.argv[1], sys.argv[2].split(",")
    runs = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(runs + 1))
    what = plan[min(runs, len(plan) - 1)]
    if what == "kill":
      os.kill(os.getpid(), signal.SIGKILL)
    if what == "term":
      signal.signal(signal.SIGTERM, lambda *a: sys.exit(75))
      open(path + ".ready", "w").close()
      time.sleep(60)
    sys.exit(int(what))
""")


class RestartLoopTest(absltest.TestCase):

  def _run(self, plan, **kw):
    path = os.path.join(self.create_tempdir().full_path, "runs")
    lines = []
    status = restart.run([sys.executable, "-c", CHILD, path, plan], log=lines.append, **kw)
    return status, int(open(path).read()), lines

  def test_preempted_and_killed_runs_restart_until_done(self):
    status, runs, lines = self._run("75,kill,75,0")
    self.assertEqual((status, runs), (0, 4))
    self.assertEqual(lines, ["restart: exit 75; restarting (1 of 100)",
                             "restart: exit -9; restarting (2 of 100)",
                             "restart: exit 75; restarting (3 of 100)"])

  def test_bad_config_and_safe_stop_end_the_loop(self):
    for code in (2, 3):
      status, runs, _ = self._run(f"75,{code},0")
      self.assertEqual((status, runs), (code, 2))

  def test_restarts_are_bounded(self):
    status, runs, _ = self._run("75", max_restarts=2)
    self.assertEqual((status, runs), (75, 3))

  def test_sigterm_is_passed_to_the_job_and_ends_the_loop(self):
    root = self.create_tempdir().full_path
    path = os.path.join(root, "runs")
    loop = subprocess.Popen([sys.executable, "-m", "rcca_jax.restart", "--delay=0", "--",
                             sys.executable, "-c", CHILD, path, "term"])
    deadline = time.time() + 30
    while not os.path.exists(path + ".ready") and time.time() < deadline:
      time.sleep(0.05)
    loop.send_signal(signal.SIGTERM)
    self.assertEqual(loop.wait(timeout=30), 75)
    self.assertEqual(open(path).read(), "1")  # not restarted

  def test_a_signal_death_reports_128_plus_the_signal(self):
    status, runs, _ = self._run("kill", max_restarts=0)
    self.assertEqual((status, runs), (128 + signal.SIGKILL, 1))


if __name__ == "__main__":
  absltest.main()
