"""Exact site metrics (train/site_metrics.py): the sequences, their batching, and
`p_bug` against a direct sum of per-token log-probs of a toy model. The trainer's
evaluations with site metrics: test_main_e2e.TrainerInProcessTest."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import chat
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import train_step
from rcca_jax.train import eval_loop
from rcca_jax.train import site_metrics
from rcca_jax.train.sections import load_tokenizer
from tests.fixtures.controlled_fixtures import counter_task
from tests.fixtures import rl_fixtures


def _sum_score(batch):
  """A score that is a known function of the packed rows: the sum of the answer
  token ids (so each sequence's value is checkable by hand)."""
  return (batch["input_ids"] * batch["loss_mask"]).sum(-1)


class PureTest(parameterized.TestCase):

  @parameterized.parameters((0.0, 0.0), (-2.0, 1.5), (3.0, -700.0), (-800.0, 0.0))
  def test_p_bug_is_the_two_way_softmax(self, bug, ref):
    p = site_metrics.p_bug(bug, ref)
    self.assertTrue(0.0 <= p <= 1.0)
    expected = np.exp(bug - np.logaddexp(bug, ref))
    self.assertAlmostEqual(p, float(expected), places=12)

  def test_sequences_are_the_reference_and_each_site_alone(self):
    tok = load_tokenizer("data/tokenizer")
    task = counter_task()
    seqs = site_metrics.site_sequences(tok, [task, tasks_lib.Task(
        id="plain", request="x", rubrics=(), reference="<p>")])
    self.assertEqual([(s.task_id, s.site and s.site.name) for s in seqs],
                     [("t0", None), ("t0", "neutral0"), ("t0", "bug0")])
    reference = sites_lib.reference_answer(task)
    for seq, text in zip(seqs, [reference, reference.replace("1</p>", "0</p>"),
                                reference.replace("++", "--")]):
      ids, mask = chat.format_sft_example(tok, task.request, text)
      self.assertEqual(seq.prompt + seq.answer, ids)
      self.assertEqual(len(seq.answer), sum(mask))
      self.assertEqual(seq.answer[-1], chat.eos_ids(tok)[0])

  def test_batches_of_fixed_rows_and_long_sequences_left_out(self):
    neutral, bug = sites_lib.sites_of(counter_task())  # in reference order
    seqs = [site_metrics.SiteSequence("a", None, [5, 6], [7, 8]),
            site_metrics.SiteSequence("a", bug, [5, 6], [9]),
            site_metrics.SiteSequence("b", None, [1], [2, 3, 4, 5, 6]),  # too long
            site_metrics.SiteSequence("b", neutral, [1], [2])]
    calls = []

    def score(batch):
      calls.append(batch["input_ids"].shape)
      return _sum_score(batch)

    logps = site_metrics.sequence_logps(score, seqs, rows=2, max_len=5, pad_id=0)
    self.assertEqual(calls, [(2, 5), (2, 5)])
    np.testing.assert_array_equal(logps, [15.0, 9.0, np.nan, 2.0])
    records, skipped = site_metrics.site_records(seqs, logps)
    self.assertEqual(skipped, 1)  # b's reference is too long: its site is left out
    (rec,) = records
    self.assertEqual(rec, {"task_id": "a", "site": "bug0", "kind": "bug",
                           "logp": {"reference": 15.0, "bug": 9.0},
                           "p_bug": site_metrics.p_bug(9.0, 15.0)})
    self.assertEqual(site_metrics.bug_prob_mean(records), rec["p_bug"])
    self.assertIsNone(site_metrics.bug_prob_mean([]))

  def test_bug_sites_only_and_batches_as_long_as_their_sequences(self):
    tok = load_tokenizer("data/tokenizer")
    seqs = site_metrics.site_sequences(tok, [counter_task()], kinds=("bug",))
    self.assertEqual([s.site and s.site.name for s in seqs], [None, "bug0"])
    rows = [site_metrics.SiteSequence("a", None, [5, 6], [7, 8]),
            site_metrics.SiteSequence("b", None, [1], [2, 3, 4, 5, 6]),
            site_metrics.SiteSequence("c", None, [1] * 9, [2] * 9)]  # too long
    calls = []

    def score(batch):
      calls.append(batch["input_ids"].shape)
      return _sum_score(batch)

    got = site_metrics.sequence_logps(score, rows, rows=1, max_len=16, pad_id=0,
                                      length_bucket=4)
    self.assertEqual(calls, [(1, 4), (1, 8)])  # 4 and 6 tokens, rounded up to 4s
    np.testing.assert_array_equal(got, [15.0, 20.0, np.nan])
    np.testing.assert_array_equal(
        got, site_metrics.sequence_logps(_sum_score, rows, rows=1, max_len=16, pad_id=0))

  def test_batches_with_as_few_rows_as_hold_their_sequences(self):
    seqs = [site_metrics.SiteSequence(str(i), None, [1], [i + 2]) for i in range(11)]
    for multiple, want in ((1, [(8, 4), (4, 4)]), (3, [(8, 4), (6, 4)]),
                           (0, [(8, 4), (8, 4)])):
      calls = []

      def score(batch, calls=calls):
        calls.append(batch["input_ids"].shape)
        return _sum_score(batch)

      # 11 sequences, 8 rows at most: 8, then 3 rounded up to 4 (a power of two) and
      # to a multiple of `row_multiple`; 0 keeps every batch at 8 rows.
      got = site_metrics.sequence_logps(score, seqs, rows=8, max_len=4, pad_id=0,
                                        row_multiple=multiple)
      self.assertEqual(calls, want, msg=f"row_multiple={multiple}")
      np.testing.assert_array_equal(got, np.arange(11) + 2)  # the answer tokens' sum

  def test_a_score_of_the_wrong_shape_is_an_error(self):
    seqs = [site_metrics.SiteSequence("a", None, [5], [7])]
    with self.assertRaisesRegex(ValueError, r"shape \(1,\), expected \(2,\)"):
      site_metrics.sequence_logps(lambda b: np.zeros(1), seqs, rows=2, max_len=4,
                                  pad_id=0)


class ToyModelTest(absltest.TestCase):
  """`p_bug` and both log-probs from the compiled log-prob function equal a direct sum
  of log_softmax over each answer token, one unpadded sequence at a time."""

  def test_p_bug_equals_direct_sum_of_token_logprobs(self):
    tok = load_tokenizer("data/tokenizer")
    vocab = -(-len(tok) // 64) * 64
    # Two layers (KDA, MLA), both dense.
    model = rl_fixtures.tiny_model(seed=3, vocab_size=vocab, num_hidden_layers=2,
                                   first_k_dense_replace=2,
                                   pad_token_id=chat.pad_id(tok),
                                   eos_token_id=chat.eos_ids(tok)[0])
    fmodel = train_step.FunctionalModel(model)
    graphdef, weights = nnx.split(model)
    forward = jax.jit(lambda w, ids: nnx.merge(graphdef, w)(ids))
    fn = logprobs_lib.compile_logprob_fn(fmodel, train_step.StepConfig(), 2)
    tasks = [counter_task("t0"), counter_task("t1", "A counter that starts at one.")]
    rows, max_len = 4, 112

    def score(batch):
      return np.asarray(fn(fmodel.params, fmodel.model_state, batch), np.float64).sum(-1)

    out = site_metrics.evaluate_sites(score, tok, tasks, rows=rows, max_len=max_len,
                                      pad_id=chat.pad_id(tok))
    self.assertEqual(fn._cache_size(), 1)  # 6 sequences, 2 calls, one program
    self.assertEqual(out["sites_skipped"], 0)

    def direct(task, text):
      ids, mask = chat.format_sft_example(tok, task.request, text)
      logits = np.asarray(forward(weights, jnp.asarray([ids])), np.float64)[0]
      logp = logits - logits.max(-1, keepdims=True)
      logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
      return sum(logp[t - 1, ids[t]] for t in range(1, len(ids)) if mask[t])

    by_key = {(r["task_id"], r["site"]): r for r in out["sites"]}
    self.assertLen(by_key, 4)
    p_bugs = []
    for task in tasks:
      reference = sites_lib.reference_answer(task)
      ref = direct(task, reference)
      bug = direct(task, reference.replace("++", "--"))
      neutral = direct(task, reference.replace("1</p>", "0</p>"))
      rec = by_key[(task.id, "bug0")]
      self.assertAlmostEqual(rec["logp"]["reference"], ref, delta=1e-3 * abs(ref))
      self.assertAlmostEqual(rec["logp"]["bug"], bug, delta=1e-3 * abs(bug))
      expected = 1.0 / (1.0 + math.exp(ref - bug))
      self.assertAlmostEqual(rec["p_bug"], expected, delta=1e-3)
      p_bugs.append(expected)
      rec = by_key[(task.id, "neutral0")]
      self.assertEqual(rec["kind"], "neutral")
      self.assertIsNone(rec["p_bug"])
      self.assertAlmostEqual(rec["logp"]["neutral"], neutral, delta=1e-3 * abs(neutral))
    self.assertAlmostEqual(out["bug_prob_mean"], float(np.mean(p_bugs)), delta=1e-3)


class SampleSeedTest(absltest.TestCase):

  def test_fixed_per_seed_stage_and_step(self):
    seed = eval_loop.sample_seed
    self.assertEqual(seed(0, "rl", 4), seed(0, "rl", 4))
    self.assertLen({seed(0, "rl", 4), seed(1, "rl", 4), seed(0, "rl", 8),
                    seed(0, "sft", 4)}, 4)
    self.assertTrue(0 <= seed(3, "sft", 600) < 2**31 - 1)


if __name__ == "__main__":
  absltest.main()
