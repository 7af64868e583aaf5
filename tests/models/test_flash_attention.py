"""Blockwise causal attention: values and gradients against a dense numpy reference."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized
from flax import nnx

from rcca_jax.models import flash_attention, mla
from rcca_jax.models.config import LingConfig

jax.config.update("jax_default_matmul_precision", "highest")


def _reference(q, k, v, key_mask, scale, start=0):
  """Dense softmax attention in float64 numpy, query i at slot `start + i` of k's;
  rows with no allowed key give zeros."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  t, slots = q.shape[1], k.shape[1]
  s = np.einsum("bthd,bshd->bhts", q, k) * scale
  causal = np.arange(slots)[None, :] <= start + np.arange(t)[:, None]
  allowed = causal[None, None] & key_mask[:, None, None, :]
  s = np.where(allowed, s, -np.inf)
  m = s.max(-1, keepdims=True)
  m = np.where(np.isfinite(m), m, 0.0)
  p = np.where(allowed, np.exp(s - m), 0.0)
  denom = p.sum(-1, keepdims=True)
  p = p / np.where(denom > 0, denom, 1.0)
  return np.einsum("bhts,bshd->bthd", p, v)


def _inputs(seed, b=2, t=37, h=3, dk=6, dv=5):
  ks = jax.random.split(jax.random.key(seed), 4)
  q = jax.random.normal(ks[0], (b, t, h, dk))
  k = jax.random.normal(ks[1], (b, t, h, dk))
  v = jax.random.normal(ks[2], (b, t, h, dv))
  mask = np.ones((b, t), bool)
  mask[1, :4] = False   # left padding
  mask[1, 20:23] = False  # holes
  return q, k, v, mask


class FlashAttentionTest(parameterized.TestCase):

  @parameterized.parameters((8,), (16,), (37,), (64,))
  def test_matches_dense_reference(self, block):
    q, k, v, mask = _inputs(0)
    out = flash_attention.causal_attention(q, k, v, jnp.asarray(mask), 0.4, block)
    np.testing.assert_allclose(out, _reference(q, k, v, mask, 0.4), atol=2e-6, rtol=1e-5)

  @parameterized.parameters((8,), (13,))
  def test_gradients_match_dense_reference(self, block):
    q, k, v, mask = _inputs(1)
    cot = jax.random.normal(jax.random.key(9), v.shape)

    def dense(q, k, v):
      t = q.shape[1]
      s = jnp.einsum("bthd,bshd->bhts", q, k) * 0.4
      allowed = jnp.tril(jnp.ones((t, t), bool))[None, None] & mask[:, None, None, :]
      s = jnp.where(allowed, s, -jnp.inf)
      m = jax.lax.stop_gradient(jnp.max(jnp.where(allowed, s, -1e30), -1, keepdims=True))
      p = jnp.where(allowed, jnp.exp(s - m), 0.0)
      p = p / jnp.maximum(p.sum(-1, keepdims=True), 1e-30)
      return jnp.sum(jnp.einsum("bhts,bshd->bthd", p, v) * cot)

    def flash(q, k, v):
      return jnp.sum(flash_attention.causal_attention(q, k, v, jnp.asarray(mask), 0.4, block)
                     * cot)

    np.testing.assert_allclose(flash(q, k, v), dense(q, k, v), rtol=1e-5)
    for got, want in zip(jax.grad(flash, (0, 1, 2))(q, k, v), jax.grad(dense, (0, 1, 2))(q, k, v)):
      np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    # Finite differences on one coordinate of q, independent of both implementations.
    eps = 1e-3
    e = jnp.zeros_like(q).at[1, 30, 2, 4].set(eps)
    fd = (flash(q + e, k, v) - flash(q - e, k, v)) / (2 * eps)
    self.assertAlmostEqual(float(jax.grad(flash)(q, k, v)[1, 30, 2, 4]), float(fd), places=3)

  def test_bfloat16_inputs_stay_close(self):
    q, k, v, mask = _inputs(2, t=64)
    bf = [x.astype(jnp.bfloat16) for x in (q, k, v)]
    out = flash_attention.causal_attention(*bf, jnp.asarray(mask), 0.4, 16)
    self.assertEqual(out.dtype, jnp.bfloat16)
    ref = _reference(*[np.asarray(x.astype(jnp.float32)) for x in bf], mask, 0.4)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=3e-2)


class CachedAttentionTest(parameterized.TestCase):
  """New tokens over a decoding cache: query i at slot start + i of S >= T slots."""

  @parameterized.product(start=(0, 15, 21), block=(8, 16, 64))
  def test_matches_dense_reference(self, start, block):
    ks = jax.random.split(jax.random.key(4), 3)
    q = jax.random.normal(ks[0], (2, 29, 3, 6))
    k, v = jax.random.normal(ks[1], (2, 50, 3, 6)), jax.random.normal(ks[2], (2, 50, 3, 5))
    mask = np.ones((2, 50), bool)
    mask[1, :7] = False  # a left-padded prompt
    mask[0, 45:] = False  # slots not written yet
    attend = jax.jit(lambda q, k, v, start: flash_attention.cached_causal_attention(
        q, k, v, jnp.asarray(mask), start, 0.4, block))
    out = attend(q, k, v, jnp.int32(start))
    # Unit-scale inputs, sums of at most 50 terms: float32 rounding far below 2e-6.
    np.testing.assert_allclose(out, _reference(q, k, v, mask, 0.4, start), atol=2e-6,
                               rtol=1e-5)

  def test_gradients_match_dense_reference(self):
    ks = jax.random.split(jax.random.key(5), 4)
    q = jax.random.normal(ks[0], (2, 21, 2, 4))
    k, v = jax.random.normal(ks[1], (2, 40, 2, 4)), jax.random.normal(ks[2], (2, 40, 2, 3))
    cot = jax.random.normal(ks[3], (2, 21, 2, 3))
    mask = np.ones((2, 40), bool)
    mask[0, :5] = False
    start = 17
    allowed = ((np.arange(40)[None, :] <= start + np.arange(21)[:, None])[None, None]
               & mask[:, None, None, :])

    def dense(q, k, v):
      s = jnp.where(allowed, jnp.einsum("bthd,bshd->bhts", q, k) * 0.4, -jnp.inf)
      return jnp.sum(jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, -1), v) * cot)

    def blocked(q, k, v):
      return jnp.sum(flash_attention.cached_causal_attention(
          q, k, v, jnp.asarray(mask), jnp.int32(start), 0.4, 8) * cot)

    for got, want in zip(jax.grad(blocked, (0, 1, 2))(q, k, v),
                         jax.grad(dense, (0, 1, 2))(q, k, v)):
      np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


class MLABlockwiseTest(absltest.TestCase):

  def test_blockwise_layer_equals_dense_layer(self):
    base = dict(vocab_size=32, hidden_size=48, num_hidden_layers=1, num_attention_heads=3,
                kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                layer_types=("full_attention",), mlp_layer_types=("dense",))
    dense = mla.MultiHeadLatentAttention(LingConfig(**base, attention_block_size=0),
                                         rngs=nnx.Rngs(0))
    blockwise = mla.MultiHeadLatentAttention(LingConfig(**base, attention_block_size=8),
                                             rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(3), (2, 30, 48))
    mask = jnp.ones((2, 30), jnp.int32).at[1, :5].set(0)
    cos, sin = mla.rope_cos_sin(dense.cfg, jnp.cumsum(mask, 1) - 1, jnp.float32)
    got = blockwise(x, cos, sin, mask)
    want = dense(x, cos, sin, mask)
    # Rows of left padding attend to nothing real; only real rows carry loss.
    np.testing.assert_allclose(got[0], want[0], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got[1, 5:], want[1, 5:], atol=1e-5, rtol=1e-5)


  def test_cached_call_of_many_tokens_equals_dense(self):
    """A prompt's responses over its decoding cache (`rl.shared_prefix`): the
    blockwise cached call against the dense one, outputs and gradients."""
    base = dict(vocab_size=32, hidden_size=48, num_hidden_layers=1, num_attention_heads=3,
                kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                layer_types=("full_attention",), mlp_layer_types=("dense",))
    layers = [mla.MultiHeadLatentAttention(LingConfig(**base, attention_block_size=size),
                                           rngs=nnx.Rngs(0)) for size in (0, 8)]
    prompt = jax.random.normal(jax.random.key(6), (2, 10, 48))
    new = jax.random.normal(jax.random.key(7), (2, 27, 48))
    prompt_mask = jnp.ones((2, 10), bool).at[1, :4].set(False)
    slot_mask = jnp.concatenate([prompt_mask, jnp.ones((2, 27), bool)], axis=1)
    positions = jnp.cumsum(slot_mask, 1) - 1
    cos, sin = mla.rope_cos_sin(layers[0].cfg, positions, jnp.float32)

    def responses(layer, new):
      cache = mla.MLACache.zeros(layer.cfg, 2, 37, jnp.float32)
      _, cache = layer.decode(prompt, cos[:, :10], sin[:, :10], cache, jnp.int32(0),
                              slot_mask.at[:, 10:].set(False))
      out, _ = layer.decode(new, cos[:, 10:], sin[:, 10:], cache, jnp.int32(10), slot_mask)
      return out

    want, got = (responses(layer, new) for layer in layers)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    cot = jax.random.normal(jax.random.key(8), want.shape)
    grads = [jax.grad(lambda x, layer=layer: jnp.sum(responses(layer, x) * cot))(new)
             for layer in layers]
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-5, rtol=1e-4)


if __name__ == "__main__":
  absltest.main()
