"""End to end: `python -m rcca_jax.main` on a shrunk tiny_natural config (SFT, eval, RL).

Runs the real job in subprocesses (real tokenizer, model, orbax, Chromium pool),
then checks metrics.jsonl, checkpoints and resume: a re-run with more RL steps
continues without repeating SFT or any step, and a run killed with SIGKILL in the
middle of RL resumes at the next step. The tests' persistent JAX compilation cache
(conftest.py) keeps the re-runs from compiling again. Those are slow tests; the fast
one runs the trainer in this process on the controlled setting (site metrics, pass@1).
"""

import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.data import batching
from rcca_jax.data import chat
from rcca_jax.data import selection
from rcca_jax.data.tasks import family_of
from rcca_jax.train import rollouts
from rcca_jax.train import run_log
from rcca_jax.train import sections
from rcca_jax.train import site_metrics
from rcca_jax.train import trainer
from tests.fixtures import controlled_fixtures

REPO = pathlib.Path(__file__).resolve().parents[2]

SHRINK = [
    "--config.model.hidden_size=32", "--config.model.intermediate_size=64",
    "--config.data.families=('dark_mode',)",
    "--config.sft.num_steps=3", "--config.sft.batch_size=2", "--config.sft.log_every=1",
    "--config.sft.checkpoint_every=2",
    "--config.rl.group_size=2", "--config.rl.prompts_per_step=1",
    "--config.rl.max_new_tokens=24",
    "--config.eval.per_family=2", "--config.eval.max_new_tokens=24",
    "--config.eval.workers=1", "--config.eval.num_reports=1",
]


def _run(workdir, *extra, wait=True):
  # The environment carries the tests' persistent compilation cache (conftest.py).
  env = dict(os.environ, JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false")
  cmd = [sys.executable, "-m", "rcca_jax.main", "--config=experiments/tiny_natural.py",
         f"--workdir={workdir}", *SHRINK, *extra]
  if not wait:
    # stderr goes to a file: an unread pipe would fill up and stall the job.
    log = open(os.path.join(os.path.dirname(workdir), "job.log"), "w")  # pylint: disable=consider-using-with
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=log, text=True)
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=1200)
  if proc.returncode:
    raise AssertionError(f"main failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
  return proc


def _rows(workdir):
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def _steps(rows, stage):
  return [r["step"] for r in rows if r["stage"] == stage]


class TrainerPartsTest(parameterized.TestCase):
  """The host-side pieces the job is made of (fast, no browser)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tok = sections.load_tokenizer("data/tokenizer")

  def test_offsets_cover_the_decoded_text(self):
    text = chat.format_response("<p id=\"x\">héllo &amp; 😀</p>")
    ids = self.tok.encode(text, add_special_tokens=False) + [chat.eos_ids(self.tok)[0]]
    decoded, offsets = rollouts.decode_with_offsets(self.tok, ids, chat.eos_ids(self.tok))
    self.assertEqual(decoded, text)
    self.assertEqual(offsets.shape, (len(ids), 2))
    mapping = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
    np.testing.assert_array_equal(offsets[:-1], mapping["offset_mapping"])
    self.assertEqual(tuple(offsets[-1]), (len(text), len(text)))
    covered = np.zeros(len(text), bool)
    for s, e in offsets:
      covered[s:e] = True
    self.assertTrue(covered.all())

  def test_batch_indices_walk_shuffled_epochs(self):
    n, b = 5, 3
    stream = sum((batching.batch_indices(n, b, k, seed=7) for k in range(4)), [])
    self.assertEqual(sorted(stream[:5]), list(range(5)))
    self.assertEqual(sorted(stream[5:10]), list(range(5)))
    self.assertEqual(stream[3:6], batching.batch_indices(n, b, 1, seed=7))
    self.assertNotEqual(stream, sum((batching.batch_indices(n, b, k, seed=8)
                                     for k in range(4)), []))

  def test_truncate_drops_rows_after_the_checkpoint(self):
    workdir = self.create_tempdir().full_path
    log = run_log.MetricsLogger(workdir, tensorboard=False)
    for step in (1, 2, 3):
      log.write("rl", step, {"loss": 0.5})
    log.write("eval", 3, {"after": "rl", "pass_rate": 0.0})
    log.write("sft", 9, {"loss": 1.0})
    log.truncate("rl", 1)
    self.assertEqual([(r["stage"], r["step"]) for r in log.rows()],
                     [("rl", 1), ("sft", 9)])

  def test_rl_batch_places_weights_and_advantages(self):
    task = selection.select_tasks("data/tasks/dev.jsonl", limit=1)[0]
    items = []
    for sample_id, reward in enumerate((1.0, 0.0)):
      items.append(rollouts.Rollout(
          task=task, sample_id=sample_id, prompt=[5, 6, 7], tokens=[8, 9],
          logprobs=np.array([-0.5, -0.25], np.float32), text="ab",
          offsets=np.array([[0, 1], [1, 2]]),
          record={"reward": reward, "gates": {}, "rubrics": []},
          wbar=np.array([1.0, 3.0], np.float32)))
    adv = rollouts.group_advantages(items, 2)
    batch = rollouts.rl_batch(items, adv, max_len=8, pad_id=0)
    np.testing.assert_allclose(adv, [1.0, -1.0], atol=1e-5)
    np.testing.assert_allclose(batch["advantages"], adv)
    np.testing.assert_array_equal(batch["loss_mask"][0], [0, 0, 0, 1, 1, 0, 0, 0])
    np.testing.assert_allclose(batch["wbar"][1], [1, 1, 1, 1, 3, 1, 1, 1])
    np.testing.assert_allclose(batch["old_logp"][0, 3:5], [-0.5, -0.25])

  def test_record_stats(self):
    good = {"reward": 1.0, "gates": {"format": True, "source": True, "runtime": True},
            "rubrics": [{"id": "r1", "passed": True}]}
    partial = dict(good, reward=0.5, rubrics=[{"id": "r1", "passed": False}])
    bad = {"reward": 0.0, "gates": {"format": False, "source": None, "runtime": None},
           "rubrics": [{"id": "r1", "passed": None}]}
    stats = rollouts.record_stats([good, partial, bad, bad])
    self.assertAlmostEqual(stats["reward_mean"], 0.375)
    self.assertAlmostEqual(stats["gates_pass"], 0.5)
    self.assertAlmostEqual(stats["gate_format"], 0.5)
    self.assertAlmostEqual(stats["pass_rate"], 0.25)

  def test_family_selection(self):
    tasks = selection.select_tasks("data/tasks/dev.jsonl", families=("counter", "tabs"),
                                 per_family=2)
    self.assertEqual(sorted(family_of(t) for t in tasks),
                     ["counter", "counter", "tabs", "tabs"])
    with self.assertRaisesRegex(ValueError, "no tasks left"):
      selection.select_tasks("data/tasks/dev.jsonl", families=("nope",))


@pytest.mark.browser
class TrainerInProcessTest(absltest.TestCase):
  """The fast end-to-end variant, in this process, in the controlled setting (two
  counter tasks): 1 SFT step, evaluation, 2 RL steps, each evaluated. Each evaluation's
  logged row is the summary of its records on disk and carries the site metrics and
  the sampled pass@1, with one compiled program for the site log-probs; the post-SFT
  and the last evaluation sample `eval.end_samples_per_request` per request (4: pass@4),
  the one between `eval.samples_per_request` (2)."""

  def test_sft_then_rl_writes_metrics_checkpoints_and_site_metrics(self):
    root = self.create_tempdir().full_path
    workdir = os.path.join(root, "run")
    ids = controlled_fixtures.controlled_file(os.path.join(root, "tasks.jsonl"))
    config = controlled_fixtures.controlled_config(os.path.join(root, "tasks.jsonl"))
    config.rl.num_steps = 2
    config.eval.end_samples_per_request = 4
    job = trainer.Trainer(config, workdir)
    job.train()
    self.assertEqual(job.programs.logprob_fn()._cache_size(), 1)  # pylint: disable=protected-access
    rows = _rows(workdir)
    self.assertEqual([(r["stage"], r["step"], r.get("after")) for r in rows],
                     [("sft", 1, None), ("eval", 1, "sft"), ("rl", 1, None),
                      ("eval", 1, "rl"), ("rl", 2, None), ("eval", 2, "rl")])
    for row, name, samples in ((rows[1], "sft_000001", 4), (rows[3], "rl_000001", 2),
                               (rows[5], "rl_000002", 4)):
      eval_dir = os.path.join(workdir, "eval", name)
      with open(os.path.join(eval_dir, "evaluations.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
      self.assertEqual(sorted(r["task_id"] for r in records), sorted(ids))
      passed = [all(r["gates"].get(g) is True for g in ("format", "source", "runtime"))
                and bool(r["rubrics"]) and all(x["passed"] is True for x in r["rubrics"])
                for r in records]
      self.assertEqual(row["pass_rate"], float(np.mean(passed)))
      self.assertAlmostEqual(row["reward_mean"], float(np.mean([r["reward"] for r in records])))
      self.assertEqual(row["counter/pass_rate"], row["pass_rate"])
      self.assertTrue(os.path.isfile(os.path.join(eval_dir, "report.html")))
      self._check_site_metrics(row, eval_dir, ids, samples)
    rl = rows[2]
    for key in ("loss", "reward_mean", "pass_rate", "grad_norm"):
      self.assertTrue(math.isfinite(rl[key]), (key, rl))
    self.assertEqual(rl["sequences"], 4.0)
    self.assertEqual(sorted(os.listdir(os.path.join(workdir, "checkpoints"))),
                     ["best", "rl", "sft"])
    self.assertIn("1", os.listdir(os.path.join(workdir, "checkpoints", "sft")))
    self.assertIn("2", os.listdir(os.path.join(workdir, "checkpoints", "rl")))
    # best: the post-SFT state (RL step 0) unless an RL step's dev reward is higher
    # (the first of equals).
    rewards = [rows[1]["reward_mean"], rows[3]["reward_mean"], rows[5]["reward_mean"]]
    best_step = int(np.argmax(rewards))
    self.assertEqual(os.listdir(os.path.join(workdir, "checkpoints", "best")),
                     [str(best_step)])
    self.assertTrue(os.path.isfile(os.path.join(workdir, "curves.png")))

  def _check_site_metrics(self, row, eval_dir, ids, samples):
    with open(os.path.join(eval_dir, "summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
    self.assertEqual([(r["task_id"], r["site"], r["kind"]) for r in summary["sites"]],
                     [(ids[0], "neutral0", "neutral"), (ids[0], "bug0", "bug"),
                      (ids[1], "bug0", "bug")])
    for rec in summary["sites"]:
      ref, other = rec["logp"]["reference"], rec["logp"][rec["kind"]]
      self.assertTrue(ref < 0 and other < 0, rec)
      if rec["kind"] == "bug":
        self.assertAlmostEqual(rec["p_bug"], site_metrics.p_bug(other, ref))
        self.assertTrue(0.0 < rec["p_bug"] < 1.0)
      else:
        self.assertIsNone(rec["p_bug"])
    self.assertAlmostEqual(summary["bug_prob_mean"], np.mean(
        [r["p_bug"] for r in summary["sites"] if r["kind"] == "bug"]))
    self.assertEqual(summary["sites_skipped"], 0)
    self.assertEqual(sorted(summary["pass_at_1_tasks"]), sorted(ids))
    with open(os.path.join(eval_dir, "sampled.jsonl"), encoding="utf-8") as f:
      sampled = [json.loads(line) for line in f]
    self.assertLen(sampled, samples * len(ids))
    self.assertEqual(summary["samples_per_request"], samples)
    self.assertAlmostEqual(summary["pass_at_1"], np.mean([s["passed"] for s in sampled]))
    self.assertEqual("pass_at_4" in summary, samples >= 4)
    self.assertTrue(0.0 <= summary["sampled_reward_mean"] <= 1.0)
    # The flat row: the metrics, not the tables.
    for key in ("bug_prob_mean", "pass_at_1", "sampled_reward_mean", "sites_s",
                "sampled_s"):
      self.assertEqual(row[key], summary[key], key)
    self.assertNotIn("sites", row)
    self.assertNotIn("pass_at_1_tasks", row)

  def test_rl_temperature_not_above_zero_is_refused(self):
    config = controlled_fixtures.controlled_config("unused.jsonl")
    config.rl.temperature = 0.0  # greedy RL samples: a group has nothing to compare
    with self.assertRaisesRegex(ValueError, r"rl.temperature=0.0 must be a finite number > 0"):
      trainer.Trainer(config, self.create_tempdir().full_path)


@pytest.mark.slow
@pytest.mark.browser
class MainEndToEndTest(absltest.TestCase):

  def test_train_outputs_and_resume(self):
    root = self.create_tempdir().full_path
    workdir = os.path.join(root, "run")
    _run(workdir, "--config.rl.num_steps=1")
    rows = _rows(workdir)
    self.assertEqual(_steps(rows, "sft"), [1, 2, 3])
    self.assertEqual(_steps(rows, "rl"), [1])
    for row in rows:
      if row["stage"] in ("sft", "rl"):
        self.assertTrue(math.isfinite(row["loss"]), row)
    rl = [r for r in rows if r["stage"] == "rl"][0]
    # The gates are nested: a response passes a gate only if it passed the ones before.
    self.assertLessEqual(rl["pass_rate"], rl["gates_pass"])
    self.assertLessEqual(rl["gates_pass"], rl["gate_runtime"])
    self.assertLessEqual(rl["gate_runtime"], rl["gate_source"])
    self.assertLessEqual(rl["gate_source"], rl["gate_format"])
    self.assertEqual(rl["sequences"], 2.0)
    evals = [r for r in rows if r["stage"] == "eval"]
    self.assertEqual([(r["after"], r["step"]) for r in evals], [("sft", 3), ("rl", 1)])
    self.assertIn("dark_mode/pass_rate", evals[0])
    eval_dir = pathlib.Path(workdir, "eval", "sft_000003")
    for name in ("responses.jsonl", "evaluations.jsonl", "summary.json", "report.html"):
      self.assertTrue((eval_dir / name).is_file(), name)
    self.assertEqual(len((eval_dir / "evaluations.jsonl").read_text().splitlines()), 2)
    self.assertTrue(list(pathlib.Path(workdir, "tb").iterdir()))
    ckpt = pathlib.Path(workdir, "checkpoints")
    self.assertIn("3", os.listdir(ckpt / "sft"))
    self.assertIn("1", os.listdir(ckpt / "rl"))

    # Same directory, more RL steps: SFT is not repeated, RL continues at step 2.
    _run(workdir, "--config.rl.num_steps=2")
    rows = _rows(workdir)
    self.assertEqual(_steps(rows, "sft"), [1, 2, 3])
    self.assertEqual(_steps(rows, "rl"), [1, 2])
    self.assertEqual([(r["after"], r["step"]) for r in rows if r["stage"] == "eval"],
                     [("sft", 3), ("rl", 1), ("rl", 2)])

    # A finished run re-run does nothing new.
    _run(workdir, "--config.rl.num_steps=2")
    self.assertEqual(len(_rows(workdir)), len(rows))

    # Evaluation mode on a task file.
    proc = _run(workdir, "--mode=eval", "--tasks=data/tasks/dev.jsonl",
                "--config.eval.num_tasks=1")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    self.assertEqual(summary["samples"], 1)
    self.assertTrue(pathlib.Path(workdir, "eval", "rl_000002_dev", "summary.json").is_file())

    # --checkpoint=best: the RL state of the best dev reward (saved with its step).
    best = os.listdir(ckpt / "best")
    self.assertLen(best, 1)
    proc = _run(workdir, "--mode=eval", "--checkpoint=best", "--tasks=data/tasks/dev.jsonl",
                "--config.eval.num_tasks=1")
    self.assertEqual(json.loads(proc.stdout.strip().splitlines()[-1])["samples"], 1)
    self.assertTrue(pathlib.Path(workdir, "eval", f"best_{int(best[0]):06d}_dev",
                                 "summary.json").is_file())

  def test_sigkill_mid_rl_resumes_at_next_step(self):
    root = self.create_tempdir().full_path
    workdir = os.path.join(root, "run")
    # Untrained responses fail the format gate at once, so an RL step costs mostly its
    # sampling: long responses and many steps leave time to kill it in the middle.
    args = ("--config.rl.num_steps=20", "--config.rl.max_new_tokens=256",
            "--config.eval.enabled=False")
    proc = _run(workdir, *args, wait=False)
    deadline = time.monotonic() + 1200
    while not _steps(_rows(workdir), "rl") and proc.poll() is None:
      self.assertLess(time.monotonic(), deadline, "no RL step within the time limit")
      time.sleep(0.05)
    if proc.poll() is not None:
      self.fail(f"ended before it could be killed (exit {proc.returncode})")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _steps(_rows(workdir), "rl")
    self.assertTrue(done)
    self.assertLess(max(done), 20)
    _run(workdir, *args)
    rows = _rows(workdir)
    self.assertEqual(_steps(rows, "sft"), [1, 2, 3])
    self.assertEqual(_steps(rows, "rl"), list(range(1, 21)))


if __name__ == "__main__":
  absltest.main()
