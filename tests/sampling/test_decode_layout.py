"""The dense decode's layout (docs/performance.md, "a cache buffer and the weights per
layer", "Decode: one token's attention"): one cache buffer per layer, the layers'
weights sliced out of the stack once, the same logits either way, no weight slice left
inside the compiled decode loop, and a decode step's attention as broadcast products
(no batched dot over the cache) equal to the einsum's within float32 rounding."""

import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from rcca_jax.models import LlamaForCausalLM
from rcca_jax.models import llama
from rcca_jax.models.llama_config import LlamaConfig

# `rcca_jax.sampling.generate` is also the name of the function the package exports.
generate_lib = importlib.import_module("rcca_jax.sampling.generate")

CFG = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def _model() -> LlamaForCausalLM:
  return LlamaForCausalLM(CFG, rngs=nnx.Rngs(0))


def lowered_decode(model: LlamaForCausalLM, rows: int) -> jax.stages.Lowered:
  """`_decode` of `model` (Gumbel sampling, 8 tokens, a 32-slot cache), lowered."""
  graphdef, params = nnx.split(model)
  cache = generate_lib.init_cache(model, rows, 32)
  keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(0), jnp.arange(rows))
  args = (generate_lib._Graph(graphdef, model.config), params, cache,
          jnp.zeros((rows,), jnp.int32), keys, jnp.zeros((rows,), bool), jnp.int32(0),
          jnp.int32(-1), jnp.int32(8), jnp.float32(1.0), jnp.float32(1.0),
          jnp.int32(0), jnp.asarray([1]), jnp.int32(0))
  return generate_lib._decode.lower(*args, mode=generate_lib.SAMPLE, buffer_len=8,
                                    mesh=None)


class DecodeLayoutTest(absltest.TestCase):

  def test_a_cache_buffer_per_layer(self):
    cache = _model().init_cache(2, 16)
    self.assertEqual(cache.groups, ())
    self.assertLen(cache.prefix, CFG.num_hidden_layers)
    for layer in cache.prefix:
      self.assertEqual(layer.keys.shape, (2, CFG.num_key_value_heads, 16, CFG.head_dim))
    self.assertLen({id(layer.keys) for layer in cache.prefix}, CFG.num_hidden_layers)

  def test_split_layers_give_the_same_logits_and_cache(self):
    # The same arithmetic on the same values: bitwise equal.
    model = _model()
    ids = jnp.asarray(np.random.default_rng(0).integers(3, 97, (2, 5)), jnp.int32)
    plain, plain_cache = model(ids, cache=model.init_cache(2, 8))
    split, split_cache = model(ids, cache=model.init_cache(2, 8),
                               layers=model.split_layers())
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(split))
    for a, b in zip(jax.tree.leaves(plain_cache), jax.tree.leaves(split_cache)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    stacked = nnx.split(model.layers)[1]
    one = model.split_layers()[1]
    for a, b in zip(jax.tree.leaves(stacked), jax.tree.leaves(one)):
      np.testing.assert_array_equal(np.asarray(a)[1], np.asarray(b))

  def test_no_weight_is_sliced_inside_the_decode_loop(self):
    model = _model()
    hlo = lowered_decode(model, rows=4).compile().as_text()
    # Per-layer weight shapes of the stack (e.g. f32[32,64] of the MLP).
    shapes = {"f32[%s]" % ",".join(map(str, a.shape[1:]))
              for a in jax.tree.leaves(nnx.split(model.layers)[1]) if a.ndim == 3}
    in_loop = [line for line in hlo.splitlines()
               if 'op_name="jit(_decode)/while/body/slice"' in line
               and (m := re.search(r"= (f32\[[\d,]*\])", line)) and m.group(1) in shapes]
    self.assertEqual(in_loop, [])
    # The slices exist, before the loop: the check above reads the right program.
    self.assertTrue(any('op_name="jit(_decode)/slice"' in line for line in hlo.splitlines()))

  def test_one_token_attention_equals_the_einsum(self):
    rng = np.random.default_rng(1)
    b, heads, kv, s, d = 3, 6, 2, 40, 16
    q = jnp.asarray(rng.standard_normal((b, 1, heads, d)), jnp.float32)
    keys, values = (jnp.asarray(rng.standard_normal((b, kv, s, d)), jnp.float32)
                    for _ in range(2))
    allowed = jnp.asarray(rng.random((b, s)) < 0.7).at[:, 0].set(True)
    scale = d ** -0.5
    want = llama.grouped_attention(q, keys, values, allowed[:, None], scale,
                                   kv_layout="bksd")
    got = llama.one_token_attention(q, keys, values, allowed, scale)
    # Rounding: a score is a sum of D products, off by at most g_D * sum|q k| * scale
    # (g_n = n u / (1 - n u), u = 2^-24); softmax turns a score error e into a relative
    # error of at most 2e in each probability; the output, a sum of S terms p v, adds
    # g_S * max|v|. The two orders may each be off by that much: twice the bound.
    u = 2.0 ** -24
    gamma = lambda n: n * u / (1 - n * u)
    qk = np.abs(np.asarray(q).reshape(b, kv, heads // kv, d)[:, :, :, None, :]
                * np.asarray(keys)[:, :, None]).sum(-1).max() * scale
    vmax = float(np.abs(np.asarray(values)).max())
    bound = 2 * (vmax * 2 * gamma(d) * qk + gamma(s) * vmax)
    diff = float(np.abs(np.asarray(got) - np.asarray(want)).max())
    self.assertLessEqual(diff, bound)
    self.assertEqual(got.shape, want.shape)
    # A masked slot does not count: changing its value changes nothing.
    hidden = int(np.argmin(np.asarray(allowed[0])))
    moved = llama.one_token_attention(q, keys, values.at[0, :, hidden].add(100.0),
                                      allowed, scale)
    np.testing.assert_array_equal(np.asarray(moved), np.asarray(got))

  def test_the_decode_loop_has_no_batched_dot_over_the_cache(self):
    # The compiled program's ops name the einsum they come from.
    hlo = lowered_decode(_model(), rows=4).compile().as_text()
    self.assertNotIn("bkgts,bksd->btkgd", hlo)
    # The full-sequence path (the prompt's prefill) still has it: the check reads
    # names that exist.
    model = _model()
    full = jax.jit(lambda ids: model(ids)).lower(jnp.ones((1, 4), jnp.int32))
    self.assertIn("bkgts,bskd->btkgd", full.compile().as_text())


if __name__ == "__main__":
  absltest.main()
