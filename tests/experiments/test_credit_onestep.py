"""experiments/credit_onestep.py on a tiny controlled setup: hand-made graded batches of
two counter tasks (a bug site each), a tiny untrained model, the trainer's own update."""

import copy
import json
import os
import shutil
import tempfile

import ml_collections
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from benchmarks import credit_mechanism
from experiments import credit_onestep as onestep
from experiments import credit_onestep_lines as onestep_lines
from experiments import credit_onestep_stats as onestep_stats
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import chat
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import site_metrics
from rcca_jax.train import trainer as trainer_lib
from tests.fixtures.controlled_fixtures import controlled_config, controlled_file

ARMS = ["grpo", "grpo_twin", "rcca_focus", "rcca_focus_placebo"]
# Per batch, which task's failed (buggy) response the evaluator blames on its bug.
BLAMED = [(True, False), (False, True), (True, True)]


def toy_config(path: str) -> ml_collections.ConfigDict:
  config = controlled_config(path)
  config.eval.enabled = False
  config.arms = ml_collections.ConfigDict(dict(
      grpo="rl.policy_loss=grpo", grpo_twin="rl.policy_loss=grpo",
      rcca_focus="rl.policy_loss=rcca;credit.negative_unblamed=0.0",
      rcca_focus_placebo="rl.policy_loss=rcca;credit.blame=placebo;"
                         "credit.negative_unblamed=0.0"))
  return config


def rollout(trainer, task, sample_id: int, text: str, reward: float, issues: list, seed: int):
  end = chat.eos_ids(trainer.tokenizer)
  tokens = trainer.tokenizer.encode(text, add_special_tokens=False) + [end[0]]
  decoded, offsets = rollouts_lib.decode_with_offsets(trainer.tokenizer, tokens, end)
  assert decoded == text
  return rollouts_lib.Rollout(
      task=task, sample_id=sample_id,
      prompt=chat.format_prompt(trainer.tokenizer, task.request), tokens=tokens,
      logprobs=np.full(len(tokens), -2.0, np.float32), text=text, offsets=offsets,
      seed=seed, record={"reward": reward, "issues": issues})


def toy_batch(trainer, seed: int, blamed: tuple[bool, bool]) -> list:
  """Per task, a group of two: its bug variant (reward 0.2; the evaluator's direct
  span on the bug when `blamed`) and its reference (0.9)."""
  out = []
  for task, blame in zip(trainer.tasks.rl(), blamed):
    reference = sites_lib.reference_answer(task)
    bug = next(s for s in sites_lib.sites_of(task) if s.kind == "bug")
    text, spans = sites_lib.render(reference, sites_lib.sites_of(task), {bug.name: True})
    issues = [{"direct": [list(spans[bug.name])], "context": []}] if blame else []
    out += [rollout(trainer, task, 0, text, 0.2, issues, seed),
            rollout(trainer, task, 1, reference, 0.9, [], seed)]
  return out


class OneStepTest(parameterized.TestCase):
  """One trainer and one measurement of three toy batches, shared by the tests."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    path = os.path.join(cls.tmp, "controlled_tasks.jsonl")
    controlled_file(path)
    cls.config = toy_config(path)
    cls.trainer = trainer_lib.Trainer(cls.config, os.path.join(cls.tmp, "run")).open()
    t = cls.trainer
    cls.state = t.rl_state_from(t.programs.fresh_state(t.checkpoints.sft.opt_config))
    cls.batches = [toy_batch(t, seed, b) for seed, b in enumerate(BLAMED)]
    cls.lines = onestep.measure(t, cls.state, cls.batches, [0, 1, 2],
                                onestep.arms_of(cls.config, ARMS))
    cls.summary = onestep_stats.summarize(cls.lines, ARMS, reps=300, seed=0, auc_steps=18.0,
                                    setting="s1_0")

  @classmethod
  def tearDownClass(cls):
    cls.trainer.close()
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def difference(self, arm, against):
    (d,) = [d for d in self.summary["differences"]
            if (d["arm"], d["against"]) == (arm, against)]
    return d

  def test_sites_are_split_by_the_evaluators_blame_of_failed_responses(self):
    pairs = self.summary["pairs"]
    self.assertLen(pairs, 6)  # 3 batches x 2 tasks x 1 bug site
    got = [(p["step"], p["blamed"], p["failed_with_bug"]) for p in pairs]
    want = [(step, b, 1) for step, flags in enumerate(BLAMED) for b in flags]
    self.assertEqual(got, want)
    self.assertEqual(self.summary["counts"], {"batches": 3, "pairs": 6, "blamed": 4,
                                              "unblamed": 2})

  def test_an_identical_arm_differs_by_exactly_zero(self):
    d = self.difference("grpo_twin", "grpo")
    for category in onestep_stats.CATEGORIES:
      for what in onestep_stats.MEASURES:
        self.assertEqual(d[category][what]["mean"], 0.0)
        self.assertEqual(d[category][what]["interval"], [0.0, 0.0])
    # ... while focus's update is another one, at the sites its blame covers.
    self.assertNotEqual(self.difference("rcca_focus", "grpo")["blamed"]["margin"]["mean"],
                        0.0)

  def test_batch_properties_measure_length_blame_and_overlap(self):
    t = self.trainer
    task = t.tasks.rl()[0]  # bug0 and neutral0 (before it) listed
    reference = sites_lib.reference_answer(task)
    sites = sites_lib.sites_of(task)
    moved, spans = sites_lib.render(reference, sites, {"bug0": True, "neutral0": True})
    buggy, _ = sites_lib.render(reference, sites, {"bug0": True})
    issues = [{"direct": [list(spans["bug0"])], "context": []}]
    # Group 1: the failed response has the neutral variant before its bug, the positive
    # one is the reference: it holds the fix, not at the same place. Group 2: both carry
    # the bug (no response is clean), the better one unblamed.
    batch = [rollout(t, task, 0, moved, 0.2, issues, 0), rollout(t, task, 1, reference, 0.9, [], 0),
             rollout(t, task, 0, buggy, 0.2, [], 0), rollout(t, task, 1, buggy, 0.4, [], 0)]
    counts = onestep.batch_properties(batch, 2, t.credit_weights)
    shares = onestep_stats.property_shares([counts])["shares"]
    self.assertEqual((counts["responses"], counts["failed"], counts["fix_pairs"]), (4, 2, 2))
    self.assertEqual((shares["fix"], shares["fix_same_place"], shares["positive_clean"],
                      shares["groups_without_clean"], shares["located"]),
                     (0.5, 0.0, 0.5, 0.5, 1.0))
    self.assertEqual(shares["response_tokens"],
                     sum(len(r.tokens) for r in batch) / 4)
    self.assertGreater(counts["failed_blamed_tokens"], 0)  # group 1's blamed bug
    self.assertTrue(0 < shares["failed_blamed_token_share"] < 0.5)
    self.assertTrue(0 < shares["bug_token_share"] < 0.5)
    # Group 2's responses are the same tokens: overlap 1; group 1's less.
    self.assertTrue(1.0 < counts["token_overlap"] < 2.0)
    self.assertIn("properties", self.lines[0])
    self.assertEqual(self.summary["properties"]["shares"]["fix"], 1.0)

  def test_before_margins_are_the_site_metrics_at_the_checkpoint(self):
    records = self.trainer.programs.site_metrics(self.state, self.trainer.tasks.rl())["sites"]
    by_key = {(r["task_id"], r["site"]): r for r in records if r["kind"] == "bug"}
    for p in self.summary["pairs"]:
      r = by_key[(p["task_id"], p["site"])]
      self.assertEqual(p["before"], r["logp"]["bug"] - r["logp"]["reference"])
      self.assertAlmostEqual(site_metrics.p_bug(p["before"], 0.0), r["p_bug"], places=12)

  def test_a_zero_learning_rate_leaves_every_margin(self):
    config = copy.deepcopy(self.config)
    config.rl.optimizer.learning_rate = 0.0
    arms = onestep.arms_of(config, ["grpo", "rcca_focus"])
    (line,) = onestep.measure(self.trainer, self.state, self.batches[:1], [0], arms)
    for p in line["pairs"]:
      self.assertEqual(p["after"], {"grpo": p["before"], "rcca_focus": p["before"]})
    self.assertEqual({u["learning_rate"] for u in line["updates"].values()}, {0.0})

  def test_the_summary_recomputes_its_printed_differences(self):
    summary = json.loads(json.dumps(self.summary))  # as read back from summary.json
    again = onestep_stats.recompute(summary)
    for key in ("arm_means", "differences", "resolution"):
      self.assertEqual(again[key], summary[key])
    text = onestep_stats.table(summary)
    for d in again["differences"]:
      self.assertIn(f"{d['arm']} - {d['against']}", text)
      for category in onestep_stats.CATEGORIES:
        self.assertIn(onestep_stats.cell(d[category]["margin"]), text)
        self.assertIn(onestep_stats.cell(d[category]["p_bug"]), text)
    r = summary["resolution"]
    self.assertEqual(r["blamed_margin"],
                     self.difference("rcca_focus", "rcca_focus_placebo")
                     ["blamed"]["margin"]["half_width"])
    self.assertAlmostEqual(r["study2"]["half_width"], 0.0315)
    self.assertAlmostEqual(r["study2"]["relative"], 0.0315 / 0.095)
    effect = self.difference("rcca_focus", "grpo")["all"]["p_bug"]["mean"]
    self.assertEqual(r["relative"], r["all_p_bug"] / abs(effect))
    blamed = self.difference("rcca_focus", "grpo")["blamed"]["p_bug"]["mean"]
    self.assertEqual(r["relative_blamed"], r["blamed_p_bug"] / abs(blamed))
    self.assertIn(f"{r['blamed_margin']:.4f} nats", text)

  def test_a_bug_in_a_noisy_response_is_found_by_its_neighbourhood(self):
    t = self.trainer
    task = t.tasks.rl()[0]
    reference = sites_lib.reference_answer(task)
    bug = next(s for s in sites_lib.sites_of(task) if s.kind == "bug")
    text, spans = sites_lib.render(reference, sites_lib.sites_of(task), {bug.name: True})
    noisy = text + "\n<!-- sampled noise -->"  # no longer a combination of the sites
    issues = [{"direct": [list(spans[bug.name])], "context": []}]
    batch = [rollout(t, task, 0, noisy, 0.2, issues, 0),
             rollout(t, task, 1, reference, 0.9, [], 0)]
    self.assertEqual(onestep.carried_bugs(task, noisy), ({bug.name: spans[bug.name]}, False))
    counts = onestep.site_blame(batch, 2, t.credit_weights)[(task.id, bug.name)]
    self.assertEqual(counts, {"failed_with_bug": 1, "failed_blamed": 1,
                              "failed_with_bug_exact": 0, "failed_blamed_exact": 0})
    exact = onestep.site_blame(self.batches[0], 2, t.credit_weights)
    for c in exact.values():  # combinations: both locators count the same
      self.assertEqual((c["failed_with_bug"], c["failed_blamed"]),
                       (c["failed_with_bug_exact"], c["failed_blamed_exact"]))

  def test_relabel_rewrites_the_blame_and_keeps_the_margins(self):
    out = self.create_tempdir().full_path
    batches_dir = os.path.join(out, "batches")
    checkpoint = os.path.join(self.tmp, "run")
    credit_mechanism.save_batches(batches_dir, [0, 1, 2], self.batches, checkpoint)
    old = json.loads(json.dumps(self.lines))
    for line in old:  # as written before the window locator: no exact counts
      for p in line["pairs"]:
        del p["failed_with_bug_exact"], p["failed_blamed_exact"]
    with open(os.path.join(out, "pairs.jsonl"), "w", encoding="utf-8") as f:
      f.write("".join(json.dumps(line) + "\n" for line in old))
    with open(os.path.join(out, "meta.json"), "w", encoding="utf-8") as f:
      json.dump({"arms": ARMS, "layout": {}}, f)
    lines = onestep.relabel(self.config, out, batches_dir, checkpoint)
    self.assertEqual(lines, json.loads(json.dumps(self.lines)))
    self.assertEqual(onestep_lines.read_meta(out)["layout"], {"locator": onestep.LOCATOR})
    self.assertTrue(os.path.exists(os.path.join(out, "pairs.before_relabel.jsonl")))
    lines[1]["pairs"][0]["failed_with_bug_exact"] += 1  # not these batches' blame
    with open(os.path.join(out, "pairs.jsonl"), "w", encoding="utf-8") as f:
      f.write("".join(json.dumps(line) + "\n" for line in lines))
    with self.assertRaisesRegex(ValueError, "step 1, site"):
      onestep.relabel(self.config, out, batches_dir, checkpoint)

  def test_saved_batches_are_read_back_and_a_fresh_directory_is_no_error(self):
    checkpoint = os.path.join(self.tmp, "run")
    fresh = os.path.join(self.create_tempdir().full_path, "batches")
    self.assertEqual(onestep.graded_batches(self.trainer, self.state, [], fresh,
                                            checkpoint), [])
    credit_mechanism.save_batches(fresh, [0, 1], self.batches[:2], checkpoint)
    got = onestep.graded_batches(self.trainer, self.state, [1, 0], fresh, checkpoint)
    self.assertEqual([[r.text for r in b] for b in got],
                     [[r.text for r in b] for b in (self.batches[1], self.batches[0])])

  def test_a_rerun_measures_only_the_missing_batches(self):
    arms = onestep.arms_of(self.config, ["grpo"])
    done = {0: self.lines[0], 1: self.lines[1]}
    seen = []
    lines = onestep.measure(self.trainer, self.state, self.batches, [0, 1, 2], arms,
                            done=done, on_batch=seen.append)
    self.assertEqual([line["step"] for line in seen], [2])
    self.assertIs(lines[0], self.lines[0])
    path = os.path.join(self.tmp, "pairs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write("".join(json.dumps(line) + "\n" for line in lines))
    self.assertEqual(sorted(onestep_lines.read_lines(path)), [0, 1, 2])


if __name__ == "__main__":
  absltest.main()
