"""The ablation runner's config handling and its report (summary, table, plot)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from experiments import ablation_small
from rcca_jax.study import ablation
from rcca_jax.study import ablation_report
from rcca_jax.study import overrides
from rcca_jax.study import stats

REPO = pathlib.Path(__file__).resolve().parents[2]


def write_rows(path, rows):
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "metrics.jsonl"), "w", encoding="utf-8") as f:
    for row in rows:
      f.write(json.dumps(row) + "\n")


def fake_run(workdir, seed, arm, post_sft, passes, rewards, sample_s=2.0):
  write_rows(os.path.join(workdir, f"seed_{seed}", "sft"), [
      {"stage": "sft", "step": 10, "loss": 0.1},
      {"stage": "eval", "step": 10, "after": "sft", "pass_rate": post_sft,
       "reward_mean": 0.5}])
  rows = []
  for i, (p, r) in enumerate(zip(passes, rewards), start=1):
    rows.append({"stage": "rl", "step": i, "reward_mean": r, "pass_rate": p, "loss": 0.0,
                 "zero_advantage_groups": 0.25, "sample_s": sample_s, "eval_s": 1.0,
                 "train_s": 0.5, "step_s": sample_s + 1.5})
    rows.append({"stage": "eval", "step": i, "after": "rl", "pass_rate": p,
                 "reward_mean": r})
  write_rows(os.path.join(workdir, f"seed_{seed}", arm), rows)


class ArmConfigTest(parameterized.TestCase):

  def test_overrides_parse_and_apply_with_types(self):
    config = ablation_small.get_config()
    self.assertEqual(overrides.parse_overrides("a.b=1; c = x ;"), [("a.b", "1"), ("c", "x")])
    c = ablation.arm_config(config, 2, "rcca_no_context")
    self.assertEqual((c.seed, c.rl.policy_loss, c.credit.context, c.eval.after_sft),
                     (config.seed + 2, "rcca", 1.0, False))
    self.assertIsInstance(c.credit.context, float)
    c = ablation.arm_config(config, 0, "grpo")
    self.assertEqual(c.rl.policy_loss, "grpo")
    self.assertEqual(config.rl.policy_loss, "rcca")  # the base config is untouched
    s = ablation.sft_config(config, 1)
    self.assertEqual((s.seed, s.rl.num_steps), (config.seed + 1, 0))

  def test_bad_arms_and_overrides(self):
    config = ablation_small.get_config()
    config.ablation.arms = "grpo,teleport"
    with self.assertRaisesRegex(ValueError, "unknown arms \\['teleport'\\]"):
      ablation.arm_names(config)
    config = ablation_small.get_config()
    config.arms.grpo = "rl.no_such_field=1"
    with self.assertRaisesRegex(ValueError, "no config field 'rl.no_such_field'"):
      ablation.arm_config(config, 0, "grpo")
    with self.assertRaisesRegex(ValueError, "not FIELD=VALUE"):
      overrides.parse_overrides("rl.policy_loss")

  def test_every_problem_is_reported_before_any_work(self):
    from rcca_jax.train import config_check  # pylint: disable=import-outside-toplevel
    config = ablation_small.get_config()
    self.assertEqual(ablation.check_configs(config, 3), ["grpo", "rcca"])
    config.arms.grpo = "rl.no_such_field=1"
    config.arms.rcca = "rl.policy_loss=rcca;rl.temperature=0.0"
    config.data.controlled.rates = (1.5,)
    with self.assertRaises(config_check.ConfigError) as ctx:
      ablation.check_configs(config, 0)
    text = str(ctx.exception)
    self.assertIn("[grpo] arm override: no config field 'rl.no_such_field'", text)
    self.assertIn("[rcca] rl.temperature", text)
    self.assertIn("[sft] data.controlled: data.controlled.rates must be in [0, 1]", text)
    self.assertIn("--seeds=0", text)

  def test_arms_differ_only_in_their_overrides(self):
    config = ablation_small.get_config()
    a = ablation.arm_config(config, 0, "grpo").to_dict()
    b = ablation.arm_config(config, 0, "rcca").to_dict()
    a["rl"].pop("policy_loss")
    b["rl"].pop("policy_loss")
    self.assertEqual(a, b)


class ReportTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    # Seed 0: rcca reaches 0.5 at step 2, grpo ends at 0.25; seed 1: both end at 0.5.
    fake_run(self.dir, 0, "grpo", 0.25, [0.25, 0.25], [0.5, 0.5], sample_s=3.0)
    fake_run(self.dir, 0, "rcca", 0.25, [0.25, 0.5], [0.5, 0.7])
    fake_run(self.dir, 1, "grpo", 0.0, [0.25, 0.5], [0.4, 0.6], sample_s=3.0)
    fake_run(self.dir, 1, "rcca", 0.0, [0.5, 0.5], [0.6, 0.6])
    self.summary = ablation_report.collect(self.dir, ["grpo", "rcca"], 2)

  def test_summary_layout(self):
    runs = self.summary["arms"]["rcca"]
    self.assertEqual([r["seed"] for r in runs], [0, 1])
    self.assertEqual(runs[0]["post_sft"], {"pass_rate": 0.25, "reward_mean": 0.5})
    # rl_seconds: the RL steps' step_s (3.5 each) summed up to the evaluation.
    self.assertEqual(runs[0]["evals"], [
        {"step": 1, "rl_seconds": 3.5, "pass_rate": 0.25, "reward_mean": 0.5},
        {"step": 2, "rl_seconds": 7.0, "pass_rate": 0.5, "reward_mean": 0.7}])
    self.assertAlmostEqual(runs[0]["rl"]["zero_advantage_groups"], 0.25)
    self.assertAlmostEqual(self.summary["timing"]["grpo"]["sample_s"], 3.0)
    self.assertAlmostEqual(self.summary["timing"]["rcca"]["step_s"], 3.5)

  def test_comparison(self):
    c = self.summary["comparison"]
    self.assertAlmostEqual(c["grpo"]["final_pass_rate"], 0.375)
    self.assertAlmostEqual(c["rcca"]["gain"], np.mean([0.25, 0.5]))
    self.assertEqual(c["rcca"]["paired_pass_rate_diff_per_seed"], [0.25, 0.0])
    self.assertAlmostEqual(c["rcca"]["paired_pass_rate_diff"], 0.125)
    lo, hi = c["rcca"]["paired_pass_rate_diff_interval"]
    self.assertTrue(0.0 <= lo <= 0.125 <= hi <= 0.25, (lo, hi))
    # GRPO's mean final pass rate is 0.375: rcca reaches it at steps 2 and 1, grpo at
    # step 2 on seed 1 only.
    self.assertEqual(c["rcca"]["steps_to_baseline_final"], [2, 1])
    self.assertEqual(c["grpo"]["steps_to_baseline_final"], [None, 2])
    self.assertNotIn("paired_pass_rate_diff", c["grpo"])
    # Pass-rate AUC (post-SFT and both evaluations): rcca 1/3 on both seeds, grpo 1/4.
    self.assertEqual(c["grpo"]["auc_pass_rate_per_seed"], [0.25, 0.25])
    self.assertAlmostEqual(c["rcca"]["auc_pass_rate"], 1 / 3)
    auc_test = c["rcca"]["paired_auc_pass_rate"]
    self.assertEqual(auc_test["seeds"], [0, 1])
    np.testing.assert_allclose(auc_test["per_seed"], [1 / 12, 1 / 12])
    self.assertNotIn("paired_auc_pass_rate", c["grpo"])

  def test_a_diverged_run_is_listed_and_left_out_of_the_pairing(self):
    with open(os.path.join(self.dir, "seed_1", "rcca", ablation_report.DIVERGED), "w",
              encoding="utf-8") as f:
      json.dump({"error": "old_logp has non-finite values in rows [0]",
                 "rl_steps_done": 1}, f)
    summary = ablation_report.collect(self.dir, ["grpo", "rcca"], 2)
    self.assertEqual([r["seed"] for r in summary["arms"]["rcca"]], [0])
    self.assertEqual(summary["diverged"]["rcca"][0]["seed"], 1)
    self.assertEqual(summary["comparison"]["rcca"]["paired_pass_rate_diff_per_seed"], [0.25])
    self.assertIn("**rcca, seed 1: diverged** after RL step 1",
                  ablation_report.markdown(summary))

  def test_written_outputs(self):
    ablation_report.write_all(self.dir, self.summary)
    with open(os.path.join(self.dir, "summary.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["arms"]["grpo"][1]["post_sft"]["pass_rate"], 0.0)
    with open(os.path.join(self.dir, "ablation.png"), "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    table = pathlib.Path(self.dir, "ablation.md").read_text()
    self.assertIn("| rcca | 2 | 0.125 | 0.500 | 0.375", table)
    self.assertIn("| rcca | +0.125 [", table)
    self.assertIn("| grpo | 3.0 | 1.0 | 0.5 | 4.5 |", table)

  def test_point_keys_keep_the_named_metrics_and_the_per_request_shares(self):
    arm_dir = os.path.join(self.dir, "seed_0", "rcca")
    rows = [json.loads(line) for line in
            pathlib.Path(arm_dir, "metrics.jsonl").read_text().splitlines()]
    rows[-1].update({"split/dev/pass_rate": 0.75, "split/novel/pass_rate": 0.0,
                     "pass_at_16": 0.9, "eval_s": 3.0, "flag": True})
    write_rows(arm_dir, rows)
    eval_dir = os.path.join(arm_dir, "eval", "rl_000002")
    os.makedirs(eval_dir)
    with open(os.path.join(eval_dir, "summary.json"), "w", encoding="utf-8") as f:
      json.dump({"pass_at_1_tasks": {"a-f0-t000000": 0.5}}, f)
    config = ablation_small.get_config()
    config.ablation.point_keys = ("split/*", "pass_at_*", "flag", "pass_at_1_tasks")
    last = ablation_report.collect(self.dir, ["grpo", "rcca"], 2, config)[
        "arms"]["rcca"][0]["evals"][-1]
    self.assertEqual(last, {"step": 2, "rl_seconds": 7.0, "pass_rate": 0.5,
                            "reward_mean": 0.7, "split/dev/pass_rate": 0.75,
                            "split/novel/pass_rate": 0.0, "pass_at_16": 0.9,
                            "pass_at_1_tasks": {"a-f0-t000000": 0.5}})
    # Without the keys: the standard point alone.
    plain = ablation_report.collect(self.dir, ["grpo", "rcca"], 2)
    self.assertEqual(sorted(plain["arms"]["rcca"][0]["evals"][-1]),
                     ["pass_rate", "reward_mean", "rl_seconds", "step"])

  def test_bootstrap_interval(self):
    lo, hi = stats.bootstrap_interval([1.0, 1.0, 1.0])
    self.assertEqual((lo, hi), (1.0, 1.0))
    lo, hi = stats.bootstrap_interval(np.arange(100.0))
    self.assertTrue(40 < lo < 49.5 < hi < 59, (lo, hi))


class SharedSftTest(absltest.TestCase):
  """`ablation.shared_sft`: every seed's arms start from seed 0's SFT run, and their RL
  runs differ by the seed."""

  def test_every_seed_reads_seed_0s_post_sft(self):
    workdir = self.create_tempdir().full_path
    fake_run(workdir, 0, "grpo", 0.25, [0.5], [0.6])
    fake_run(workdir, 1, "grpo", 0.75, [0.5], [0.6])  # a seed-1 SFT the runs must not read
    config = ablation_small.get_config()
    config.ablation.shared_sft = True
    runs = ablation_report.collect(workdir, ["grpo"], 2, config)["arms"]["grpo"]
    self.assertEqual([r["post_sft"]["pass_rate"] for r in runs], [0.25, 0.25])
    config.ablation.shared_sft = False
    runs = ablation_report.collect(workdir, ["grpo"], 2, config)["arms"]["grpo"]
    self.assertEqual([r["post_sft"]["pass_rate"] for r in runs], [0.25, 0.75])
    self.assertEqual(ablation_report.sft_dir_of(workdir, 3, True),
                     os.path.join(workdir, "seed_0", "sft"))
    # A seed whose run has not started is not a run (seed 2: no RL rows).
    config.ablation.shared_sft = True
    runs = ablation_report.collect(workdir, ["grpo"], 3, config)["arms"]["grpo"]
    self.assertEqual([r["seed"] for r in runs], [0, 1])

  def test_rl_key_folds_in_the_seed_only_after_another_seeds_sft(self):
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    from tests.fixtures.trainer_fixtures import trainer_config  # pylint: disable=import-outside-toplevel
    config = trainer_config()
    config.seed = 3
    with trainer_lib.Trainer(config, self.create_tempdir().full_path) as trainer:
      sft = trainer.programs.fresh_state(trainer.checkpoints.sft.opt_config)
      key = lambda sft_seed: np.asarray(trainer.rl_state_from(sft, sft_seed).rng)
      np.testing.assert_array_equal(key(None), np.asarray(sft.rng))  # an older checkpoint
      np.testing.assert_array_equal(key(3), np.asarray(sft.rng))  # its own SFT
      self.assertFalse(np.array_equal(key(0), np.asarray(sft.rng)))  # seed 0's SFT


class OnlySeedsTest(absltest.TestCase):
  """`--only_seeds` / `--only_arms`: a process trains its share of the seeds or arms,
  without a summary."""

  def test_a_share_of_the_seeds_then_the_summary(self):
    workdir = self.create_tempdir().full_path
    for seed in (0, 1):
      fake_run(workdir, seed, "grpo", 0.25, [0.5, 0.5], [0.6, 0.6])
    config = ablation_small.get_config()
    config.ablation.arms = "grpo"
    config.sft.num_steps, config.rl.num_steps = 10, 2  # the fake runs are finished
    self.assertEqual(ablation.run(config, workdir, 2, only_seeds=[1]), {})
    self.assertFalse(os.path.exists(os.path.join(workdir, "summary.json")))
    with self.assertRaisesRegex(ValueError, r"--only_seeds \[2\]: not among the 2 seeds"):
      ablation.run(config, workdir, 2, only_seeds=[1, 2])
    summary = ablation.run(config, workdir, 2)
    self.assertEqual([r["seed"] for r in summary["arms"]["grpo"]], [0, 1])
    self.assertTrue(os.path.exists(os.path.join(workdir, "summary.json")))

  def test_a_share_of_the_arms_leaves_the_others_alone(self):
    workdir = self.create_tempdir().full_path
    fake_run(workdir, 0, "rcca", 0.25, [0.5, 0.5], [0.6, 0.6])
    fake_run(workdir, 0, "grpo", 0.25, [0.5], [0.6])  # unfinished: not this share's
    config = ablation_small.get_config()
    config.sft.num_steps, config.rl.num_steps = 10, 2
    self.assertEqual(ablation.run(config, workdir, 1, only_arms=["rcca"]), {})
    self.assertEqual(sorted(os.listdir(os.path.join(workdir, "seed_0", "grpo"))),
                     ["metrics.jsonl"])  # not resumed
    self.assertFalse(os.path.exists(os.path.join(workdir, "summary.json")))
    with self.assertRaisesRegex(ValueError, r"--only_arms \['dapo'\]: not among the "
                                r"study's arms \['grpo', 'rcca'\]"):
      ablation.run(config, workdir, 1, only_arms=["rcca", "dapo"])

  def test_wall_times_keep_other_processes_entries(self):
    workdir = self.create_tempdir().full_path
    ablation._add_wall(workdir, "seed_0/grpo", 5.0)  # pylint: disable=protected-access
    with open(os.path.join(workdir, "wall_times.json"), encoding="utf-8") as f:
      walls = json.load(f)
    walls["seed_2/grpo"] = 7.0  # written by another process since
    with open(os.path.join(workdir, "wall_times.json"), "w", encoding="utf-8") as f:
      json.dump(walls, f)
    ablation._add_wall(workdir, "seed_0/grpo", 1.5)  # pylint: disable=protected-access
    self.assertEqual(ablation.load_walls(workdir), {"seed_0/grpo": 6.5, "seed_2/grpo": 7.0})
    self.assertEqual(os.listdir(workdir), ["wall_times.json"])  # no temporary left


class RebuiltSftTest(absltest.TestCase):
  """An SFT run whose checkpoint was not kept (a study resumed from packed run files) is
  trained again when an arm needs it, and kept only if it reproduces the recorded run."""

  def setUp(self):
    super().setUp()
    from tests.fixtures.trainer_fixtures import trainer_config  # pylint: disable=import-outside-toplevel
    self.config = trainer_config()
    self.config.rl.num_steps = 0
    self.workdir = self.create_tempdir().full_path
    self.sft = os.path.join(self.workdir, "seed_0", "sft")
    ablation._run(self.config, self.sft, self.workdir, "seed_0/sft")  # pylint: disable=protected-access
    self.kept = os.path.join(self.workdir, "kept")
    os.replace(os.path.join(self.sft, "checkpoints"), self.kept)  # as a pack leaves it

  def rows(self, path):
    return ablation.read_rows(path)

  @staticmethod
  def latest_state(directory):
    """The latest saved state of a checkpoint directory, as numpy leaves."""
    import jax  # pylint: disable=import-outside-toplevel
    import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
    step = max(int(p) for p in os.listdir(directory) if p.isdigit())
    with ocp.StandardCheckpointer() as ckpt:
      state = ckpt.restore(os.path.join(directory, str(step), "state"))
    return [np.asarray(x) for x in jax.tree.leaves(state)]

  def test_rebuild_reproduces_the_checkpoint(self):
    recorded = self.rows(self.sft)
    ablation._rebuild_sft(self.config, self.sft, self.workdir, "seed_0/sft_rebuilt")  # pylint: disable=protected-access
    self.assertFalse(os.path.exists(self.sft + ".recorded"))
    self.assertEqual([(r["stage"], r["step"]) for r in self.rows(self.sft)],
                     [(r["stage"], r["step"]) for r in recorded])
    rebuilt = self.latest_state(os.path.join(self.sft, "checkpoints", "sft"))
    kept = self.latest_state(os.path.join(self.kept, "sft"))
    self.assertEqual(len(rebuilt), len(kept))
    for a, b in zip(rebuilt, kept):  # SFT is deterministic: bit for bit
      np.testing.assert_array_equal(a, b)
    self.assertIn("seed_0/sft_rebuilt", ablation.load_walls(self.workdir))
    with open(os.path.join(self.sft, "rebuilt.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f), {"moved_within_tolerance": {}})

  def test_only_teacher_forced_probabilities_may_move_and_only_by_rounding(self):
    reproduces = ablation._reproduces  # pylint: disable=protected-access
    # credit study 2, s1_0 seed 0: recorded at 07a8597, rebuilt at the sweep's numbers.
    self.assertTrue(reproduces("bug_prob_mean", 0.5486570769525512, 0.5486573059052149))
    self.assertFalse(reproduces("bug_prob_mean", 0.5486570769525512, 0.5487))
    self.assertFalse(reproduces("pass_at_1", 0.25, 0.25 + 1e-12))  # discrete: exact
    self.assertFalse(reproduces("bug_prob_mean", 0.5, None))
    self.assertTrue(reproduces("pass_rate", 0.5, 0.5))

  def test_a_rebuild_that_differs_is_set_aside(self):
    from rcca_jax.train import faults  # pylint: disable=import-outside-toplevel
    with open(os.path.join(self.sft, "metrics.jsonl"), "a", encoding="utf-8") as f:
      f.write(json.dumps({"stage": "eval", "step": 1, "after": "sft", "pass_rate": 0.5,
                          "reward_mean": 0.6}) + "\n")
    with self.assertRaisesRegex(faults.RunStopped, r"sft\.rebuilt-differs: the rebuilt "
                                r"SFT run does not reproduce .*\(pass_rate: recorded 0\.5, "
                                r"rebuilt None; 2 fields differ\)"):
      ablation._rebuild_sft(self.config, self.sft, self.workdir, "seed_0/sft_rebuilt")  # pylint: disable=protected-access
    self.assertTrue(os.path.exists(
        os.path.join(self.sft + ".rebuilt-differs", "checkpoints", "sft")))
    self.assertFalse(os.path.exists(self.sft + ".recorded"))
    self.assertEqual(self.rows(self.sft)[-1]["pass_rate"], 0.5)  # the record, put back
    self.assertFalse(os.path.exists(os.path.join(self.sft, "checkpoints")))


@pytest.mark.slow
class AblationEndToEndTest(absltest.TestCase):

  def test_acceptance_command_writes_both_arms(self):
    workdir = self.create_tempdir().full_path
    cmd = [sys.executable, "-m", "rcca_jax.study",
           "--config=experiments/ablation_small.py", f"--workdir={workdir}", "--seeds=1",
           "--config.sft.num_steps=4", "--config.rl.num_steps=2",
           "--config.eval.every_rl_steps=2", "--config.eval.samples_per_request=0"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    with open(os.path.join(workdir, "summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
    for arm in ("grpo", "rcca"):
      (run,) = summary["arms"][arm]
      self.assertEqual([e["step"] for e in run["evals"]], [2])
      self.assertEqual(run["rl_steps"], 2)
    self.assertTrue(os.path.exists(os.path.join(workdir, "ablation.png")))
    # One grading cache for all runs: the second arm's first step samples what the
    # first arm's did (same parameters and seed), so it grades nothing.
    self.assertTrue(os.listdir(os.path.join(workdir, "grading_cache")))
    rows = ablation.read_rows(os.path.join(workdir, "seed_0", "rcca"))
    first = next(r for r in rows if r["stage"] == "rl" and r["step"] == 1)
    self.assertEqual(first["cache_hit_rate"], 1.0)
    self.assertIn("cache_hits", next(r for r in rows if r["stage"] == "eval"))
    # Re-running finds everything done and trains nothing more.
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertNotIn("sft:", proc.stderr)


if __name__ == "__main__":
  absltest.main()
