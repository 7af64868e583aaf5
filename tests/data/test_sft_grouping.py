"""SFT steps of similar lengths (issue 50): `grouped_batch_indices` sorts windows of the
shuffled stream into steps of similar lengths (every example once per epoch), and
`sft.length_bucket` pads a step's rows to its longest example, not to `sft.max_len`:
the same rows cut short, the same loss and gradients within float32 rounding."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from experiments import tiny_cpu
from rcca_jax.data import batching
from rcca_jax.rl import sft as sft_lib
from rcca_jax.train import trainer as trainer_lib
from tests.fixtures import rl_fixtures
from tests.fixtures.trainer_fixtures import FakeGrader


def _examples(rng: np.random.Generator, lengths) -> list[tuple[list[int], list[int]]]:
  """Random examples of `lengths` tokens (the tiny vocabulary), a prompt then an answer."""
  out = []
  for n in lengths:
    prompt = int(rng.integers(2, n - 1))
    out.append(([int(t) for t in rng.integers(2, rl_fixtures.VOCAB, n)],
                [0] * prompt + [1] * (n - prompt)))
  return out


class GroupedIndicesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.lengths = [int(n) for n in np.random.default_rng(0).integers(20, 400, 96)]

  def test_group_one_is_the_plain_stream(self):
    for step in range(7):
      self.assertEqual(batching.grouped_batch_indices(self.lengths, 8, step, 3, 1),
                       batching.batch_indices(96, 8, step, 3))

  def test_every_example_once_per_epoch_in_steps_of_similar_lengths(self):
    """96 examples = 3 windows of 4 steps of 8: each epoch's 12 steps hold every example
    once; within a window the steps' length ranges do not overlap, and each window holds
    the plain stream's examples of the same 4 steps."""
    for epoch in range(2):
      steps = [batching.grouped_batch_indices(self.lengths, 8, epoch * 12 + k, 3, 4)
               for k in range(12)]
      self.assertEqual(sorted(sum(steps, [])), list(range(96)))
      for w in range(3):
        window = steps[4 * w:4 * w + 4]
        plain = sum((batching.batch_indices(96, 8, epoch * 12 + 4 * w + k, 3)
                     for k in range(4)), [])
        self.assertEqual(sorted(sum(window, [])), sorted(plain))
        spans = sorted((min(self.lengths[i] for i in s), max(self.lengths[i] for i in s))
                       for s in window)
        for (_, hi), (lo, _) in zip(spans, spans[1:]):
          self.assertLessEqual(hi, lo)
    # A pure function of (seed, step): a resumed run draws the same steps.
    self.assertEqual(batching.grouped_batch_indices(self.lengths, 8, 5, 3, 4),
                     batching.grouped_batch_indices(self.lengths, 8, 5, 3, 4))
    self.assertNotEqual([batching.grouped_batch_indices(self.lengths, 8, k, 3, 4)
                         for k in range(4)],
                        [batching.grouped_batch_indices(self.lengths, 8, k, 4, 4)
                         for k in range(4)])

  def test_grouping_cuts_the_padding(self):
    """Token slots of 12 steps with rows bucketed to 32 (max 448): grouped steps need
    far fewer than steps of random lengths (251 vs 371 per row here)."""
    def slots(group):
      return sum(batching.bucket_length(max(self.lengths[i] for i in idx), 448, 32)
                 for idx in (batching.grouped_batch_indices(self.lengths, 8, k, 3, group)
                             for k in range(12)))
    self.assertLess(slots(12), 0.8 * slots(1))


class BucketedSftRowsTest(absltest.TestCase):

  def test_rows_are_the_max_len_rows_cut_short(self):
    examples = _examples(np.random.default_rng(1), (20, 9, 15, 26))
    full = batching.sft_batch(examples, max_len=64, pad_id=0)
    short = batching.sft_batch(examples, max_len=64, pad_id=0, bucket=16)
    self.assertEqual(short["input_ids"].shape, (4, 32))
    for name, x in full.items():
      np.testing.assert_array_equal(short[name], x[:, :32], err_msg=name)
      self.assertEqual(float(np.abs(x[:, 32:]).sum()), 0.0, name)
    self.assertEqual(batching.sft_batch(examples, max_len=30, pad_id=0, bucket=16)
                     ["input_ids"].shape, (4, 30))  # at most max_len
    with self.assertRaisesRegex(ValueError, "longer than max_len=24"):
      batching.sft_batch(examples, max_len=24, pad_id=0, bucket=16)

  def test_sft_loss_and_gradients_within_float32_rounding(self):
    """The same argument as `tests/rl/test_length_bucket.py`: the cut columns are
    padding after every real token (causal attention, masked keys an exact 0 weight,
    loss mask 0), so both layouts sum the same nonzero terms, in an order that XLA may
    block differently for the two widths. Per leaf the gradients then differ by a few
    float32 ulps of the leaf's largest entries (`tests/models/test_packing.py`'s TOL,
    whose analysis holds here too: ~1e-7 measured there), while a shifted or dropped
    token moves them by a share of order one."""
    fmodel = rl_fixtures.functional_model("llama")
    loss = rl_fixtures.sft_loss_fn(fmodel)
    examples = _examples(np.random.default_rng(2), (20, 9, 15, 26, 12, 18))

    full = batching.sft_batch(examples, max_len=64, pad_id=0)
    short = batching.sft_batch(examples, max_len=64, pad_id=0, bucket=16)
    self.assertEqual(short["input_ids"].shape[1], 32)
    (l1, g1), (l2, g2) = (jax.value_and_grad(loss)(fmodel.params, b) for b in (full, short))
    np.testing.assert_allclose(l2, l1, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
      self.assertLessEqual(float(jnp.max(jnp.abs(b - a))), 1e-5 * float(jnp.max(jnp.abs(a))))


class TrainerSftBatchTest(absltest.TestCase):

  def test_the_config_fields_reach_the_trainers_batches(self):
    """tiny_cpu's SFT examples (60 controlled targets of 3 requests) with
    `sft.length_grouped=5`, `sft.length_bucket=64`: the trainer's steps are
    `grouped_batch_indices`' examples in rows of their bucket."""
    config = tiny_cpu.get_config()
    config.sft.update(length_grouped=5, length_bucket=64)
    config.eval.enabled = False
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader((0.5,))) as trainer:
      examples = trainer.tasks.sft_examples()
      lengths = [len(ids) for ids, _ in examples]
      s = trainer.job.sft
      widths = []
      for step in range(5):
        batch = trainer.programs.sft_batch(examples, lengths, 0, step)
        idx = batching.grouped_batch_indices(lengths, s.batch_size, step, trainer.job.seed, 5)
        want = batching.sft_batch([examples[i] for i in idx], max_len=s.max_len,
                                  pad_id=trainer.programs.pad_id, bucket=64)
        for name, x in want.items():
          np.testing.assert_array_equal(batch[name], x, err_msg=name)
        widths.append(batch["input_ids"].shape[1])
      self.assertEqual(widths, [batching.bucket_length(
          max(lengths[i] for i in batching.grouped_batch_indices(
              lengths, s.batch_size, k, trainer.job.seed, 5)), s.max_len, 64)
          for k in range(5)])
      self.assertLess(min(widths), s.max_len)

  def test_the_loss_positions_reach_the_trainers_batches_and_objective(self):
    """`sft.head_on_loss_positions`: each step's batch lists its loss positions
    (bucketed as its rows) and the SFT objective reads them."""
    config = tiny_cpu.get_config()
    config.sft.update(length_bucket=64, head_on_loss_positions=True)
    config.eval.enabled = False
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader((0.5,))) as trainer:
      examples = trainer.tasks.sft_examples()
      lengths = [len(ids) for ids, _ in examples]
      batch = trainer.programs.sft_batch(examples, lengths, 0, 0)
      np.testing.assert_array_equal(batch["loss_positions"],
                                    batching.loss_positions(batch["loss_mask"], 64))
    self.assertIn("loss_positions", sft_lib.next_token_objective(True).keys)
    self.assertNotIn("loss_positions", sft_lib.next_token_objective(False).keys)


if __name__ == "__main__":
  absltest.main()
