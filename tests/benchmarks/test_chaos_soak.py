"""benchmarks/chaos_soak.py's parts: the seeded schedule, the judge it grades with (a
real loopback server and its bursts), what it watches in the job's processes and files
(real child processes, a real tmpfs). The soak itself is run by hand (its README)."""

import importlib.util
import json
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import judge as judge_lib

_BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
  spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules.setdefault(name, module)  # chaos_soak imports fault_matrix by name
  spec.loader.exec_module(module)
  return module


fault_matrix = _load("fault_matrix")
chaos_soak = _load("chaos_soak")
NEW = ("sigterm_grading", "sigkill_grading", "worker_killed", "judge_burst", "disk_full")


def _post(url, timeout=5.0):
  """One chat request; (status, Retry-After header, reply text or the error's name)."""
  body = json.dumps({"messages": [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "app"}]}).encode()
  request = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                   headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(request, timeout=timeout) as reply:
      return reply.status, None, reply.read().decode()
  except urllib.error.HTTPError as e:
    return e.code, e.headers.get("Retry-After"), ""
  except OSError as e:  # a timeout
    return None, None, type(e).__name__


def _busy_or_idle(conn):
  """A spawned child: once started, idle on its pipe until told to spin for that many
  seconds."""
  conn.send("ready")
  while True:
    seconds = conn.recv()
    if seconds is None:
      return
    end = time.monotonic() + seconds
    while time.monotonic() < end:
      pass
    conn.send("done")


class ScheduleTest(parameterized.TestCase):

  @parameterized.parameters(0, 1, 7, 100)
  def test_distinct_increasing_steps_inside_the_run(self, seed):
    plan = chaos_soak.schedule(seed, 5, 30)
    steps = [s for s, _ in plan]
    self.assertEqual(steps, sorted(set(steps)))
    self.assertLen(steps, 5)
    self.assertTrue(all(1 <= s <= 29 for s in steps))
    self.assertEqual(plan, chaos_soak.schedule(seed, 5, 30))

  def test_draws_every_kind_and_sigterm_eval_only_at_dev_evaluations(self):
    plans = [chaos_soak.schedule(seed, 5, 30) for seed in range(300)]
    drawn = {kind for plan in plans for _, kind in plan}
    self.assertEqual(drawn, set(chaos_soak.KINDS))
    self.assertTrue(set(NEW) <= drawn)
    self.assertTrue(all(step % chaos_soak.EVAL_EVERY == 0 for plan in plans
                        for step, kind in plan if kind == "sigterm_eval"))

  @parameterized.parameters(100, 101)
  def test_forced_kinds_are_the_seeds_steps_in_a_seeded_order(self, seed):
    plan = chaos_soak.schedule(seed, 5, 30, NEW)
    self.assertEqual(sorted(k for _, k in plan), sorted(NEW))
    self.assertEqual([s for s, _ in plan], [s for s, _ in chaos_soak.schedule(seed, 5, 30)])
    self.assertEqual(plan, chaos_soak.schedule(seed, 5, 30, NEW))

  def test_forced_sigterm_eval_lands_on_dev_evaluation_steps(self):
    for seed in range(20):
      plan = chaos_soak.schedule(seed, 3, 30, ["sigterm_eval", "sigterm_eval", "disk_full"])
      evals = [s for s, k in plan if k == "sigterm_eval"]
      self.assertLen(evals, 2)
      self.assertTrue(all(s % 2 == 0 for s in evals), plan)

  @parameterized.named_parameters(
      ("too_many_faults", 30, None, "need more than"),
      ("unknown_kind", 2, ["sigkill_step", "flood"], "expected 2"),
      ("count_differs", 2, ["sigkill_step"], "expected 2"),
      ("no_even_steps_enough", 5, ["sigterm_eval"] * 5, "no 6-step schedule"))
  def test_refuses(self, faults, kinds, message):
    rl_steps = 6 if message.startswith("no 6") else 30
    with self.assertRaisesRegex(ValueError, message):
      chaos_soak.schedule(0, faults, rl_steps, kinds)


class JudgeTest(absltest.TestCase):

  def test_verdict_is_the_apps_and_takes_both_values(self):
    def ask(app):
      return json.loads(chaos_soak.verdict({"messages": [{}, {"content": app}]}))
    verdicts = [ask(f"<h1>{i}</h1>") for i in range(40)]
    self.assertEqual(verdicts, [ask(f"<h1>{i}</h1>") for i in range(40)])
    self.assertEqual({v["passed"] for v in verdicts}, {True, False})
    self.assertTrue(all(v["severity"] == (None if v["passed"] else "major") for v in verdicts))

  def test_judged_tasks_add_one_rubric_without_a_check(self):
    source = _BENCH.parent / "data" / "tasks" / "train.jsonl"
    target = pathlib.Path(self.create_tempdir().full_path) / "judged.jsonl"
    chaos_soak.write_judged_tasks(source, target)
    before = target.stat().st_mtime_ns
    time.sleep(0.01)
    chaos_soak.write_judged_tasks(source, target)
    self.assertEqual(target.stat().st_mtime_ns, before)  # unchanged: not rewritten
    plain = [tasks_lib.parse_task(json.loads(l)) for l in source.read_text().splitlines()]
    judged = [tasks_lib.parse_task(json.loads(l)) for l in target.read_text().splitlines()]
    self.assertEqual([t.id for t in judged], [t.id for t in plain])
    for p, j in zip(plain, judged):
      self.assertEqual(j.request, p.request)
      self.assertEqual(j.rubrics[:-1], p.rubrics)
      self.assertEqual((j.rubrics[-1].id, j.rubrics[-1].steps), ("judged", None))

  def test_judge_args_name_the_url_and_a_config_the_check_accepts(self):
    from rcca_jax.train import config_check  # pylint: disable=import-outside-toplevel
    root = pathlib.Path(self.create_tempdir().full_path)
    args = chaos_soak.judge_args(root, 30, "http://127.0.0.1:9")
    self.assertEqual(args[0], f"--config={root / 'judge_job.py'}")
    self.assertIn("--config.eval.evaluator.judge_url=http://127.0.0.1:9", args)
    self.assertIn("--config.rl.num_steps=30", args)
    spec = importlib.util.spec_from_file_location("judge_job", root / "judge_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    self.assertEqual(config.data.train_tasks, str(root / "judged_train.jsonl"))
    self.assertEqual(config.rl.max_unscorable, 0.0)
    config.eval.evaluator.judge_url = "http://127.0.0.1:9"
    self.assertEqual(config_check.problems(config, num_devices=1), [])

  def test_a_burst_gives_each_fault_in_turn_then_verdicts(self):
    server = chaos_soak.BurstJudge()
    try:
      self.assertEqual(_post(server.base)[0], 200)  # not armed yet
      self.assertEqual(server.arm(10.0), 0)
      self.assertEqual(_post(server.base)[:2], (503, "1"))
      self.assertEqual(_post(server.base, timeout=1.0)[2], "TimeoutError")
      self.assertEqual(_post(server.base)[:2], (503, None))
      start = time.monotonic()
      status, _, text = _post(server.base)
      self.assertGreaterEqual(time.monotonic() - start, 1.5)
      self.assertEqual((status, json.loads(text)["choices"][0]["message"]["content"]),
                       (200, chaos_soak.verdict({"messages": [{}, {"content": "app"}]})))
      self.assertEqual(dict(server.bursts[0]), {"503_retry_after_1s": 1, "timeout": 1,
                                                "503": 1, "slow_1.5s": 1})
    finally:
      server.close()

  def test_the_judge_rides_out_a_burst_with_the_verdict_it_would_give(self):
    app = "<h1>dark</h1>"
    server = chaos_soak.BurstJudge()
    judge = judge_lib.Judge(server.base, "m", timeout=3.0, retries=40, budget=20.0)
    try:
      calm = judge.grade("A page", "Tidy", app)
      server.arm(2.5)
      start = time.monotonic()
      stormy = judge.grade("A page", "Tidy", app)
      seconds = time.monotonic() - start
    finally:
      server.close()
    self.assertIsNotNone(calm.passed)
    self.assertEqual((stormy.passed, stormy.severity), (calm.passed, calm.severity))
    self.assertGreaterEqual(sum(server.bursts[0].values()), 2)
    self.assertLess(seconds, 20.0)


class ProcessesTest(absltest.TestCase):

  def test_cpu_ticks_grow_while_busy_and_end_with_the_process(self):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen(["sleep", "30"])
    try:
      first = chaos_soak.cpu_ticks(busy.pid), chaos_soak.cpu_ticks(idle.pid)
      time.sleep(0.5)
      self.assertGreater(chaos_soak.cpu_ticks(busy.pid), first[0])
      self.assertEqual(chaos_soak.cpu_ticks(idle.pid), first[1])
    finally:
      busy.kill()
      idle.kill()
      busy.wait()
      idle.wait()
    self.assertIsNone(chaos_soak.cpu_ticks(busy.pid))

  def test_gone_after_waits_for_exits_within_the_limit(self):
    quick, slow = subprocess.Popen(["sleep", "1"]), subprocess.Popen(["sleep", "30"])
    try:
      gone = chaos_soak._gone_after([quick.pid], 10.0)  # a zombie counts as gone
      self.assertIsNone(chaos_soak._gone_after([slow.pid], 0.5))
    finally:
      slow.kill()
      for proc in (quick, slow):
        proc.wait()
    self.assertBetween(gone, 0.3, 5.0)

  def test_await_tells_ready_missed_and_ended_apart(self):
    proc = subprocess.Popen(["sleep", "30"])
    try:
      self.assertEqual(chaos_soak._await(proc, lambda: True, lambda: False), "ready")
      self.assertEqual(chaos_soak._await(proc, lambda: False, lambda: True), "missed")
    finally:
      proc.kill()
    self.assertEqual(chaos_soak._await(proc, lambda: False, lambda: False), "ended")


class GradingWatchTest(absltest.TestCase):
  """A spawned child of this process stands for the job's grading worker."""

  def setUp(self):
    super().setUp()
    self.workdir = pathlib.Path(self.create_tempdir().full_path)
    ctx = multiprocessing.get_context("spawn")
    self.conn, child = ctx.Pipe()
    self.worker = ctx.Process(target=_busy_or_idle, args=(child,), daemon=True)
    self.worker.start()
    child.close()
    self.assertEqual(self.conn.recv(), "ready")

  def tearDown(self):
    self.conn.send(None)
    self.worker.join(10)
    super().tearDown()

  def _rows(self, *rows):
    with open(self.workdir / "metrics.jsonl", "w", encoding="utf-8") as f:
      for stage, step, after in rows:
        f.write(json.dumps({"stage": stage, "step": step, "after": after}) + "\n")

  def _watch_for(self, watch, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
      if watch():
        return True
      time.sleep(0.02)
    return False

  def test_window_open(self):
    self._rows(("rl", 1, None), ("rl", 2, None))
    self.assertFalse(chaos_soak.window_open(self.workdir, 2))  # done
    self.assertFalse(chaos_soak.window_open(self.workdir, 3))  # step 2's evaluation due
    self.assertFalse(chaos_soak.window_open(self.workdir, 5))  # step 4 not done
    self._rows(("rl", 1, None), ("rl", 2, None), ("eval", 2, "rl"))
    self.assertTrue(chaos_soak.window_open(self.workdir, 3))
    self._rows(("rl", 1, None), ("rl", 2, None), ("eval", 2, "rl"), ("rl", 3, None))
    self.assertTrue(chaos_soak.window_open(self.workdir, 4))  # step 3: no evaluation
    self._rows()
    self.assertTrue(chaos_soak.window_open(self.workdir, 1))

  def test_fires_on_a_busy_worker_in_the_window_only(self):
    self.assertIn(self.worker.pid, chaos_soak.grading_workers(os.getpid()))
    watch = chaos_soak.GradingWatch(self.workdir, os.getpid(), 2)
    self._rows(("rl", 1, None))
    self.assertFalse(self._watch_for(watch, 1.0))  # idle on its pipe
    self._rows(("rl", 1, None), ("rl", 2, None))
    self.conn.send(1.5)
    self.assertFalse(self._watch_for(watch, 1.0))  # busy, but step 2 is done
    self.conn.recv()
    self._rows(("rl", 1, None))
    self.conn.send(1.5)
    self.assertTrue(self._watch_for(watch, 1.5))
    self.assertEqual(watch.busy, self.worker.pid)
    self.conn.recv()


class FaultProblemsTest(absltest.TestCase):

  def test_traces_are_added_and_vacuous_or_leaky_faults_are_problems(self):
    judge = chaos_soak.BurstJudge()
    judge.close()
    job = chaos_soak.Job([], pathlib.Path("ref"), judge=judge)
    judge.arm(1.0)
    judge.arm(1.0)
    judge.bursts[1]["timeout"] = 2
    rows = [{"stage": "rl", "step": s, "worker_deaths": float(s == 3), "regraded": 0,
             "unscorable": 0.0, "cache_write_errors": float(s == 6)} for s in range(1, 8)]
    events = [{"step": 2, "kind": "judge_burst", "burst": 0},
              {"step": 3, "kind": "worker_killed"},
              {"step": 4, "kind": "judge_burst", "burst": 1},
              {"step": 5, "kind": "disk_full"},
              {"step": 6, "kind": "disk_full"},
              {"step": 7, "kind": "disk_full", "not_reached": "the job ended (exit 0)"},
              {"step": 7, "kind": "sigkill_grading", "exit": -9, "workers_gone_s": None}]
    problems = chaos_soak._fault_problems(events, rows, job)
    self.assertEqual(problems, [
        "judge burst at step 2 met no judge request",
        "disk_full at step 6: no cache write failed after it",
        "a grading worker outlived the job SIGKILLed at step 7 by 60 s"])
    self.assertEqual(events[1]["row"], {"worker_deaths": 1.0, "regraded": 0,
                                        "unscorable": 0.0})
    self.assertEqual(events[2]["burst_requests"], {"timeout": 2})
    self.assertEqual(events[3]["cache_write_errors"], 1.0)
    self.assertNotIn("cache_write_errors", events[5])


class DiskFullTest(absltest.TestCase):

  def test_fill_disk_leaves_no_room_for_a_cache_record(self):
    if os.geteuid() != 0:
      self.skipTest("mounting a tmpfs needs root")
    directory = pathlib.Path(self.create_tempdir().full_path) / "cache"
    fault_matrix.mount_tmpfs(directory, "256k")
    try:
      written = chaos_soak.fill_disk(directory)
      free = shutil.disk_usage(directory).free
      with self.assertRaises(OSError):
        with open(directory / "record.json", "wb") as f:
          f.write(b"x" * 8192)
    finally:
      fault_matrix.umount(directory)
    self.assertGreater(written, 200 * 1024)
    self.assertLess(free, 4096)
    self.assertFalse(os.path.ismount(directory))


if __name__ == "__main__":
  absltest.main()
