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


class StatisticsTest(absltest.TestCase):

  def test_cluster_stat_pools_pairs_and_resamples_batches(self):
    values = np.asarray([1.0, 3.0, 2.0])
    s = onestep.cluster_stat(values, [0, 0, 1], reps=500, seed=0)
    self.assertEqual((s["mean"], s["pairs"], s["batches"]), (2.0, 3, 2))
    self.assertTrue(1.0 <= s["interval"][0] <= s["interval"][1] <= 3.0)
    same = onestep.cluster_stat(np.full(4, 0.5), [0, 1, 2, 3], reps=100, seed=0)
    self.assertEqual((same["interval"], same["half_width"]), ([0.5, 0.5], 0.0))
    self.assertIsNone(onestep.cluster_stat(np.zeros(0), [], reps=10, seed=0)["mean"])

  def test_comparisons(self):
    self.assertEqual(onestep.comparisons(["grpo", "rcca_focus", "rcca_focus_placebo"]),
                     [("rcca_focus", "rcca_focus_placebo"), ("rcca_focus", "grpo"),
                      ("rcca_focus_placebo", "grpo")])
    # Every arm X beside X_placebo is a location contrast, after focus - placebo.
    arms = ["rcca", "rcca_placebo", "rcca_focus_mass01", "rcca_focus",
            "rcca_focus_placebo", "rcca_focus_mass01_placebo"]
    self.assertEqual(onestep.comparisons(arms),
                     [("rcca_focus", "rcca_focus_placebo"), ("rcca", "rcca_placebo"),
                      ("rcca_focus_mass01", "rcca_focus_mass01_placebo")])

  def test_placebo_draws_are_compared_as_their_mean(self):
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo", "rcca_focus_placebo_d2",
            "rcca_focus_placebo_d10"]
    self.assertEqual(onestep.draws_of(onestep.PLACEBO_MEAN, arms),
                     ["rcca_focus_placebo", "rcca_focus_placebo_d2",
                      "rcca_focus_placebo_d10"])
    self.assertEqual(onestep.draws_of("grpo", arms), ["grpo"])
    self.assertEqual(onestep.comparisons(arms),
                     [("rcca_focus", "rcca_focus_placebo"),
                      ("rcca_focus", onestep.PLACEBO_MEAN), ("rcca_focus", "grpo"),
                      ("rcca_focus_placebo", "grpo"), (onestep.PLACEBO_MEAN, "grpo")])
    pairs = [{"before": 0.0, "after": {"rcca_focus_placebo": 0.3,
                                       "rcca_focus_placebo_d2": -0.1,
                                       "rcca_focus_placebo_d10": 0.1}}]
    np.testing.assert_allclose(onestep.changes(pairs, onestep.PLACEBO_MEAN, "margin"),
                               [0.1])
    p = [onestep.p_bugs(np.asarray([m]))[0] - 0.5 for m in (0.3, -0.1, 0.1)]
    np.testing.assert_allclose(onestep.changes(pairs, onestep.PLACEBO_MEAN, "p_bug"),
                               [np.mean(p)])

  def test_resolution_against_the_mean_of_the_draws(self):
    rng = np.random.default_rng(0)
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo", "rcca_focus_placebo_d1"]
    pairs = [{"step": step, "blamed": bool(step % 2), "before": 0.0,
              "after": dict(zip(arms, rng.normal(size=len(arms))))} for step in range(8)]
    stats = onestep.statistics(pairs, arms, reps=200, seed=0)
    r = onestep.resolution(stats, 18.0, "")
    mean = onestep.find_difference(stats, "rcca_focus", onestep.PLACEBO_MEAN)
    self.assertEqual(r["placebo_mean"]["draws"], 2)
    self.assertEqual(r["placebo_mean"]["blamed_margin"],
                     mean["blamed"]["margin"]["half_width"])
    focus = onestep.changes(pairs, "rcca_focus", "margin")
    placebos = [onestep.changes(pairs, a, "margin") for a in arms[2:]]
    self.assertAlmostEqual(mean["all"]["margin"]["mean"],
                           float(np.mean(focus - np.mean(placebos, axis=0))))
    self.assertIn("Against the mean of 2 placebo layouts", onestep.resolution_text(r))

  def test_merged_measurements_join_the_arms_of_each_pair(self):
    def line(step, before, after):
      return {"step": step, "pairs": [{"step": step, "task_id": "t", "site": "b",
                                       "before": before, "after": after}],
              "updates": {a: {} for a in after}, "measure_s": 1.0}
    mine = {0: line(0, 0.5, {"grpo": 0.4}), 1: line(1, 0.5, {"grpo": 0.3})}
    theirs = {1: line(1, 0.5, {"rcca_focus": 0.2}), 2: line(2, 0.5, {"rcca_focus": 0.1})}
    got = onestep.merge_lines(mine, [theirs])
    self.assertEqual(list(got), [1])
    self.assertEqual(got[1]["pairs"][0]["after"], {"grpo": 0.3, "rcca_focus": 0.2})
    self.assertEqual((got[1]["measure_s"], mine[1]["pairs"][0]["after"]),
                     (2.0, {"grpo": 0.3}))
    with self.assertRaisesRegex(ValueError, "step 1, site .*differ"):
      onestep.merge_lines(mine, [{1: line(1, 0.7, {"rcca_focus": 0.2})}])
    # Another scoring layout's rounding: the other arm keeps the change it measured.
    got = onestep.merge_lines(mine, [{1: line(1, 0.5 + 1e-4, {"rcca_focus": 0.2})}])
    self.assertAlmostEqual(got[1]["pairs"][0]["after"]["rcca_focus"] - 0.5, 0.2 - 0.5 - 1e-4,
                           places=12)

  def test_joined_measurements_add_the_other_batches(self):
    mine = {3: {"step": 3, "who": "mine"}, 4: {"step": 4, "who": "mine"}}
    other = {1: {"step": 1, "who": "other"}, 3: {"step": 3, "who": "other"}}
    joined = onestep.join_lines(mine, [other])
    self.assertEqual(list(joined), [1, 3, 4])
    self.assertEqual([line["who"] for line in joined.values()], ["other", "mine", "mine"])

  def test_a_summary_gives_back_its_lines(self):
    rng = np.random.default_rng(1)
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo"]
    lines = [{"step": step, "measure_s": 2.0,
              "updates": {a: {"grad_norm": float(step), "clipped": 0.0} for a in arms},
              "pairs": [{"step": step, "task_id": f"t{i}", "site": "bug0",
                         "blamed": bool((step + i) % 2), "before": float(rng.normal()),
                         "after": dict(zip(arms, rng.normal(size=3).tolist()))}
                        for i in range(3)]} for step in (4, 7, 9)]
    summary = json.loads(json.dumps(onestep.summarize(lines, arms, reps=100, seed=0,
                                                      auc_steps=18.0)))
    back = onestep.summary_lines(summary)
    self.assertEqual(list(back), [4, 7, 9])
    self.assertEqual([b["pairs"] for b in back.values()], [line["pairs"] for line in lines])
    self.assertEqual([b["updates"] for b in back.values()],
                     [line["updates"] for line in lines])
    again = onestep.summarize(list(back.values()), arms, reps=100, seed=0, auc_steps=18.0)
    self.assertEqual(again["differences"], summary["differences"])
    self.assertEqual(again["measure_s"], summary["measure_s"])
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "summary.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(summary, f)
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as f:
      json.dump({"checkpoint": "ckpt", "arms": arms[:1]}, f)
    self.assertEqual(onestep.joined_output(path), ({"checkpoint": "ckpt", "arms": arms}, back))

  def test_a_summarys_meta_is_its_namesakes_with_the_summarys_arms(self):
    folder = self.create_tempdir().full_path
    layout = {"locator": "exact, else window"}
    for suffix, arms in (("", ["grpo"]), ("_window", ["grpo", "rcca_focus"])):
      with open(os.path.join(folder, f"meta{suffix}.json"), "w", encoding="utf-8") as f:
        json.dump({"checkpoint": "ckpt", "arms": ["grpo"], "layout": layout | {"s": suffix}}, f)
      with open(os.path.join(folder, f"summary{suffix}.json"), "w", encoding="utf-8") as f:
        json.dump({"arms": arms, "steps": [], "measure_s": 0.0, "pairs": [], "updates": []}, f)
    meta, lines = onestep.joined_output(os.path.join(folder, "summary_window.json"))
    self.assertEqual(meta["layout"]["s"], "_window")
    self.assertEqual(meta["arms"], ["grpo", "rcca_focus"])
    self.assertEqual(lines, {})
    self.assertEqual(onestep.joined_output(folder), ({"checkpoint": "ckpt", "arms": ["grpo"],
                                                      "layout": layout | {"s": ""}}, {}))
    with self.assertRaisesRegex(ValueError, "not a summary"):
      onestep.joined_output(os.path.join(folder, "meta.json"))

  def test_property_shares_sum_the_batches_counts(self):
    got = onestep.property_shares([{"tokens": 10, "responses": 2, "fix": 0.5,
                                    "fix_pairs": 1},
                                   {"tokens": 30, "responses": 2, "fix": 1.0,
                                    "fix_pairs": 2}])
    self.assertEqual((got["shares"]["response_tokens"], got["shares"]["fix"]), (10.0, 0.5))
    self.assertIsNone(got["shares"]["bug_token_share"])
    self.assertEqual(onestep.property_shares([])["counts"], {})


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
    cls.summary = onestep.summarize(cls.lines, ARMS, reps=300, seed=0, auc_steps=18.0,
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
    for category in onestep.CATEGORIES:
      for what in onestep.MEASURES:
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
    shares = onestep.property_shares([counts])["shares"]
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
    again = onestep.recompute(summary)
    for key in ("arm_means", "differences", "resolution"):
      self.assertEqual(again[key], summary[key])
    text = onestep.table(summary)
    for d in again["differences"]:
      self.assertIn(f"{d['arm']} - {d['against']}", text)
      for category in onestep.CATEGORIES:
        self.assertIn(onestep.cell(d[category]["margin"]), text)
        self.assertIn(onestep.cell(d[category]["p_bug"]), text)
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
    self.assertEqual(onestep.read_meta(out)["layout"], {"locator": onestep.LOCATOR})
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
    self.assertEqual(sorted(onestep.read_lines(path)), [0, 1, 2])


if __name__ == "__main__":
  absltest.main()
