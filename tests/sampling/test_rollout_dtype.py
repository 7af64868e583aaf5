"""The sampler's bfloat16 copy (`rl.rollout_dtype`, `sampler.rollout_copy`): which
weights it rounds, the products it computes, and log-probs that are the rounded
model's own (docs/performance.md, "Decode: the sampler's weights in bfloat16")."""

import re

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from rcca_jax.models import LlamaForCausalLM
from rcca_jax.models.layers import Linear, weight_product
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.sampling import JaxSampler
from rcca_jax.sampling.sampler import rollout_copy

CFG = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  tie_word_embeddings=True)
EPS32 = 2.0 ** -24  # float32's unit roundoff


def _model(seed: int = 0) -> LlamaForCausalLM:
  return LlamaForCausalLM(CFG, rngs=nnx.Rngs(seed))


def _arrays(model: nnx.Module) -> dict[str, jax.Array]:
  return {jax.tree_util.keystr(p): a
          for p, a in jax.tree_util.tree_leaves_with_path(nnx.state(model))}


def _forward_logprobs(model: nnx.Module, prompts: list, out) -> np.ndarray:
  """[B, N] log-probs (temperature 1) of each sampled token from one full forward per
  row over prompt + sample; 0 past a row's end."""
  result = np.zeros(out.tokens.shape, np.float64)
  for i, prompt in enumerate(prompts):
    n = int(out.lengths[i])
    ids = jnp.asarray([list(prompt) + out.tokens[i, :n].tolist()], jnp.int32)
    logp = jax.nn.log_softmax(np.asarray(model(ids)[0], np.float64), axis=-1)
    start = len(prompt) - 1  # logits at position t predict token t + 1
    result[i, :n] = np.asarray(logp)[np.arange(start, start + n), out.tokens[i, :n]]
  return result


def _bf16(a) -> np.ndarray:
  return np.asarray(jnp.asarray(a, jnp.bfloat16).astype(jnp.float32), np.float64)


class RolloutCopyTest(absltest.TestCase):

  def test_rounds_kernels_and_embeddings_only_and_leaves_the_policy(self):
    model = _model()
    before = _arrays(model)
    copy = rollout_copy(model, "bfloat16")
    rounded = _arrays(copy)
    self.assertEqual(rounded.keys(), before.keys())
    for name, a in before.items():
      matmul = "kernel" in name or "embedding" in name
      self.assertEqual(rounded[name].dtype, jnp.bfloat16 if matmul else a.dtype, name)
      np.testing.assert_array_equal(np.asarray(rounded[name], np.float32),
                                    np.asarray(a.astype(rounded[name].dtype), np.float32))
    for name, a in _arrays(model).items():  # the policy itself is untouched
      self.assertEqual(a.dtype, before[name].dtype)
      self.assertIs(a, before[name])

  def test_a_narrow_weight_multiplies_in_bfloat16_and_sums_in_float32(self):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(3, 5, 64)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(64, 48)), jnp.bfloat16)
    got = np.asarray(jax.jit(weight_product)(x, w), np.float64)
    # The products of bfloat16 values are exact in float32; 64 of them summed in
    # float32 in any order are within gamma_64 * sum |x_i w_i| of the exact sum.
    xr, wr = _bf16(x), _bf16(w)
    exact = xr @ wr
    gamma = 64 * EPS32 / (1 - 64 * EPS32)
    np.testing.assert_array_less(np.abs(got - exact), gamma * (np.abs(xr) @ np.abs(wr)) + 1e-30)
    # ...and the operands reach the dot as bfloat16 (not widened back to float32).
    hlo = jax.jit(weight_product).lower(x, w).as_text()
    dots = re.findall(r"stablehlo.dot_general.*", hlo)
    self.assertLen(dots, 1)
    self.assertIn("tensor<3x5x64xbf16>, tensor<64x48xbf16>) -> tensor<3x5x48xf32>", dots[0])

  def test_a_float32_layer_is_the_plain_product(self):
    layer = Linear(16, 8, ("embed", "mlp"), rngs=nnx.Rngs(0))
    x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 16)), jnp.float32)
    np.testing.assert_array_equal(np.asarray(layer(x)),
                                  np.asarray(jnp.dot(x, layer.kernel[...])))

  def test_the_samplers_logprobs_are_the_rounded_models(self):
    model = _model()
    prompts = [list(np.random.default_rng(i).integers(3, 97, 4 + 3 * i)) for i in range(3)]
    sampler = JaxSampler(model, rollout_dtype="bfloat16")
    out = sampler.sample(prompts, n=2, max_new_tokens=12, temperature=1.0, seed=3)
    rows = [p for p in prompts for _ in range(2)]
    mask = np.arange(12)[None] < out.lengths[:, None]
    # The cached decode and a full forward of the same rounded weights compute the
    # same products and sums in other orders: within the 1e-4 that
    # tests/sampling/test_sampling.py allows the float32 model.
    own = _forward_logprobs(sampler.model, rows, out)
    np.testing.assert_allclose(out.logprobs[mask], own[mask], atol=1e-4)
    # The policy's own log-probs of the same tokens differ by the rounding.
    policy = _forward_logprobs(model, rows, out)
    self.assertGreater(np.abs(policy - own)[mask].max(), 1e-4)

  def test_update_weights_rounds_the_new_weights(self):
    sampler = JaxSampler(_model(0), rollout_dtype="bfloat16")
    new = _model(1)
    sampler.update_weights(new)
    np.testing.assert_array_equal(
        np.asarray(sampler.model.embed_tokens.embedding[...], np.float32),
        np.asarray(new.embed_tokens.embedding[...].astype(jnp.bfloat16), np.float32))
    with self.assertRaisesRegex(ValueError, "rollout_dtype='float16' must be one of"):
      JaxSampler(new, rollout_dtype="float16")


if __name__ == "__main__":
  absltest.main()
