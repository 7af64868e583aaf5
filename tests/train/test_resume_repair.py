"""What a crash leaves, repaired on resume: a torn last metrics row, a checkpoint that
does not restore, orbax's temporary directories, half-written evaluation outputs."""

import contextlib
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import types

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from rcca_jax.rl import checkpoint
from rcca_jax.rl.train_step import TrainState
from rcca_jax.train import eval_loop
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import run_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROWS = [{"step": 1, "stage": "sft", "loss": 2.5}, {"step": 2, "stage": "sft", "loss": float("nan")}]


def _child(code: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=120, check=False)


class TornMetricsTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = self.create_tempdir().full_path
    self.path = os.path.join(self.workdir, run_log.METRICS_FILE)

  def write(self, tail: bytes) -> None:
    with open(self.path, "wb") as f:
      f.write("".join(json.dumps(r) + "\n" for r in ROWS).encode() + tail)

  def read(self) -> tuple[list, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      rows = run_log.read_rows(self.workdir)
    return rows, err.getvalue()

  def assert_rows(self, rows, expected):
    self.assertEqual(json.dumps(rows), json.dumps(expected))  # NaN compares equal

  @parameterized.named_parameters(
      ("half_row", b'{"step": 3, "stage": "sft", "lo'),
      ("half_row_with_newline", b'{"step": 3, "sta\n'),
      ("nul_bytes", b"\0\0\0\0"),
      ("cut_utf8", '{"step": 3, "stage": "sft", "note": "é'.encode()[:-1]),
  )
  def test_torn_last_line_dropped_and_repaired(self, tail):
    self.write(tail)
    rows, note = self.read()
    self.assert_rows(rows, ROWS)
    self.assertIn(f"{self.path}:3:", note)
    self.assertIn("torn last line", note)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      logger = run_log.MetricsLogger(self.workdir, tensorboard=False)
    self.assertIn("repaired", err.getvalue())
    logger.write("sft", 3, {"loss": 1.0})
    logger.close()
    with open(self.path, encoding="utf-8") as f:
      lines = f.read().split("\n")
    self.assertEqual(lines[-1], "")  # Ends with a newline; every line parses.
    self.assertEqual([json.loads(l)["step"] for l in lines[:-1]], [1, 2, 3])
    rows, note = self.read()
    self.assertEqual(note, "")
    self.assertLen(rows, 3)

  def test_bad_line_before_the_last_is_an_error(self):
    with open(self.path, "w", encoding="utf-8") as f:
      f.write(json.dumps(ROWS[0]) + "\n{oops\n" + json.dumps(ROWS[1]) + "\n")
    before = pathlib.Path(self.path).read_bytes()
    with self.assertRaisesRegex(run_log.MetricsFileError, f"^{self.path}:2: invalid JSON"):
      run_log.read_rows(self.workdir)
    with self.assertRaisesRegex(run_log.MetricsFileError, f"{self.path}:2:"):
      run_log.MetricsLogger(self.workdir, tensorboard=False)
    self.assertEqual(pathlib.Path(self.path).read_bytes(), before)

  def test_complete_last_row_without_newline_is_kept(self):
    self.write(json.dumps({"step": 3, "stage": "sft"}).encode())
    rows, note = self.read()
    self.assertLen(rows, 3)
    self.assertEqual(note, "")
    run_log.MetricsLogger(self.workdir, tensorboard=False).close()
    self.assertTrue(pathlib.Path(self.path).read_bytes().endswith(b'"sft"}\n'))

  @parameterized.named_parameters(
      ("torn", b'{"step": 9, "sta', 3),
      ("whole_row", b'{"step": 9, "stage": "sft"}', 4),
  )
  def test_write_never_appends_after_a_line_without_newline(self, tail, count):
    self.write(b"")
    logger = run_log.MetricsLogger(self.workdir, tensorboard=False)
    with open(self.path, "ab") as f:  # An interrupted append after the logger opened.
      f.write(tail)
    with contextlib.redirect_stderr(io.StringIO()):
      logger.write("sft", 10, {"loss": 0.5})
    logger.close()
    rows, note = self.read()
    self.assertEqual(note, "")
    self.assertLen(rows, count)
    self.assertEqual(rows[-1]["step"], 10)

  def test_truncate_rewrites_rows(self):
    self.write(b"")
    logger = run_log.MetricsLogger(self.workdir, tensorboard=False)
    logger.truncate("sft", 1)
    self.assert_rows(logger.rows(), ROWS[:1])
    self.assertEqual(os.listdir(self.workdir), [run_log.METRICS_FILE])  # no temp file


def _state(step: int) -> TrainState:
  return TrainState(step=jnp.int32(step), params={"w": jnp.full((3, 4), float(step))},
                    model_state={}, opt_state={"m": jnp.arange(2.0) * step},
                    rng=jax.random.PRNGKey(step))


TARGET = checkpoint.abstract_like(_state(0))


def _save(directory: str, steps) -> None:
  with checkpoint.Checkpointer(directory, async_save=False) as ckpt:
    for step in steps:
      ckpt.save(_state(step), {"position": step})


def _truncate(path: str) -> None:
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def _data_file(step_dir: str) -> str:
  """The largest file of the state's array data."""
  data = os.path.join(step_dir, "state", "d")
  return max((os.path.join(data, n) for n in os.listdir(data)), key=os.path.getsize)


CORRUPTIONS = {
    "truncated_array_data": lambda d: _truncate(_data_file(d)),
    "deleted_array_data": lambda d: os.remove(_data_file(d)),
    "truncated_manifest": lambda d: _truncate(os.path.join(d, "state", "manifest.ocdbt")),
    "deleted_tree_metadata": lambda d: os.remove(os.path.join(d, "state", "_METADATA")),
    "truncated_position": lambda d: _truncate(os.path.join(d, "meta", "metadata")),
}


class CheckpointFallbackTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.saved = os.path.join(absltest.get_default_test_tmpdir(), "three_steps")
    shutil.rmtree(cls.saved, ignore_errors=True)
    _save(cls.saved, (1, 2, 3))

  def setUp(self):
    super().setUp()
    self.directory = os.path.join(self.create_tempdir().full_path, "ckpt")
    shutil.copytree(self.saved, self.directory)

  def assert_state(self, state, step: int):
    np.testing.assert_array_equal(jax.device_get(state.params["w"]),
                                  np.full((3, 4), float(step)))
    self.assertEqual(int(state.step), step)

  @parameterized.named_parameters(*CORRUPTIONS.items())
  def test_falls_back_and_moves_the_broken_step_aside(self, corrupt):
    corrupt(os.path.join(self.directory, "3"))
    with checkpoint.Checkpointer(self.directory, async_save=False) as ckpt:
      self.assertEqual(ckpt.latest_step(), 3)  # Finalized, but damaged.
      with self.assertLogs("absl", "WARNING") as logs:
        state, position, step = ckpt.restore_latest_good(TARGET)
      self.assertEqual((step, position), (2, {"position": 2}))
      self.assert_state(state, 2)
      moved = [l for l in logs.output if "does not restore" in l]
      self.assertLen(moved, 1)
      self.assertIn("step 3 does not restore", moved[0])
      self.assertIn("resuming from step 2", moved[0])
      broken = [n for n in os.listdir(self.directory) if n.startswith("3.broken-")]
      self.assertLen(broken, 1)
      self.assertIn(broken[0], moved[0])
      self.assertEqual((ckpt.all_steps(), ckpt.latest_step()), ([1, 2], 2))
      self.assertTrue(ckpt.save(_state(3), {"position": 3}, force=True))
    with checkpoint.Checkpointer(self.directory, async_save=False) as ckpt:
      self.assertEqual(ckpt.all_steps(), [1, 2, 3])  # The broken copy is no step.
      state, position = ckpt.restore(TARGET)
    self.assertEqual(position, {"position": 3})
    self.assert_state(state, 3)

  def test_restore_without_step_falls_back(self):
    os.remove(_data_file(os.path.join(self.directory, "3")))
    with checkpoint.Checkpointer(self.directory) as ckpt:
      with self.assertLogs("absl", "WARNING"):
        state, position = ckpt.restore(TARGET)
    self.assertEqual(position, {"position": 2})
    self.assert_state(state, 2)

  def test_no_step_restores_is_an_error_and_moves_nothing(self):
    for step in (1, 2, 3):
      os.remove(os.path.join(self.directory, str(step), "state", "manifest.ocdbt"))
    before = sorted(os.listdir(self.directory))
    with checkpoint.Checkpointer(self.directory) as ckpt:
      with self.assertRaisesRegex(checkpoint.CheckpointError,
                                  f"no checkpoint in {self.directory} restores: "
                                  "step 3: .*; step 2: .*; step 1: "):
        ckpt.restore_latest_good(TARGET)
    self.assertEqual(sorted(os.listdir(self.directory)), before)

  def test_set_aside_all_leaves_no_step(self):
    with checkpoint.Checkpointer(self.directory) as ckpt:
      moved = ckpt.set_aside_all()
      self.assertEqual(ckpt.all_steps(), [])
      self.assertIsNone(ckpt.latest_step())
    self.assertEqual([os.path.basename(m).split(".broken-")[0] for m in moved],
                     ["1", "2", "3"])
    self.assertTrue(all(os.path.isdir(m) for m in moved))

  def test_data_position_skips_a_corrupt_latest_step(self):
    _truncate(os.path.join(self.directory, "3", "meta", "metadata"))
    with checkpoint.Checkpointer(self.directory) as ckpt:
      with self.assertLogs("absl", "WARNING") as logs:
        self.assertEqual(ckpt.data_position(), {"position": 2})
      self.assertIn("step 3's data position does not read", logs.output[0])
      self.assertEqual(ckpt.data_position(1), {"position": 1})
      with self.assertRaises(Exception):
        ckpt.data_position(3)


KILLED_MID_SAVE = """
import os, signal, sys
import jax.numpy as jnp
from orbax.checkpoint._src.path import atomicity
from rcca_jax.rl.train_step import TrainState
from rcca_jax.rl import checkpoint

async def killed(*args, **kwargs):  # the process dies before the save is renamed
  os.kill(os.getpid(), signal.SIGKILL)

with checkpoint.Checkpointer(sys.argv[1], async_save=True) as ckpt:
  state = TrainState(step=jnp.int32(1), params={"w": jnp.ones(3)}, model_state={},
                     opt_state={}, rng=jnp.zeros(2, jnp.uint32))
  ckpt.save(state, {"position": 1})
  ckpt.wait()
  atomicity.AtomicRenameTemporaryPath.finalize = killed
  ckpt.save(state.replace(step=jnp.int32(2)), {"position": 2})
  ckpt.wait()
"""


class OrbaxTmpTest(absltest.TestCase):

  def test_leftovers_of_a_killed_save_are_removed_on_open(self):
    directory = self.create_tempdir().full_path
    proc = _child(KILLED_MID_SAVE, directory)
    self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr[-2000:])
    leftovers = [n for n in os.listdir(directory) if checkpoint.ORBAX_TMP_MARK in n]
    self.assertNotEmpty(leftovers)
    older_style = f"3{checkpoint.ORBAX_TMP_MARK}-1700000000"  # orbax < 0.12 names
    os.makedirs(os.path.join(directory, older_style, "state"))
    with self.assertLogs("absl", "WARNING") as logs:
      ckpt = checkpoint.Checkpointer(directory, async_save=False)
    with ckpt:
      self.assertEqual(sorted(os.listdir(directory)), ["1"])
      for name in leftovers + [older_style]:
        self.assertTrue(any(name in line for line in logs.output), name)
      self.assertEqual((ckpt.latest_step(), ckpt.all_steps()), (1, [1]))
      self.assertEqual(ckpt.data_position(), {"position": 1})
      ckpt.save(TrainState(step=jnp.int32(2), params={"w": jnp.full(3, 2.0)},
                           model_state={}, opt_state={}, rng=jnp.zeros(2, jnp.uint32)),
                {"position": 2})
    with checkpoint.Checkpointer(directory) as ckpt:
      self.assertEqual(ckpt.latest_step(), 2)
      self.assertEqual(ckpt.data_position(), {"position": 2})


def _rollouts(version: str) -> list:
  task = types.SimpleNamespace(id="counter-0001", extra={}, category=None,
                               difficulty=None)
  record = {"task_id": task.id, "sample_id": 0, "reward": 1.0, "issues": [],
            "gates": {"format": True, "source": True, "runtime": True},
            "rubrics": [{"id": "r1", "passed": True}]}
  return [rollouts_lib.Rollout(task=task, sample_id=i, prompt=[1], tokens=[5],
                               logprobs=np.zeros(1), text=f"{version} {i}",
                               offsets=np.array([[0, 1]]), record=record,
                               wbar=np.ones(1))
          for i in range(3)]


KILLED_MID_REPORT = """
import os, signal, sys
sys.path.insert(0, "tests/train")
from rcca_jax.credit import report
from rcca_jax.train import eval_loop
import test_resume_repair as t

report.render_report = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
rollouts = t._rollouts("second")
eval_loop.write_outputs(sys.argv[1], rollouts, {"version": "second"}, num_reports=1,
                        title="t", sampled=rollouts)
"""


class AtomicEvalOutputsTest(absltest.TestCase):

  def test_a_kill_mid_write_leaves_whole_files(self):
    out = self.create_tempdir().full_path
    first = _rollouts("first")
    eval_loop.write_outputs(out, first, {"version": "first"}, num_reports=1, title="t",
                            sampled=first)
    self.assertEqual(sorted(os.listdir(out)), ["evaluations.jsonl", "report.html",
                                               "responses.jsonl", "sampled.jsonl",
                                               "summary.json"])
    report_before = pathlib.Path(out, "report.html").read_text()
    proc = _child(KILLED_MID_REPORT, out)
    self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr[-2000:])
    responses = [json.loads(l) for l in open(os.path.join(out, "responses.jsonl"))]
    self.assertEqual([r["response"] for r in responses], ["second 0", "second 1", "second 2"])
    self.assertEqual(pathlib.Path(out, "report.html").read_text(), report_before)
    with open(os.path.join(out, "summary.json")) as f:
      self.assertEqual(json.load(f), {"version": "first"})  # Not yet replaced.
    self.assertTrue([n for n in os.listdir(out) if n.startswith(".tmp-")])
    third = _rollouts("third")
    eval_loop.write_outputs(out, third, {"version": "third"}, num_reports=1, title="t",
                            sampled=third)
    self.assertFalse([n for n in os.listdir(out) if n.startswith(".tmp-")])
    with open(os.path.join(out, "summary.json")) as f:
      self.assertEqual(json.load(f), {"version": "third"})
    sampled = [json.loads(l) for l in open(os.path.join(out, "sampled.jsonl"))]
    self.assertEqual(sampled[0]["response"], "third 0")
    self.assertIn("hird 0</pre>", pathlib.Path(out, "report.html").read_text())



class TornOnlyRlCheckpointTest(absltest.TestCase):
  """A run whose only RL checkpoint is torn (every file of its state cut in half)
  restarts RL from the SFT result and ends bitwise equal to an uninterrupted run, each
  RL row written once (issue 53)."""

  def _train(self, workdir, rl_steps):
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    from tests.fixtures.trainer_fixtures import FakeGrader, trainer_config  # pylint: disable=import-outside-toplevel
    config = trainer_config()
    config.rl.update(num_steps=rl_steps, checkpoint_every=100)  # saved at the end only
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader()) as trainer:
      trainer.train()
      trainer.open()
      state = trainer.checkpoints.restore(trainer.checkpoints.rl)[0]
      rows = [r for r in trainer.metrics.rows() if r["stage"] == "rl"]
    return state, rows

  def test_resumes_from_the_sft_result_bitwise(self):
    torn = self.create_tempdir().full_path
    self._train(torn, 2)
    rl_dir = os.path.join(torn, "checkpoints", "rl")
    (only,) = os.listdir(rl_dir)
    for folder, _, files in os.walk(os.path.join(rl_dir, only, "state")):
      for name in files:
        _truncate(os.path.join(folder, name))
    from rcca_jax.train import faults  # pylint: disable=import-outside-toplevel
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    from tests.fixtures.trainer_fixtures import trainer_config  # pylint: disable=import-outside-toplevel
    with trainer_lib.Trainer(trainer_config(), torn, mode="eval") as trainer:
      # A stage that cannot start over stops safely (exit 3), one line, nothing moved.
      with self.assertRaisesRegex(faults.RunStopped, "nothing to resume from") as caught:
        trainer.checkpoints.restore_latest(trainer.checkpoints.rl)
      self.assertEqual(caught.exception.exit_code, 3)
      self.assertNotIn("\n", str(caught.exception))
    self.assertEqual(os.listdir(rl_dir), [only])
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
      state, rows = self._train(torn, 3)
    (warning,) = [l for l in out.getvalue().splitlines() if "no rl checkpoint restores" in l]
    self.assertIn(f"{only}.broken-", warning)
    self.assertIn("rl starts over from the SFT result, redoing 2 steps", warning)
    want_state, want_rows = self._train(self.create_tempdir().full_path, 3)
    self.assertEqual([r["step"] for r in rows], [1, 2, 3])
    for got, want in zip(rows, want_rows):
      self.assertEqual((got["loss"], got["reward_mean"]), (want["loss"], want["reward_mean"]))
    self.assertEqual(int(state.step), int(want_state.step))
    for a, b in zip(jax.tree.leaves((state.params, state.opt_state)),
                    jax.tree.leaves((want_state.params, want_state.opt_state))):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


if __name__ == "__main__":
  absltest.main()
