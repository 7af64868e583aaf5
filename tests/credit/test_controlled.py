"""The ablation's controlled setting: task choice, mutant choice, SFT mix, bug outcomes."""

import collections
import json
import os

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.credit import controlled
from rcca_jax.credit import multisite
from rcca_jax.credit import neutral
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import chat
from rcca_jax.data import selection
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import EvalPool, Job
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import trainer

FAMILIES = ("dark_mode", "char_counter", "counter")
COMMITTED = "experiments/results/ablation_small/controlled_tasks.jsonl"


def train_tasks():
  return selection.load_task_file("data/tasks/train.jsonl")


# Rewards of the committed file's mutants that today's evaluator grades differently:
# star_rating-00011's mutant scored 0.2 (the floor) when the file was committed (commit
# eb8b106) and scores 0.53 today (r2, r4, r5 major, r6 minor; three runs of three). The
# mutant chosen, and every other byte of the file, are unchanged.
REGRADED = {"star_rating-00011": 0.53}

class RuleScorer:
  """Scores by a rule on the text (a reward, or a whole record); records what it was
  asked."""

  def __init__(self, rule):
    self.rule, self.calls, self.tasks = rule, [], []

  def __call__(self, pairs):
    self.calls.append(len(pairs))
    self.tasks.append({t.id for t, _ in pairs})
    out = []
    for task, text in pairs:
      got = self.rule(task, text)
      out.append(got if isinstance(got, dict) else {"reward": got, "rubrics": []})
    return out


def record(task, failed=(), reward=None, runtime=True):
  """A record of `task` in which the rubrics `failed` fail."""
  return {"reward": (1.0 if not failed else 0.5) if reward is None else reward,
          "gates": {"format": True, "source": True, "runtime": runtime},
          "rubrics": [{"id": r.id, "passed": r.id not in failed} for r in task.rubrics]}


def neutral_texts(task):
  """The responses of `task`'s neutral rewrite candidates, each alone."""
  ref = sites_lib.reference_answer(task)
  protected = [task.request] + [r.check or "" for r in task.rubrics]
  return {sites_lib.render(ref, [s], {s.name: True})[0]
          for s in neutral.rewrites(ref, protected=protected)}


class SiteRule:
  """A stand-in for the browser: the reference passes; a neutral rewrite passes unless
  it starts at a position divisible by 3 (then rubric r1 fails by a little); any other
  edit (a mutant) fails the rubric picked by its position, `r{(p // 40) % n + 1}`, and
  the runtime gate too where p is divisible by 5."""

  def __init__(self, tasks):
    self.neutral = {t.id: neutral_texts(t) for t in tasks}
    self.rejected = set()
    self.gate_failures = 0

  def __call__(self, task, text):
    ref = sites_lib.reference_answer(task)
    if text == ref:
      return record(task)
    p = next(i for i, (a, b) in enumerate(zip(ref, text + "\0")) if a != b)
    if text in self.neutral[task.id]:
      if p % 3:
        return record(task)
      self.rejected.add(text)
      return record(task, failed=("r1",), reward=0.95)
    failed = (task.rubrics[(p // 40) % len(task.rubrics)].id,)
    if p % 5 == 0:
      self.gate_failures += 1
      return record(task, failed=failed, reward=0.1, runtime=False)
    return record(task, failed=failed)


class ControlledTest(parameterized.TestCase):

  def spec(self, **kw):
    return controlled.ControlledSpec(families=FAMILIES, **kw)

  def test_picks_first_tasks_of_each_family(self):
    picked = controlled.pick_tasks(train_tasks(), self.spec(tasks_per_family=2))
    self.assertEqual([tasks_lib.family_of(t) for t in picked],
                     ["dark_mode"] * 2 + ["char_counter"] * 2 + ["counter"] * 2)
    first = [t for t in train_tasks() if tasks_lib.family_of(t) == "counter"][:2]
    self.assertEqual([t.id for t in picked[4:]], [t.id for t in first])

  def test_unknown_family_and_bad_fields(self):
    with self.assertRaisesRegex(ValueError, "no train task of family 'nope'"):
      controlled.pick_tasks(train_tasks(), controlled.ControlledSpec(families=("nope",)))
    with self.assertRaisesRegex(ValueError, "unknown data.controlled fields: colour"):
      controlled.ControlledSpec.from_mapping({"families": FAMILIES, "colour": 1})
    with self.assertRaisesRegex(ValueError, "operators"):
      self.spec(operators=("teleport",))
    with self.assertRaisesRegex(ValueError, "rates"):
      self.spec(rates=(1.5,))

  def test_operators_round_robin_rates_shifted(self):
    spec = controlled.ControlledSpec(
        families=FAMILIES + ("star_rating", "filter_search"), operators=("handler_op", "throw"),
        rates=(0.25, 0.75))
    built = controlled.build(train_tasks(), spec, RuleScorer(lambda t, text: 0.1))
    self.assertEqual([controlled.info(t)["operator"] for t in built],
                     ["handler_op", "throw"] * 2 + ["handler_op"])
    # Rate index (i + i // 2) mod 2: each operator meets both rates.
    self.assertEqual([controlled.info(t)["rate"] for t in built],
                     [0.25, 0.75, 0.75, 0.25, 0.25])

  def test_every_operator_meets_every_rate(self):
    spec = controlled.ControlledSpec(families=("x",), operators=("handler_op", "misspell_id",
                                                                  "throw"),
                                     rates=(0.25, 0.6, 0.75, 0.9))
    pairs = {(spec.operators[i % 3], controlled._rate(spec, i))  # pylint: disable=protected-access
             for i in range(12)}
    self.assertLen(pairs, 12)

  def test_first_mutant_scoring_low_enough_is_kept(self):
    # Reject every first candidate: the second one (same operator when it has two) wins.
    seen = collections.Counter()

    def rule(task, text):
      seen[task.id] += 1
      return 1.0 if seen[task.id] == 1 else 0.5
    scorer = RuleScorer(rule)
    built = controlled.build(train_tasks(), self.spec(), scorer)
    self.assertEqual(scorer.calls, [3, 3])  # batched: one round per candidate rank
    for task in built:
      rec = controlled.info(task)
      self.assertEqual(rec["reward"], 0.5)
      s, e = rec["bug_span"]
      reference = chat.format_response(task.reference)
      self.assertNotEqual(rec["response"], reference)
      self.assertEqual(rec["response"][:s], reference[:s])  # the bug starts at its span

  def test_no_low_scoring_mutant_is_an_error(self):
    with self.assertRaisesRegex(ValueError, "no mutant of .* scores at most 0.9"):
      controlled.build(train_tasks(), self.spec(), RuleScorer(lambda t, text: 1.0))

  def test_sft_targets_follow_rates(self):
    built = controlled.build(train_tasks(), self.spec(rates=(0.25, 0.6, 1.0)),
                             RuleScorer(lambda t, text: 0.1))
    pairs = controlled.sft_targets(built, draws=20)
    self.assertLen(pairs, 60)
    for task, n_mut in zip(built, (5, 12, 20)):
      texts = [text for t, text in pairs if t.id == task.id]
      self.assertEqual(sum(text == controlled.info(task)["response"] for text in texts), n_mut)
      self.assertEqual(sum(text == chat.format_response(task.reference) for text in texts),
                       20 - n_mut)

  def test_padding_adds_unused_css_rules_before_the_style_blocks_end(self):
    html = "<style>\nbody { margin: 0; }\n</style>\n<p>x</p>"
    self.assertEqual(controlled.pad_reference(html, 2),
                     "<style>\nbody { margin: 0; }\n.pad-0 { margin: 0px; }\n"
                     ".pad-1 { margin: 1px; }\n</style>\n<p>x</p>")
    self.assertEqual(controlled.pad_reference("<style>a{}</style>", 1),
                     "<style>a{}.pad-0 { margin: 0px; }\n</style>")
    with self.assertRaisesRegex(ValueError, "no <style> block"):
      controlled.pad_reference("<p>x</p>", 1)
    with self.assertRaisesRegex(ValueError, "padding must be >= 0"):
      self.spec(padding=-1)

  def test_padding_builds_the_set_on_the_padded_references(self):
    plain = {t.id: chat.format_response(t.reference)
             for t in controlled.pick_tasks(train_tasks(), self.spec())}

    def rule(task, text):  # references padded or not pass; any other text is a mutant
      return 1.0 if text == chat.format_response(task.reference) or text in plain.values() \
          else 0.5
    scorer = RuleScorer(rule)
    built = controlled.build(train_tasks(), self.spec(padding=40), scorer)
    self.assertEqual(scorer.calls[0], 6)  # the check: 3 references, plain and padded
    for task in built:
      rec, reference = controlled.info(task), chat.format_response(task.reference)
      self.assertEqual(rec["padding"], 40)
      self.assertEqual(reference.count(".pad-"), 40)
      pad = "".join(controlled.PAD_RULE.format(i=i) for i in range(40))
      self.assertEqual(reference.replace(pad, ""), plain[task.id])
      s, _ = rec["bug_span"]
      self.assertEqual(rec["response"][:s], reference[:s])  # the mutant of the padded text
      self.assertIn(pad, rec["response"])
      texts = {text for t, text in controlled.sft_targets([task], 20)}
      self.assertEqual(texts, {reference, rec["response"]})
    unpadded = controlled.build(train_tasks(), self.spec(), RuleScorer(rule))
    self.assertNotIn("padding", controlled.info(unpadded[0]))

  def test_padding_that_changes_a_score_is_an_error(self):
    def rule(task, text):
      return 0.9 if ".pad-" in text and task.id.startswith("counter") else 0.1
    with self.assertRaisesRegex(ValueError, r"padding=5 changes the score of: counter-"):
      controlled.build(train_tasks(), self.spec(padding=5), RuleScorer(rule))

  def test_bug_outcome(self):
    task = controlled.build(train_tasks(), self.spec(), RuleScorer(lambda t, text: 0.1))[0]
    rec = controlled.info(task)
    s, e = rec["bug_span"]
    hit = controlled.bug_outcome(task, rec["response"], [{"direct": [[s, s + 1]]}])
    self.assertEqual(hit, {"bug": True, "reference": False, "direct_hit": True,
                           "any_hit": True})
    ctx = controlled.bug_outcome(task, rec["response"],
                                 [{"direct": [[0, 5]], "context": [[e - 1, e + 3]]}])
    self.assertEqual((ctx["direct_hit"], ctx["any_hit"]), (False, True))
    miss = controlled.bug_outcome(task, rec["response"], [{"direct": [[0, s]]}])
    self.assertFalse(miss["any_hit"])
    ref = controlled.bug_outcome(task, chat.format_response(task.reference), [])
    self.assertEqual((ref["bug"], ref["reference"]), (False, True))
    with self.assertRaisesRegex(ValueError, "no 'controlled' record"):
      controlled.info(train_tasks()[0])

  def test_one_bug_site_rebuilds_the_committed_file_from_its_rewards(self):
    # The committed file's scores replayed (its mutant's reward, 1.0 for any other text):
    # bug_sites=1, neutral_sites=0 takes today's path and writes the same bytes.
    from experiments import ablation_small  # pylint: disable=import-outside-toplevel
    committed = {t.id: controlled.info(t) for t in tasks_lib.load_tasks(COMMITTED)}

    def replay(task, text):
      return committed[task.id]["reward"] if text == committed[task.id]["response"] else 1.0
    spec = controlled.ControlledSpec.from_mapping(
        ablation_small.get_config().data.controlled.to_dict())
    self.assertEqual((spec.bug_sites, spec.neutral_sites, spec.multi_site), (1, 0, False))
    path = self.create_tempfile().full_path
    tasks_lib.write_tasks(path, controlled.build(train_tasks(), spec, RuleScorer(replay)))
    with open(path, "rb") as got, open(COMMITTED, "rb") as want:
      self.assertEqual(got.read(), want.read())

  def test_round_trips_through_a_task_file(self):
    built = controlled.build(train_tasks(), self.spec(), RuleScorer(lambda t, text: 0.1))
    path = self.create_tempfile().full_path
    tasks_lib.write_tasks(path, built)
    self.assertEqual([controlled.info(t) for t in tasks_lib.load_tasks(path)],
                     [controlled.info(t) for t in built])


class MultiSiteTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.spec = controlled.ControlledSpec(families=FAMILIES, bug_sites=3, neutral_sites=4)
    picked = controlled.pick_tasks(train_tasks(), cls.spec)
    cls.rule = SiteRule(picked)
    cls.scorer = RuleScorer(cls.rule)
    cls.built = controlled.build(train_tasks(), cls.spec, cls.scorer)

  def test_each_task_gets_its_sites(self):
    self.assertEqual([t.id for t in self.built],
                     [t.id for t in controlled.pick_tasks(train_tasks(), self.spec)])
    for i, task in enumerate(self.built):
      ref = sites_lib.reference_answer(task)
      sites = sites_lib.sites_of(task)
      sites_lib.check_sites(ref, sites)
      bugs = [s for s in sites if s.kind == "bug"]
      neutrals = [s for s in sites if s.kind == "neutral"]
      self.assertEqual(sorted(s.name for s in bugs), ["bug0", "bug1", "bug2"])
      self.assertEqual(sorted(s.name for s in neutrals), [f"neutral{j}" for j in range(4)])
      for s in bugs:  # the rubric the rule fails, and one the other bugs do not fail
        text, _ = sites_lib.render(ref, [s], {s.name: True})
        got = self.rule(task, text)
        self.assertEqual(s.rubrics, tuple(r["id"] for r in got["rubrics"] if not r["passed"]))
        self.assertEqual((s.reward, got["gates"]["runtime"]), (0.5, True))
        self.assertIn(s.operator, self.spec.operators + multisite.FALLBACK_OPERATORS)
      self.assertLen({s.rubrics for s in bugs}, 3)
      self.assertEqual([s.rate for s in bugs],
                       [self.spec.rates[(3 * i + j) % 4] for j in range(3)])
      for s in neutrals:
        text, _ = sites_lib.render(ref, [s], {s.name: True})
        self.assertIn(text, self.rule.neutral[task.id])
        self.assertNotIn(text, self.rule.rejected)
        self.assertEqual((s.rate, s.reward), (0.5, 1.0))
      rec = controlled.info(task)
      all_bugs, _ = sites_lib.render(ref, sites, {s.name: s.kind == "bug" for s in sites})
      self.assertEqual((rec["response"], rec["rate"], rec["seed"]),
                       (all_bugs, [s.rate for s in bugs], 0))
      self.assertEqual(rec["operator"], "+".join(s.operator for s in bugs))

  def test_scoring_is_batched_over_tasks(self):
    self.assertTrue(self.rule.rejected)  # some neutral candidates were refused
    self.assertGreater(self.rule.gate_failures, 0)  # and some mutants that fail a gate
    self.assertEqual(self.scorer.tasks[0], {t.id for t in self.built})  # the references
    self.assertLess(len(self.scorer.calls), sum(self.scorer.calls) / 2)
    self.assertEqual(self.scorer.tasks[-1], {t.id for t in self.built})  # the all-bug texts

  def test_deterministic(self):
    again = controlled.build(train_tasks(), self.spec, RuleScorer(SiteRule(self.built)))
    self.assertEqual([controlled.info(t) for t in again],
                     [controlled.info(t) for t in self.built])

  def test_sft_targets_have_exact_independent_marginals(self):
    draws = 20
    pairs = controlled.sft_targets(self.built, draws)
    self.assertLen(pairs, draws * len(self.built))
    self.assertEqual(pairs, controlled.sft_targets(self.built, draws))
    for task in self.built:
      ref = sites_lib.reference_answer(task)
      sites = sites_lib.sites_of(task)
      choices = [sites_lib.decompose(ref, sites, text) for t, text in pairs if t.id == task.id]
      self.assertNotIn(None, choices)
      patterns = set()
      for s in sites:
        carried = tuple(c[s.name] for c in choices)
        self.assertEqual(sum(carried), round(s.rate * draws), s.name)
        patterns.add(carried)
      self.assertLen(patterns, len(sites))  # a permutation of its own per site
    # Exact marginals whatever the rate: 0.25 and 0.75 of 20 draws are 5 and 15.
    self.assertEqual(sorted({round(r * draws) for r in self.spec.rates}), [5, 12, 15, 18])

  def test_site_outcomes_and_bug_stats(self):
    task = self.built[0]
    ref = sites_lib.reference_answer(task)
    sites = sites_lib.sites_of(task)
    choice = {s.name: s.name in ("bug0", "bug2", "neutral1") for s in sites}
    text, spans = sites_lib.render(ref, sites, choice)
    s0, s2 = spans["bug0"], spans["bug2"]
    issues = [{"direct": [[s0[0], s0[0] + 1]], "context": []},
              {"direct": [], "context": [[s2[1] - 1, s2[1] + 2]]}]
    o = controlled.site_outcome(task, text, issues)
    self.assertEqual(o["sites"], choice)
    self.assertEqual(o["hits"], {"bug0": {"direct": True, "any": True},
                                 "bug2": {"direct": False, "any": True}})
    self.assertEqual(controlled.bug_outcome(task, text, issues),
                     {"bug": True, "reference": False, "direct_hit": False, "any_hit": True})
    neutral_only, _ = sites_lib.render(ref, sites, {"neutral0": True})
    self.assertEqual(controlled.bug_outcome(task, neutral_only, []),
                     {"bug": False, "reference": False, "direct_hit": False, "any_hit": False})
    self.assertIsNone(controlled.site_outcome(task, text + "\n<!-- -->", [])["sites"])

    def rollout(text, issues=()):
      return rollouts_lib.Rollout(task=task, sample_id=0, prompt=[], tokens=[],
                                  logprobs=np.zeros(0), text=text, offsets=np.zeros((0, 2)),
                                  record={"issues": list(issues)})
    stats = rollouts_lib.bug_stats([rollout(text, issues), rollout(ref), rollout(neutral_only),
                                    rollout("something else")])
    self.assertEqual(stats, {
        "bug_rate": 2 / 12, "bug_rate_decomposable": 2 / 9, "neutral_rate": 2 / 12,
        "reference_rate": 0.25, "decomposable_rate": 0.75,
        "bug_direct_recall": 0.5, "bug_any_recall": 1.0})

  def test_a_task_without_enough_sites_is_skipped_with_its_reason(self):
    first = controlled.pick_tasks(train_tasks(), self.spec)[0]
    rule = SiteRule(controlled.pick_tasks(train_tasks(), self.spec))

    def one_rubric_for_the_first(task, text):  # every mutant of the first fails r2 only
      out = rule(task, text)
      if task.id == first.id and out["reward"] == 0.5:
        return record(task, failed=("r2",))
      return out
    with self.assertLogs(logger="absl", level="WARNING") as logs:
      built = controlled.build(train_tasks(), self.spec, RuleScorer(one_rubric_for_the_first))
    self.assertEqual([t.id for t in built], [t.id for t in self.built[1:]])
    (line,) = logs.output
    self.assertRegex(line, f"task {first.id} skipped: .* bug mutants .* with the gates "
                     "passing; no 3 of them at separate places each fail a rubric the others "
                     "pass")
    too_many = controlled.ControlledSpec(families=FAMILIES, bug_sites=3, neutral_sites=400)
    with self.assertRaisesRegex(ValueError, "no task of .* has 3 bug and 400 neutral sites: "
                                ".*neutral rewrites away from the bug sites"):
      controlled.build(train_tasks(), too_many, RuleScorer(rule))

  def test_a_task_whose_reference_fails_a_gate_is_skipped_and_named(self):
    first = controlled.pick_tasks(train_tasks(), self.spec)[0]
    rule = SiteRule(controlled.pick_tasks(train_tasks(), self.spec))
    reference = sites_lib.reference_answer(first)

    def timed_out_reference(task, text):  # as a load timeout under a starved CPU grades it
      if task.id == first.id and text == reference:
        return record(task, failed=("r1",), reward=0.1, runtime=False)
      return rule(task, text)
    with self.assertLogs(logger="absl", level="WARNING") as logs:
      built = controlled.build(train_tasks(), self.spec, RuleScorer(timed_out_reference))
    self.assertEqual([t.id for t in built], [t.id for t in self.built[1:]])
    (line,) = logs.output
    self.assertIn(f"task {first.id} skipped: its reference fails the runtime gate "
                  "(reward 0.1)", line)

  def test_pick_bugs_needs_a_rubric_of_its_own_for_each(self):
    def site(name, start, rubrics):
      return sites_lib.Site(name=name, kind="bug", start=start, end=start + 1, variant="?",
                            rubrics=rubrics)
    a, b, c, d = (site("a", 0, ("r1", "r2")), site("b", 5, ("r2",)), site("c", 10, ("r2", "r3")),
                  site("d", 10, ("r4",)))
    self.assertIsNone(multisite.pick_bugs([a, b, c], 2 + 1))  # b is inside a and c
    self.assertEqual(multisite.pick_bugs([a, b, c], 2), [a, c])
    self.assertIsNone(multisite.pick_bugs([a, c, d], 3))  # c and d overlap
    self.assertEqual(multisite.pick_bugs([a, c, b, d], 2), [a, c])
    e = site("e", 20, ("r1", "r3"))
    self.assertIsNone(multisite.pick_bugs([a, c, e], 3))  # e's rubrics are a's and c's
    # [a, c, e] share their rubrics, [a, c, d] overlap: [a, e, d] is the first that fits.
    self.assertEqual(multisite.pick_bugs([a, c, e, d], 3), [a, e, d])

  def test_pick_neutrals_takes_one_per_kind_first(self):
    def site(name, start, kind):
      return sites_lib.Site(name=name, kind="neutral", start=start, end=start + 1,
                            variant="?", operator=kind)
    bug = sites_lib.Site(name="bug0", kind="bug", start=0, end=2, variant="!")
    a, b, c, d = (site("a", 1, "comment"), site("b", 4, "comment"), site("c", 6, "rename"),
                  site("d", 8, "comment"))
    self.assertEqual(multisite.pick_neutrals([a, b, c, d], [bug], 2), [b, c])  # a overlaps
    self.assertEqual(multisite.pick_neutrals([a, b, c, d], [bug], 3), [b, c, d])
    self.assertEqual(multisite.pick_neutrals([a, b, c, d], [bug], 5), [b, c, d])

  def test_bad_site_counts(self):
    with self.assertRaisesRegex(ValueError, "bug_sites must be >= 1"):
      controlled.ControlledSpec(families=FAMILIES, bug_sites=0)
    with self.assertRaisesRegex(ValueError, "neutral_sites >= 0"):
      controlled.ControlledSpec(families=FAMILIES, neutral_sites=-1)


class TrainerControlledModeTest(absltest.TestCase):

  def test_trainer_reads_the_controlled_set_for_sft_rl_and_dev(self):
    from experiments import ablation_small  # pylint: disable=import-outside-toplevel
    spec = controlled.ControlledSpec(families=FAMILIES, rates=(0.25, 0.75))
    built = controlled.build(train_tasks(), spec, RuleScorer(lambda t, text: 0.1))
    path = self.create_tempfile().full_path
    tasks_lib.write_tasks(path, built)
    config = ablation_small.get_config()
    config.model.hidden_size = 32
    config.model.intermediate_size = 64
    config.data.controlled.path = path
    config.data.controlled.draws = 4
    workdir = self.create_tempdir().full_path
    t = trainer.Trainer(config, workdir)
    try:
      examples = t.tasks.sft_examples()
      self.assertLen(examples, 3 * 4)
      mutant_ids, _ = chat.format_sft_example(t.tokenizer, built[1].request,
                                              controlled.info(built[1])["response"])
      self.assertEqual(sum(ids == mutant_ids for ids, _ in examples), 3)  # 0.75 x 4
      self.assertEqual([x.id for x in t.tasks.rl()], [x.id for x in built])
      self.assertEqual([x.id for x in t.tasks.dev()], [x.id for x in built])
      self.assertEqual(t.credit_weights, {"direct": 3.0, "context": 1.5, "cap": 4.0})
    finally:
      t.close()

  def test_trainer_reads_a_multi_site_set(self):
    from experiments import ablation_small  # pylint: disable=import-outside-toplevel
    spec = controlled.ControlledSpec(families=FAMILIES, bug_sites=3, neutral_sites=4)
    picked = controlled.pick_tasks(train_tasks(), spec)
    built = controlled.build(train_tasks(), spec, RuleScorer(SiteRule(picked)))
    path = self.create_tempfile().full_path
    tasks_lib.write_tasks(path, built)
    config = ablation_small.get_config()
    config.model.hidden_size = 32
    config.model.intermediate_size = 64
    config.data.controlled.path = path
    config.data.controlled.bug_sites = 3
    config.data.controlled.neutral_sites = 4
    config.data.controlled.draws = 6
    t = trainer.Trainer(config, self.create_tempdir().full_path)
    try:
      examples = t.tasks.sft_examples()
      want = [chat.format_sft_example(t.tokenizer, task.request, text)
              for task, text in controlled.sft_targets(built, 6)]
      self.assertEqual(examples, want)
      self.assertLen(examples, 3 * 6)
      self.assertEqual([x.id for x in t.tasks.rl()], [x.id for x in built])
    finally:
      t.close()


class ControlledWithEvaluatorTest(absltest.TestCase):

  @pytest.mark.slow
  def test_the_trainer_rebuilds_the_committed_file_in_the_browser(self):
    from experiments import ablation_small  # pylint: disable=import-outside-toplevel
    config = ablation_small.get_config()
    config.model.hidden_size = 32
    config.model.intermediate_size = 64
    path = os.path.join(self.create_tempdir().full_path, "controlled_tasks.jsonl")
    config.data.controlled.path = path
    t = trainer.Trainer(config, self.create_tempdir().full_path)
    try:
      t.tasks.controlled()
    finally:
      t.close()
    with open(path, encoding="utf-8") as got, open(COMMITTED, encoding="utf-8") as want:
      got_lines, want_lines = got.read().splitlines(), want.read().splitlines()
    self.assertLen(got_lines, len(want_lines))
    for line, want in zip(got_lines, want_lines):
      task_id = json.loads(want)["id"]
      if task_id in REGRADED:
        # Same mutant; only the stored reward differs (see REGRADED).
        record = json.loads(want)
        record["controlled"]["reward"] = REGRADED[task_id]
        self.assertEqual(json.loads(line), record)
      else:
        self.assertEqual(line, want)  # byte for byte

  def test_chosen_mutants_fail_in_the_browser(self):
    spec = controlled.ControlledSpec(families=FAMILIES[:2])
    with EvalPool(EvalConfig(), workers=1) as pool:
      def score(pairs):
        jobs = [Job(task=t, response=text, sample_id=i) for i, (t, text) in enumerate(pairs)]
        return list(pool.run(jobs, progress=False))
      built = controlled.build(train_tasks(), spec, score)
      rewards = [r["reward"] for r in score([(t, controlled.info(t)["response"]) for t in built]
                      + [(t, chat.format_response(t.reference)) for t in built])]
    self.assertTrue(all(r <= 0.9 for r in rewards[:2]), rewards)
    self.assertEqual(rewards[2:], [1.0, 1.0])
    self.assertEqual([controlled.info(t)["reward"] for t in built], rewards[:2])


if __name__ == "__main__":
  absltest.main()
