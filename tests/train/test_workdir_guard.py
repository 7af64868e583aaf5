"""One job per work directory (a real second process, a SIGKILLed holder) and the saved
job config that a resume must match."""

import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys

from absl.testing import absltest, parameterized

from rcca_jax.train import workdir_guard as guard

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from rcca_jax.train.workdir_guard import WorkdirLock, WorkdirLocked
try:
  with WorkdirLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
except WorkdirLocked as e:
  print(e, flush=True)
  sys.exit(3)
"""


def _holder(workdir: str) -> subprocess.Popen:
  proc = subprocess.Popen([sys.executable, "-c", HOLD, workdir], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True)
  assert proc.stdout.readline().strip() == "locked"
  return proc


class WorkdirLockTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = os.path.join(self.create_tempdir().full_path, "run")

  def stamp(self) -> dict:
    with open(os.path.join(self.workdir, guard.LOCK_FILE)) as f:
      return json.load(f)

  def test_second_holder_in_this_process_is_refused_until_release(self):
    with guard.WorkdirLock(self.workdir):
      self.assertEqual(self.stamp()["pid"], os.getpid())
      with self.assertRaisesRegex(guard.WorkdirLocked, f"in use by pid {os.getpid()} on "):
        guard.WorkdirLock(self.workdir).acquire()
    with guard.WorkdirLock(self.workdir):
      pass

  def test_live_holder_in_another_process_is_refused_both_ways(self):
    child = _holder(self.workdir)
    try:
      with self.assertRaisesRegex(guard.WorkdirLocked, f"pid {child.pid} on .*\\.lock"):
        guard.WorkdirLock(self.workdir).acquire()
    finally:
      child.kill()
      child.wait()
    with guard.WorkdirLock(self.workdir):
      refused = subprocess.run([sys.executable, "-c", HOLD, self.workdir], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, check=False)
    self.assertEqual(refused.returncode, 3, refused.stderr)
    self.assertIn(f"in use by pid {os.getpid()}", refused.stdout)

  def test_lock_of_a_killed_holder_is_taken_over(self):
    child = _holder(self.workdir)
    self.assertEqual(self.stamp()["pid"], child.pid)
    os.kill(child.pid, signal.SIGKILL)
    self.assertEqual(child.wait(), -signal.SIGKILL)
    self.assertTrue(os.path.exists(os.path.join(self.workdir, guard.LOCK_FILE)))
    with guard.WorkdirLock(self.workdir):
      stamp = self.stamp()
    self.assertEqual(stamp["pid"], os.getpid())
    self.assertEqual(set(stamp), {"pid", "host", "time"})


def _tiny_cpu() -> dict:
  spec = importlib.util.spec_from_file_location("tiny_cpu", ROOT / "experiments" / "tiny_cpu.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config().to_dict()


class SavedConfigTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = self.create_tempdir().full_path
    self.path = os.path.join(self.workdir, guard.CONFIG_FILE)
    self.config = _tiny_cpu()
    self.config["rl"]["optimizer"]["learning_rate"] = 1e-05
    self.assertEqual(guard.check_saved_config(self.workdir, self.config), [])

  def saved(self) -> dict:
    with open(self.path) as f:
      return json.load(f)

  def test_first_run_saves_and_same_config_resumes(self):
    self.assertEqual(self.saved()["rl"]["optimizer"]["learning_rate"], 1e-05)
    self.assertEqual(self.saved()["data"]["families"],
                     ["star_rating", "char_counter", "guess_number"])
    self.config["data"]["families"] = tuple(self.config["data"]["families"])
    self.assertEqual(guard.check_saved_config(self.workdir, self.config), [])

  def test_changed_fields_are_all_named(self):
    self.config["rl"]["optimizer"]["learning_rate"] = 0.0001
    self.config["seed"] = 3
    del self.config["sft"]["log_every"]  # ignored
    self.config["eval"]["evaluator"]["new_knob"] = "x"
    before = self.saved()
    with self.assertRaises(guard.ConfigChanged) as cm:
      guard.check_saved_config(self.workdir, self.config)
    self.assertEqual(cm.exception.changes, [
        'eval.evaluator.new_knob: <absent> -> "x"',
        "rl.optimizer.learning_rate: 1e-05 -> 0.0001",
        "seed: 0 -> 3"])
    self.assertIn(self.path, str(cm.exception))
    self.assertIn("rl.optimizer.learning_rate: 1e-05 -> 0.0001", str(cm.exception))
    self.assertEqual(self.saved(), before)

  @parameterized.named_parameters(
      ("exact", ("rl.optimizer.learning_rate", "seed")),
      ("wildcards", ("rl.optimizer.*", "se?d")),
  )
  def test_allowed_changes_update_the_saved_config(self, allow):
    self.config["rl"]["optimizer"]["learning_rate"] = 0.0001
    self.config["seed"] = 3
    self.assertEqual(guard.check_saved_config(self.workdir, self.config, allow=allow),
                     ["rl.optimizer.learning_rate: 1e-05 -> 0.0001", "seed: 0 -> 3"])
    self.assertEqual((self.saved()["rl"]["optimizer"]["learning_rate"],
                      self.saved()["seed"]), (0.0001, 3))

  def test_some_allowed_some_not(self):
    self.config["rl"]["optimizer"]["learning_rate"] = 0.0001
    self.config["seed"] = 3
    with self.assertRaises(guard.ConfigChanged) as cm:
      guard.check_saved_config(self.workdir, self.config, allow=("seed",))
    self.assertEqual(cm.exception.changes, ["rl.optimizer.learning_rate: 1e-05 -> 0.0001",
                                            "seed: 0 -> 3 (allowed)"])

  def test_longer_runs_are_always_allowed_shorter_are_not(self):
    self.config["rl"]["num_steps"] = 32
    self.config["sft"]["num_steps"] = 400
    self.assertEqual(guard.check_saved_config(self.workdir, self.config),
                     ["rl.num_steps: 16 -> 32", "sft.num_steps: 300 -> 400"])
    self.assertEqual(self.saved()["rl"]["num_steps"], 32)
    self.config["rl"]["num_steps"] = 20
    with self.assertRaisesRegex(guard.ConfigChanged, "rl.num_steps: 32 -> 20"):
      guard.check_saved_config(self.workdir, self.config)

  def test_runtime_fields_are_ignored(self):
    self.config["eval"].update(workers=8, grading_cache="/tmp/cache", backend="ray")
    self.config["mesh"]["data"] = 4
    self.config["checkpoint"]["async_save"] = True
    self.assertEqual(guard.check_saved_config(self.workdir, self.config), [])
    for name in ("eval.workers", "eval.grading_cache", "mesh.*"):
      self.assertIn(name, guard.IGNORED_FIELDS)

  def test_runner_sections_are_ignored(self):
    """An ablation or sweep that gains an arm or a setting resumes its finished runs."""
    self.config["arms"] = dict(grpo="rl.policy_loss=grpo", new_arm="seed=1")
    self.config["ablation"] = dict(arms="grpo,new_arm")
    self.config["settings"] = dict(s1_0="data.controlled.bug_sites=1")
    self.config["sweep"] = dict(settings="s1_0")
    self.assertEqual(guard.check_saved_config(self.workdir, self.config), [])


if __name__ == "__main__":
  absltest.main()
