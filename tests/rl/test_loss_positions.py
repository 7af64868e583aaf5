"""The LM head at the positions the loss reads alone (`sft.head_on_loss_positions`,
issue 50): the positions, and the same log-probs, SFT loss and gradients as the head
over every position, within float32 rounding, on the tiny Llama and the tiny Ling."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from rcca_jax.data import batching
from rcca_jax.rl import functional
from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step as ts
from tests.fixtures import rl_fixtures

# (prompt, response) token counts of four SFT examples.
EXAMPLES = ((5, 4), (3, 11), (7, 2), (2, 9))


def _examples(seed: int = 0):
  rng = np.random.default_rng(seed)
  out = []
  for prompt, response in EXAMPLES:
    ids = [int(t) for t in rng.integers(2, 64, prompt + response)]
    out.append((ids, [0] * prompt + [1] * response))
  return out


class LayoutTest(absltest.TestCase):

  def test_each_rows_targets_in_order_padded_with_zero(self):
    mask = np.asarray([[0, 0, 1, 1, 0, 0],
                       [1, 1, 1, 0, 1, 0],    # position 0 is never a target
                       [0, 0, 0, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(batching.loss_positions(mask),
                                  [[2, 3, 0, 0, 0, 0], [1, 2, 4, 0, 0, 0],
                                   [0, 0, 0, 0, 0, 0]])
    # At most 3 targets in a row: 4 columns with buckets of 2, the row's 6 at most.
    np.testing.assert_array_equal(batching.loss_positions(mask, bucket=2),
                                  [[2, 3, 0, 0], [1, 2, 4, 0], [0, 0, 0, 0]])
    self.assertEqual(batching.loss_positions(mask, bucket=5).shape, (3, 5))
    self.assertEqual(batching.loss_positions(mask, bucket=8).shape, (3, 6))

  def test_packed_rows_list_every_segments_targets(self):
    batch = batching.packed_sft_batch(_examples(), rows=2, max_len=24, pad_id=0)
    positions = batching.loss_positions(batch["loss_mask"])
    for row in range(2):
      want = np.flatnonzero(batch["loss_mask"][row])
      np.testing.assert_array_equal(positions[row, :len(want)], want)
      self.assertFalse(positions[row, len(want):].any())


  def test_positions_outside_the_rows_are_refused(self):
    batch = batching.sft_batch(_examples(), max_len=16, pad_id=0)
    keys = sft_lib.SFT_KEYS + sft_lib.POSITION_KEYS
    good = batching.loss_positions(batch["loss_mask"])
    self.assertEqual(ts.numpy_batch(dict(batch, loss_positions=good), keys)
                     ["loss_positions"].dtype, np.int32)
    for bad in (good + 16, good - 1, good[:2], good.astype(np.float32)):
      with self.assertRaisesRegex(ValueError, r"loss_positions .* positions in \[0, 16\)"):
        ts.numpy_batch(dict(batch, loss_positions=bad), keys)


class SameLossTest(parameterized.TestCase):

  @parameterized.parameters(("llama", 0, 0), ("ling", 0, 0), ("llama", 4, 0),
                            ("ling", 4, 3))
  def test_logprobs_loss_and_gradients_within_float32_rounding(self, family, bucket,
                                                               chunk):
    """Both compute the same terms: each target's log-prob is the log-softmax of the
    head at the hidden state before it, which the full-sequence model computes the same
    way in both; only the head's matmul runs over fewer rows (its blocking, hence the
    order of its float32 sums over the hidden size, may differ) and the weight
    gradients sum over fewer positions. So the two gradients differ by at most 2 *
    gamma_n of the terms' magnitudes sum_bt |dL/dlogp_bt| |dlogp_bt/dtheta|, n counted
    at the full batch's width (`rl_fixtures.assert_within_rounding`); a target read
    one position off, or a row's targets dropped, moves entries by a share of order
    one of that scale. With `chunk` the head runs that many positions at a time
    (`logits_chunk`) on both sides."""
    batch = batching.sft_batch(_examples(), max_len=16, pad_id=0, bucket=bucket)
    positions = dict(batch, loss_positions=batching.loss_positions(batch["loss_mask"],
                                                                   bucket))
    fmodel = rl_fixtures.functional_model(family)
    out = {}
    for name, b, keys in (("all", batch, sft_lib.SFT_KEYS),
                          ("selected", positions, sft_lib.SFT_KEYS + sft_lib.POSITION_KEYS)):
      objective = sft_lib.NextTokenObjective(keys)
      grads_fn = jax.jit(ts.make_gradient_fn(fmodel, objective, logits_chunk=chunk))
      logp_fn = jax.jit(lambda p, s, x: fmodel.batch_logprobs(p, s, x, chunk)[:2])
      out[name] = (grads_fn(fmodel.params, fmodel.model_state, ts.numpy_batch(b, keys)),
                   logp_fn(fmodel.params, fmodel.model_state, ts.numpy_batch(b, keys)))
    (loss0, grads0, _, _), (logp0, ent0) = out["all"]
    (loss1, grads1, _, _), (logp1, ent1) = out["selected"]
    mask = batch["loss_mask"] > 0
    mask[:, 0] = False
    # Log-probs and entropies: log-softmaxes of logits that are sums of `hidden` terms
    # of magnitude ~1: well within 1e-5; elsewhere exactly 0.
    np.testing.assert_allclose(np.where(mask, logp0, 0.0), logp1, atol=1e-5)
    np.testing.assert_allclose(np.where(mask, ent0, 0.0), ent1, atol=1e-5)
    self.assertFalse(np.asarray(logp1)[~mask].any())
    self.assertGreater(abs(float(loss0)), 1e-3)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-5)
    rl_fixtures.assert_within_rounding(grads1, grads0, _sft_term_scale(fmodel, batch),
                                       rl_fixtures.family_reduction_length(family, batch))


def _sft_term_scale(fmodel, batch) -> list[float]:
  """Per gradient leaf, max over entries of sum_bt |dL/dlogp_bt| |dlogp_bt/dtheta|
  for the SFT loss (dL/dlogp = -loss_mask / tokens)."""
  ids, attention = jnp.asarray(batch["input_ids"]), jnp.asarray(batch["attention_mask"])

  def logp_of(params):
    return fmodel.logprobs(params, fmodel.model_state, ids, attention)[0]

  mask = np.asarray(batch["loss_mask"], np.float64)
  dlogp = mask / mask.sum()
  jacobian = jax.jit(jax.jacrev(logp_of))(fmodel.params)
  return [float(np.max(np.einsum("bt,bt...->...", dlogp, np.abs(np.asarray(j, np.float64)))))
          for j in jax.tree.leaves(jacobian)]


if __name__ == "__main__":
  absltest.main()
