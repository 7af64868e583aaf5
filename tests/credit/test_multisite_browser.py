"""The multi-site controlled setting in the real browser: a (3 bug, 4 neutral) set built
with the evaluator, each site then scored alone again."""

import pytest
from absl.testing import absltest

from rcca_jax.credit import controlled
from rcca_jax.credit import multisite
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import selection
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import EvalPool, Job

FAMILIES = ("counter", "filter_search", "unit_converter")


class MultiSiteInTheBrowserTest(absltest.TestCase):

  @pytest.mark.slow
  def test_neutral_sites_keep_the_reward_and_bug_sites_fail_their_own_rubrics(self):
    from experiments import ablation_small  # pylint: disable=import-outside-toplevel
    config = ablation_small.get_config()
    fields = dict(config.data.controlled.to_dict(), families=FAMILIES, bug_sites=3,
                  neutral_sites=4)
    spec = controlled.ControlledSpec.from_mapping(fields)
    train = selection.load_task_file("data/tasks/train.jsonl")
    evaluator = EvalConfig.from_dict(dict(config.eval.evaluator.to_dict()))
    with EvalPool(evaluator, workers=2) as pool:
      def score(pairs):
        jobs = [Job(task=t, response=text, sample_id=i) for i, (t, text) in enumerate(pairs)]
        return list(pool.run(jobs, progress=False))
      built = controlled.build(train, spec, score)
      self.assertLen(built, len(FAMILIES))
      pairs = []
      for task in built:
        ref = sites_lib.reference_answer(task)
        pairs.append((task, ref))
        for site in sites_lib.sites_of(task):
          pairs.append((task, sites_lib.render(ref, [site], {site.name: True})[0]))
        pairs.append((task, controlled.info(task)["response"]))
      records = iter(score(pairs))
    for task in built:
      ref = next(records)
      bugs = []
      for site in sites_lib.sites_of(task):
        rec = next(records)
        self.assertEqual(rec["gates"], ref["gates"], site.description)
        if site.kind == "neutral":
          self.assertEqual(rec["reward"], ref["reward"], site.description)
          self.assertEqual(multisite.outcomes_of(rec), multisite.outcomes_of(ref))
        else:
          failed = {k for k, v in multisite.outcomes_of(rec).items() if v is False}
          self.assertEqual(failed, set(site.rubrics), site.description)
          self.assertLessEqual(rec["reward"], spec.max_mutant_reward)
          self.assertEqual(rec["reward"], site.reward)
          bugs.append(failed)
      self.assertLen(bugs, 3)
      for i, failed in enumerate(bugs):  # a rubric of its own
        self.assertTrue(failed - set().union(*(b for j, b in enumerate(bugs) if j != i)))
      self.assertEqual(next(records)["reward"], controlled.info(task)["reward"])
    self.assertIsNone(next(records, None))


if __name__ == "__main__":
  absltest.main()
