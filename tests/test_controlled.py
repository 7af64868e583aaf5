"""The ablation's controlled setting: task choice, mutant choice, SFT mix, bug outcomes."""

import collections

from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.credit import controlled
from rcca_jax.data import chat
from rcca_jax.data import selection
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import EvalPool, Job
from rcca_jax.train import trainer

FAMILIES = ("dark_mode", "char_counter", "counter")


def train_tasks():
  return selection.load_task_file("data/tasks/train.jsonl")


class RuleScorer:
  """Scores by a rule on the text; records what it was asked."""

  def __init__(self, rule):
    self.rule, self.calls = rule, []

  def __call__(self, pairs):
    self.calls.append(len(pairs))
    return [self.rule(task, text) for task, text in pairs]


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

  def test_round_trips_through_a_task_file(self):
    built = controlled.build(train_tasks(), self.spec(), RuleScorer(lambda t, text: 0.1))
    path = self.create_tempfile().full_path
    tasks_lib.write_tasks(path, built)
    self.assertEqual([controlled.info(t) for t in tasks_lib.load_tasks(path)],
                     [controlled.info(t) for t in built])


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
      examples = t.sft_examples()
      self.assertLen(examples, 3 * 4)
      mutant_ids, _ = chat.format_sft_example(t.tokenizer, built[1].request,
                                              controlled.info(built[1])["response"])
      self.assertEqual(sum(ids == mutant_ids for ids, _ in examples), 3)  # 0.75 x 4
      self.assertEqual([x.id for x in t.rl_tasks()], [x.id for x in built])
      self.assertEqual([x.id for x in t.dev_tasks()], [x.id for x in built])
      self.assertEqual(t.credit_weights, {"direct": 3.0, "context": 1.5, "cap": 4.0})
    finally:
      t.close()


class ControlledWithEvaluatorTest(absltest.TestCase):

  def test_chosen_mutants_fail_in_the_browser(self):
    spec = controlled.ControlledSpec(families=FAMILIES[:2])
    with EvalPool(EvalConfig(), workers=1) as pool:
      def score(pairs):
        jobs = [Job(task=t, response=text, sample_id=i) for i, (t, text) in enumerate(pairs)]
        return [r["reward"] for r in pool.run(jobs, progress=False)]
      built = controlled.build(train_tasks(), spec, score)
      rewards = score([(t, controlled.info(t)["response"]) for t in built]
                      + [(t, chat.format_response(t.reference)) for t in built])
    self.assertTrue(all(r <= 0.9 for r in rewards[:2]), rewards)
    self.assertEqual(rewards[2:], [1.0, 1.0])
    self.assertEqual([controlled.info(t)["reward"] for t in built], rewards[:2])


if __name__ == "__main__":
  absltest.main()
