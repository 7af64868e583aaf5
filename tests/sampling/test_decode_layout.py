"""The dense decode's layout (docs/performance.md, "a cache buffer and the weights per
layer"): one cache buffer per layer, the layers' weights sliced out of the stack once,
the same logits either way, and no weight slice left inside the compiled decode loop."""

import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from rcca_jax.models import LlamaForCausalLM
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


if __name__ == "__main__":
  absltest.main()
