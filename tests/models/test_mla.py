"""Multi-head latent attention: RoPE, YaRN, cached (absorbed) vs full attention."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized
from flax import nnx
from transformers import BailingHybridConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from rcca_jax.models import mla
from rcca_jax.models.config import LingConfig

jax.config.update("jax_default_matmul_precision", "highest")

YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64,
        "mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}


def _cfg(**kw):
  base = dict(vocab_size=32, hidden_size=48, num_hidden_layers=1, num_attention_heads=3,
              kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
              layer_types=("full_attention",), mlp_layer_types=("dense",))
  base.update(kw)
  return LingConfig(**base)


class RopeTest(parameterized.TestCase):

  def test_interleaved_rotation_preserves_relative_dot_products(self):
    cfg = _cfg()
    x = jax.random.normal(jax.random.key(0), (1, 2, 1, 8))
    def rotated(pos):
      cos, sin = mla.rope_cos_sin(cfg, jnp.array([[pos, pos + 3]]), jnp.float32)
      r = mla.apply_rope_interleaved(x, cos, sin)
      return float(jnp.vdot(r[0, 0], r[0, 1]))
    self.assertAlmostEqual(rotated(0), rotated(11), places=4)
    # Pair (x0, x1) at angle theta: complex multiplication by e^{i theta}.
    cos, sin = mla.rope_cos_sin(cfg, jnp.array([[5]]), jnp.float32)
    y = mla.apply_rope_interleaved(x[:, :1], cos, sin)
    z = (x[0, 0, 0, 0] + 1j * x[0, 0, 0, 1]) * np.exp(1j * 5.0)
    np.testing.assert_allclose([y[0, 0, 0, 0], y[0, 0, 0, 4]], [z.real, z.imag], rtol=1e-5)

  @parameterized.parameters((None,), (YARN,))
  def test_frequencies_match_transformers(self, rope):
    hf_rope = dict(rope or {"rope_type": "default"}, rope_theta=10000.0)
    hf = BailingHybridConfig(qk_rope_head_dim=8, rope_parameters=hf_rope,
                             max_position_embeddings=512, pad_token_id=0, vocab_size=8)
    if rope is None:
      from transformers.models.bailing_hybrid.modeling_bailing_hybrid import (
        BailingHybridRotaryEmbedding)
      inv, factor = BailingHybridRotaryEmbedding.compute_default_rope_parameters(hf)
    else:
      inv, factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    cfg = _cfg(rope_theta=10000.0, rope_parameters=rope, max_position_embeddings=512)
    ours, our_factor = mla.rope_frequencies(cfg)
    np.testing.assert_allclose(ours, inv.numpy(), rtol=1e-6)
    self.assertAlmostEqual(our_factor, factor, places=6)

  def test_yarn_scales_softmax_by_mscale_squared(self):
    cfg = _cfg(rope_parameters=YARN)
    m = 0.1 * np.log(8.0) + 1.0
    self.assertAlmostEqual(cfg.attention_scale, 16 ** -0.5 * m * m, places=7)


class AttentionTest(parameterized.TestCase):

  @parameterized.parameters(None, 16)
  def test_latent_cache_decode_equals_full_attention(self, q_lora_rank):
    cfg = _cfg(q_lora_rank=q_lora_rank)
    layer = mla.MultiHeadLatentAttention(cfg, rngs=nnx.Rngs(0))
    b, t = 2, 7
    x = jax.random.normal(jax.random.key(1), (b, t, 48))
    positions = jnp.broadcast_to(jnp.arange(t), (b, t))
    cos, sin = mla.rope_cos_sin(cfg, positions, jnp.float32)
    full = layer(x, cos, sin)
    cache = mla.MLACache.zeros(cfg, b, 10, jnp.float32)
    slot_mask = jnp.zeros((b, 10), bool)
    outs = []
    for start, stop in ((0, 4), (4, 5), (5, 7)):
      slot_mask = slot_mask.at[:, start:stop].set(True)
      y, cache = layer.decode(x[:, start:stop], cos[:, start:stop], sin[:, start:stop], cache,
                              jnp.int32(start), slot_mask)
      outs.append(y)
    np.testing.assert_allclose(jnp.concatenate(outs, 1), full, atol=1e-5, rtol=0)
    self.assertEqual(cache.latent.shape, (b, 10, cfg.kv_lora_rank))
    self.assertEqual(cache.rope_key.shape, (b, 10, cfg.qk_rope_head_dim))

  def test_masked_keys_are_ignored(self):
    cfg = _cfg()
    layer = mla.MultiHeadLatentAttention(cfg, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(2), (1, 6, 48))
    mask = jnp.array([[0, 0, 1, 1, 1, 1]], bool)
    positions = jnp.array([[0, 0, 0, 1, 2, 3]])
    cos, sin = mla.rope_cos_sin(cfg, positions, jnp.float32)
    padded = layer(x, cos, sin, mask)
    cos2, sin2 = mla.rope_cos_sin(cfg, jnp.arange(4)[None], jnp.float32)
    unpadded = layer(x[:, 2:], cos2, sin2)
    np.testing.assert_allclose(padded[:, 2:], unpadded, atol=1e-5, rtol=0)
    self.assertTrue(bool(jnp.isfinite(padded).all()))


if __name__ == "__main__":
  absltest.main()
