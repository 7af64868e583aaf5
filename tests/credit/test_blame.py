"""Blame controls (credit/blame.py) and their use in the RL rollouts (train/rollouts.py)."""

import pathlib

import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from tests.fixtures.np_reference import np_effective_weights, np_sibling_diff_weights
from rcca_jax.credit import blame
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.tasks import Task
from rcca_jax.rl import objective
from rcca_jax.train import rollouts as rollouts_lib

REPO = pathlib.Path(__file__).resolve().parents[2]
LEGACY = REPO / "experiments/results/ablation_small/controlled_tasks.jsonl"

REFERENCE_APP = "<html><body><button id='go'>Go</button><script>let n = 1;</script></body></html>"


def sited_task() -> Task:
  """A task whose record lists two bug sites and one neutral site."""
  reference = sites_lib.reference_answer(Task(id="t", request="r", rubrics=(),
                                              reference=REFERENCE_APP))
  def at(text):
    return reference.index(text)
  sites = [
      sites_lib.Site("bug0", "bug", at("go'"), at("go'") + 2, "og", rate=0.5),
      sites_lib.Site("neutral0", "neutral", at("Go<"), at("Go<") + 2, "Run"),
      sites_lib.Site("bug1", "bug", at("1;"), at("1;") + 1, "2", rate=0.5),
  ]
  return Task(id="t", request="r", rubrics=(), reference=REFERENCE_APP,
              extra={"controlled": {"sites": [s.to_json() for s in sites]}})


def rollout(task, text, issues=(), seed=0, sample_id=0, reward=0.5, tokens=None):
  offsets = np.asarray([(i, i + 1) for i in range(len(text))], np.int64)
  tokens = [5] * len(text) if tokens is None else list(tokens)
  return rollouts_lib.Rollout(task=task, sample_id=sample_id, prompt=[1], tokens=tokens,
                              logprobs=np.zeros(len(tokens), np.float32), text=text,
                              offsets=offsets, seed=seed,
                              record={"reward": reward, "issues": list(issues)})


class CreditConfigTest(absltest.TestCase):

  def test_defaults_weights_and_errors(self):
    c = blame.CreditConfig.from_mapping(None)
    self.assertEqual((c.blame, c.negative_unblamed), ("evaluator", 1.0))
    self.assertEqual(c.weights(), {"direct": 3.0, "context": 1.5, "cap": 4.0})
    with self.assertRaisesRegex(ValueError, "blame='teleport': expected one of evaluator"):
      blame.CreditConfig(blame="teleport")
    with self.assertRaisesRegex(ValueError, "negative_unblamed=-1"):
      blame.CreditConfig(negative_unblamed=-1.0)
    with self.assertRaisesRegex(ValueError, "placebo_draw=-1 must be >= 0"):
      blame.CreditConfig(placebo_draw=-1)
    with self.assertRaisesRegex(ValueError, "direct=0.5 must be >= 1"):
      blame.CreditConfig(direct=0.5)
    with self.assertRaisesRegex(ValueError, "unknown credit config keys: colour"):
      blame.CreditConfig.from_mapping({"colour": 1})


class PlaceboTest(parameterized.TestCase):

  WBAR = np.asarray([1, 1, 3, 3, 3, 1, 1.5, 1.5, 3, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1,
                     1, 1, 1], np.float32)

  def test_runs(self):
    self.assertEqual(blame.blamed_runs(self.WBAR), [(2, 5), (6, 8), (8, 9), (12, 13)])
    self.assertEqual(blame.blamed_runs(np.ones(4)), [])

  @parameterized.parameters(range(5))
  def test_keeps_runs_sizes_values_and_total_and_moves_them(self, seed):
    got = blame.placebo_weights(self.WBAR, (seed, 7))

    def shape(w):
      return sorted((b - a, float(w[a])) for a, b in blame.blamed_runs(w))

    self.assertLen(got, len(self.WBAR))
    # The adjacent 1.5 and 3 runs of the original are separated: still 4 runs.
    self.assertEqual(shape(got), shape(self.WBAR))
    self.assertEqual(sorted(got.tolist()), sorted(self.WBAR.tolist()))
    self.assertEqual(float(got.sum()), float(self.WBAR.sum()))
    self.assertFalse(np.array_equal(got, self.WBAR))
    np.testing.assert_array_equal(got, blame.placebo_weights(self.WBAR, (seed, 7)))

  def test_seeds_differ_and_unblamed_is_unchanged(self):
    self.assertFalse(np.array_equal(blame.placebo_weights(self.WBAR, (0,)),
                                    blame.placebo_weights(self.WBAR, (1,))))
    np.testing.assert_array_equal(blame.placebo_weights(np.ones(5), (0,)), np.ones(5))

  def test_more_runs_than_gaps(self):
    w = np.asarray([3, 1.5, 3, 1.5, 1], np.float32)
    got = blame.placebo_weights(w, (3,))
    self.assertEqual(sorted(got.tolist()), sorted(w.tolist()))


class OracleTest(absltest.TestCase):

  def test_spans_equal_the_known_bug_sites(self):
    task = sited_task()
    reference = sites_lib.reference_answer(task)
    sites = sites_lib.sites_of(task)
    choice = {"bug0": True, "neutral0": True, "bug1": True}
    text, spans = sites_lib.render(reference, sites, choice)
    issues = blame.oracle_issues(task, text)
    self.assertEqual([i["site"] for i in issues], ["bug0", "bug1"])
    self.assertEqual([i["direct"] for i in issues], [[list(spans["bug0"])],
                                                     [list(spans["bug1"])]])
    self.assertEqual([text[slice(*i["direct"][0])] for i in issues], ["og", "2"])
    self.assertTrue(all(i["context"] == [] for i in issues))
    only_neutral, _ = sites_lib.render(reference, sites, {"neutral0": True})
    self.assertEqual(blame.oracle_issues(task, only_neutral), [])
    self.assertIsNone(blame.oracle_issues(task, text + " "))  # not a combination
    self.assertIsNone(blame.oracle_issues(Task(id="n", request="r", rubrics=(),
                                               reference=REFERENCE_APP), text))

  def test_legacy_single_bug_records(self):
    for task in tasks_lib.load_tasks(str(LEGACY)):
      record = task.extra["controlled"]
      (site,) = sites_lib.sites_of(task)
      (issue,) = blame.oracle_issues(task, record["response"])
      ((a, b),) = issue["direct"]
      self.assertEqual(a, site.start, task.id)  # the text before the site is the reference's
      if site.variant:  # the span holds exactly the bug's text
        self.assertEqual(record["response"][a:b], site.variant, task.id)
      else:  # a deletion: the character after it
        self.assertEqual(b, a + 1, task.id)
      self.assertLessEqual(record["bug_span"][0], a, task.id)
      self.assertEqual(blame.oracle_issues(task, sites_lib.reference_answer(task)), [])


class AssignWeightsTest(absltest.TestCase):

  def test_modes(self):
    task = sited_task()
    reference = sites_lib.reference_answer(task)
    sites = sites_lib.sites_of(task)
    buggy, spans = sites_lib.render(reference, sites, {"bug1": True})
    evaluator_issue = {"direct": [[0, 3]], "context": [[10, 14]]}
    batch = [rollout(task, buggy, [evaluator_issue], seed=11),
             rollout(task, buggy + "noise", [evaluator_issue], seed=11, sample_id=1)]

    rollouts_lib.assign_weights(batch, blame="evaluator")
    evaluator = [r.wbar.copy() for r in batch]
    np.testing.assert_array_equal(evaluator[0][:3], [3.0] * 3)
    self.assertEqual(rollouts_lib.blame_stats(batch, "evaluator"), {})

    rollouts_lib.assign_weights(batch, weights={"direct": 2.0}, blame="oracle")
    a, b = spans["bug1"]
    want = np.ones(len(buggy), np.float32)
    want[a:b] = 2.0
    np.testing.assert_array_equal(batch[0].wbar, want)
    self.assertEqual([r.blame for r in batch], ["oracle", "evaluator"])
    self.assertEqual(rollouts_lib.blame_stats(batch, "oracle"),
                     {"oracle_fallback_rate": 0.5})
    self.assertEqual(batch[1].wbar[0], 2.0)  # the noisy one kept the evaluator's issue

    rollouts_lib.assign_weights(batch, blame="placebo")
    for r, w in zip(batch, evaluator):
      self.assertEqual(sorted(r.wbar.tolist()), sorted(w.tolist()))
      self.assertEqual(r.blame, "placebo")
    # Seeded by the sampler's seed and the row: the same again, another row differs.
    first = batch[0].wbar.copy()
    rollouts_lib.assign_weights(batch, blame="placebo")
    np.testing.assert_array_equal(batch[0].wbar, first)
    self.assertFalse(np.array_equal(batch[0].wbar, batch[1].wbar[:len(first)]))
    # Draw 0 is the default layout; another draw is an independent layout, same runs.
    rollouts_lib.assign_weights(batch, blame="placebo", placebo_draw=0)
    np.testing.assert_array_equal(batch[0].wbar, first)
    np.testing.assert_array_equal(
        first, blame.placebo_weights(evaluator[0], (rollouts_lib.PLACEBO_SALT, 11, 0)))
    rollouts_lib.assign_weights(batch, blame="placebo", placebo_draw=2)
    self.assertFalse(np.array_equal(batch[0].wbar, first))
    self.assertEqual(sorted(batch[0].wbar.tolist()), sorted(first.tolist()))
    with self.assertRaisesRegex(ValueError, "blame='x'"):
      rollouts_lib.assign_weights(batch, blame="x")


class FocusPlaceboTest(absltest.TestCase):

  def test_focus_keeps_the_moved_runs_of_negative_responses_only(self):
    text = "x" * 30
    issue = {"direct": [[2, 5]], "context": [[9, 12]]}
    batch = [rollout(None, text, [issue], seed=4, sample_id=i) for i in range(4)]
    rollouts_lib.assign_weights(batch, blame="evaluator")
    evaluator = np.stack([r.wbar for r in batch])
    rollouts_lib.assign_weights(batch, blame="placebo")
    wbar = np.stack([r.wbar for r in batch])
    adv = np.asarray([-1.0, -0.5, 0.5, 1.0], np.float32)
    got = np.asarray(objective.effective_weights(jnp.asarray(wbar), jnp.asarray(adv),
                                                 negative_unblamed=0.0))
    np.testing.assert_array_equal(got, np_effective_weights(wbar, adv, 1.2, 1.0, 0.0))
    for row in (0, 1):  # negative: weight exactly on the moved runs, total preserved
      np.testing.assert_array_equal(got[row] > 0, wbar[row] > 1)
      self.assertEqual(got[row].sum(), evaluator[row][evaluator[row] > 1].sum())
      self.assertFalse(np.array_equal(got[row] > 0, evaluator[row] > 1))
    np.testing.assert_allclose(got[2:], np.where(wbar[2:] > 1, 1.0, 1.2), rtol=1e-6)


class SiblingDiffTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("substitution", [1, 2, 3, 4, 5], [1, 2, 9, 4, 5], [1, 1, 3, 1, 1]),
      ("insertion", [1, 2, 7, 7, 3, 4], [1, 2, 3, 4], [1, 1, 3, 3, 1, 1]),
      ("deletion", [1, 2, 4], [1, 2, 3, 4], [1, 1, 1]),
      ("identical", [6, 6, 6], [6, 6, 6], [1, 1, 1]),
      ("disjoint", [1, 2], [3, 4, 5], [3, 3]),
      ("empty_best", [1, 2], [], [3, 3]),
      ("empty", [], [1], []),
      ("repeats", [5, 5, 1, 5, 5, 2, 5], [5, 5, 1, 5, 5, 5], [1, 1, 1, 1, 1, 3, 1]))
  def test_matches_numpy(self, tokens, best, want):
    got = blame.sibling_diff_weights(tokens, best, 3.0)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np_sibling_diff_weights(tokens, best, 3.0))
    self.assertEqual(got.dtype, np.float32)

  def test_long_sequences_are_diffed_without_the_junk_heuristic(self):
    best = [7, 8] * 150 + [1, 2, 3]
    tokens = [7, 8] * 150 + [1, 9, 3]
    want = np.ones(len(tokens))
    want[-2] = 2.0
    np.testing.assert_array_equal(blame.sibling_diff_weights(tokens, best, 2.0), want)

  def test_references(self):
    self.assertEqual(blame.sibling_references([0.2, 0.9, 0.5, 0.9, None]),
                     [1, None, 1, None, None])
    self.assertEqual(blame.sibling_references([0.3, 0.3 + 1e-7, 0.3]), [None] * 3)
    self.assertEqual(blame.sibling_references([None, None]), [None, None])
    self.assertEqual(blame.sibling_references([]), [])

  def test_assign_weights_by_group(self):
    def member(tokens, reward, sample_id):
      return rollout(None, "x" * len(tokens), [{"direct": [[0, 1]], "context": []}],
                     sample_id=sample_id, reward=reward, tokens=tokens)
    batch = [member([1, 2, 3], 0.2, 0), member([1, 9, 3], 1.0, 1),
             member([1, 2, 3, 4], 0.5, 2),
             member([4, 4], 0.7, 0), member([4, 5], 0.7, 1)]  # a group of equal rewards
    self.assertEqual(rollouts_lib.sample_groups(batch), [range(0, 3), range(3, 5)])
    rollouts_lib.assign_weights(batch, weights={"direct": 2.5}, blame="sibling_diff")
    want = [[1, 2.5, 1], [1, 1, 1], [1, 2.5, 1, 2.5], [1, 1], [1, 1]]
    for r, w in zip(batch, want):
      np.testing.assert_array_equal(r.wbar, w)
    self.assertEqual([r.blame for r in batch],
                     ["sibling_diff", "uniform", "sibling_diff", "uniform", "uniform"])
    self.assertEqual(rollouts_lib.blame_stats(batch, "sibling_diff"),
                     {"sibling_diff_rate": 0.4})
    rollouts_lib.assign_weights(batch, blame="sibling_diff")  # `credit.direct`'s default
    self.assertEqual(batch[0].wbar[1], 3.0)
    self.assertEqual(rollouts_lib.sample_groups([]), [])


if __name__ == "__main__":
  absltest.main()
