"""SFT packing (issue 50): several examples in one row of the dense model, each its
own segment (`attention_mask` = segment ids), give each example's own log-probs, and a
packed SFT step the loss and gradients of the one-example-per-row step."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from rcca_jax.data import batching
from rcca_jax.models import LlamaForCausalLM
from rcca_jax.models import llama
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.rl import train_step
from tests.fixtures import rl_fixtures

# Per position the packed and the one-per-row forward do the same arithmetic, except
# that XLA may block the [T, T] attention and the matmuls differently for the two row
# shapes, and masked keys add exact zeros to the softmax sums: differences are a few
# float32 ulps of values of order 1-10 through 2 layers (~1e-6); 1e-5 leaves a margin
# while any leak across segments (another example's keys, shifted positions) moves
# log-probs by 1e-2 or more.
TOL = 1e-5


def _model() -> LlamaForCausalLM:
  cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=128)
  return LlamaForCausalLM(cfg, rngs=nnx.Rngs(0))


def _examples(rng: np.random.Generator, lengths) -> list[tuple[list[int], list[int]]]:
  out = []
  for n in lengths:
    prompt = int(rng.integers(2, n - 1))
    out.append((list(rng.integers(3, 97, n)), [0] * prompt + [1] * (n - prompt)))
  return out


class SegmentsTest(absltest.TestCase):

  def test_positions_of_a_plain_mask_are_unchanged(self):
    mask = jnp.asarray([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 0, 1, 0]], jnp.float32)
    expected = jnp.where(mask > 0, jnp.cumsum(mask, axis=1) - 1, 0)
    np.testing.assert_array_equal(llama.segment_positions(mask), expected)

  def test_positions_restart_in_each_segment(self):
    segments = jnp.asarray([[1, 1, 1, 2, 2, 3, 0, 0]], jnp.float32)
    np.testing.assert_array_equal(llama.segment_positions(segments),
                                  [[0, 1, 2, 0, 1, 0, 0, 0]])

  def test_packed_row_gives_each_examples_own_logits(self):
    model = _model()
    examples = _examples(np.random.default_rng(0), (9, 14, 6))
    packed = batching.packed_sft_batch(examples, rows=1, max_len=32, pad_id=0)
    self.assertIsNotNone(packed)
    np.testing.assert_array_equal(packed["attention_mask"][0, :29],
                                  [1] * 9 + [2] * 14 + [3] * 6)
    got = model(jnp.asarray(packed["input_ids"]),
                attention_mask=jnp.asarray(packed["attention_mask"]))
    at = 0
    for ids, _ in examples:
      alone = model(jnp.asarray([ids]))
      np.testing.assert_allclose(got[0, at:at + len(ids)], alone[0], rtol=TOL, atol=TOL)
      at += len(ids)


class PackingTest(absltest.TestCase):

  def test_first_fit_longest_first(self):
    self.assertEqual(batching.first_fit([5, 9, 4, 3], rows=2, max_len=12),
                     [[1, 3], [0, 2]])
    self.assertIsNone(batching.first_fit([7, 7, 7], rows=2, max_len=12))

  def test_packed_batch_layout_and_fallback(self):
    examples = _examples(np.random.default_rng(1), (10, 12, 8, 11))
    packed = batching.sft_rows(examples, rows=2, max_len=24, pad_id=0)
    self.assertEqual(packed["input_ids"].shape, (2, 24))
    self.assertEqual(packed["loss_mask"].sum(), sum(sum(m) for _, m in examples))
    self.assertEqual(sorted(packed["attention_mask"].max(axis=1)), [2, 2])
    plain = batching.sft_rows(examples, rows=1, max_len=24, pad_id=0)  # does not fit
    np.testing.assert_array_equal(plain["attention_mask"].max(axis=1), [1, 1, 1, 1])
    np.testing.assert_array_equal(
        plain["input_ids"], batching.sft_batch(examples, max_len=24, pad_id=0)["input_ids"])
    with self.assertRaisesRegex(ValueError, "example 0: 10 tokens"):
      batching.packed_sft_batch(examples, rows=2, max_len=9, pad_id=0)

  def test_packed_rows(self):
    lengths = list(range(100, 300))  # mean 200: about 2 per row of 448
    rows = batching.packed_rows(lengths, 8, 448)
    self.assertBetween(rows, 4, 6)
    self.assertEqual(batching.packed_rows(lengths, 8, 448, multiple=4), 8 if rows > 4 else 4)
    self.assertEqual(batching.packed_rows([440] * 10, 8, 448), 8)  # nothing to save


class PackedStepTest(absltest.TestCase):

  def test_sft_loss_and_gradients_match_one_example_per_row(self):
    fmodel = train_step.FunctionalModel(_model())
    loss = rl_fixtures.sft_loss_fn(fmodel)
    examples = _examples(np.random.default_rng(2), (20, 9, 15, 26, 12, 18))

    plain = batching.sft_batch(examples, max_len=32, pad_id=0)
    packed = batching.packed_sft_batch(examples, rows=4, max_len=32, pad_id=0)
    self.assertIsNotNone(packed)
    (l1, g1), (l2, g2) = (jax.value_and_grad(loss)(fmodel.params, b)
                          for b in (plain, packed))
    np.testing.assert_allclose(l2, l1, rtol=TOL)
    # A gradient entry sums per-token terms in another order in the two layouts: its
    # rounding scales with the leaf's largest entries, not its own (entries that nearly
    # cancel), so each leaf is compared at TOL of its largest magnitude (measured: ~1e-7).
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
      self.assertLessEqual(float(jnp.max(jnp.abs(b - a))), TOL * float(jnp.max(jnp.abs(a))))


if __name__ == "__main__":
  absltest.main()
