"""The canon convolution of the dense model (`LlamaConfig.canon_kernel`): zero, it is
the plain model; learned, the full forward, packed segments, the cached decode and the
sampler agree; its checkpoints round-trip; a zero one gets gradients."""

import json
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from flax import nnx

from rcca_jax.data import batching
from rcca_jax.models import LlamaForCausalLM, llama, llama_checkpoint
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.sampling import generate

# The cached decode, a packed row and a row alone compute every position's canon
# convolution bitwise alike (the same float32 terms summed in the same order,
# `canon_mix`); what differs is XLA's blocking of the attention and matmuls for the
# different shapes: a few float32 ulps of logits of order 1-10 through 2 layers (~1e-6).
# 1e-5 leaves a margin, while a window that reads the wrong token (padding, another
# segment, a stale buffer) moves logits by 1e-2 or more with these weights.
TOL = 1e-5
VOCAB = 97


def _plain() -> LlamaForCausalLM:
  cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=128)
  return LlamaForCausalLM(cfg, rngs=nnx.Rngs(0))


def _learned(kernel: int = 4) -> LlamaForCausalLM:
  """A canon model whose convolution is not zero (as after training)."""
  model = llama_checkpoint.with_canon(_plain(), kernel)
  shape = model.layers.canon[...].shape
  model.layers.canon.set_value(0.5 * jax.random.normal(jax.random.key(1), shape))
  return model


def _ids(seed: int, batch: int, length: int) -> jax.Array:
  return jnp.asarray(np.random.default_rng(seed).integers(3, VOCAB, (batch, length)),
                     jnp.int32)


class CanonTest(absltest.TestCase):

  def test_zero_canon_is_the_plain_model(self):
    plain = _plain()
    canon = llama_checkpoint.with_canon(plain, 4)
    ids = _ids(0, 2, 20)
    np.testing.assert_array_equal(np.asarray(canon(ids)), np.asarray(plain(ids)))
    self.assertEqual(canon.layers.canon[...].shape, (2, 4, 32))

  def test_learned_canon_changes_the_logits(self):
    ids = _ids(0, 2, 20)
    diff = np.abs(np.asarray(_learned()(ids)) - np.asarray(_plain()(ids)))
    self.assertGreater(diff.max(), 1e-2)

  def test_zero_canon_gets_gradients(self):
    model = llama_checkpoint.with_canon(_plain(), 3)
    ids = _ids(2, 2, 12)
    loss = lambda m: -jnp.mean(jax.nn.log_softmax(m(ids))[:, :-1, :].max(-1))
    grads = nnx.grad(loss)(model)
    self.assertGreater(float(jnp.abs(grads.layers.canon[...]).max()), 0.0)

  def test_window_reads_only_its_own_segment(self):
    h = jnp.arange(1.0, 7.0).reshape(1, 6, 1)
    weight = jnp.asarray([[100.0], [10.0], [1.0]])  # oldest, previous, current
    segments = jnp.asarray([[0, 1, 1, 1, 2, 2]])
    np.testing.assert_array_equal(
        np.asarray(llama.canon_mix(h, weight, segments))[0, :, 0],
        [1, 2, 20 + 3, 200 + 30 + 4, 5, 50 + 6])

  def test_packed_row_gives_each_examples_own_logits(self):
    model = _learned()
    rng = np.random.default_rng(3)
    examples = [(list(rng.integers(3, VOCAB, n)), [0] * 2 + [1] * (n - 2))
                for n in (9, 14, 6)]
    packed = batching.packed_sft_batch(examples, rows=1, max_len=32, pad_id=0)
    got = np.asarray(model(jnp.asarray(packed["input_ids"]),
                           attention_mask=jnp.asarray(packed["attention_mask"])))
    at = 0
    for ids, _ in examples:
      alone = np.asarray(model(jnp.asarray([ids])))
      np.testing.assert_allclose(got[0, at:at + len(ids)], alone[0], rtol=TOL, atol=TOL)
      at += len(ids)

  def test_left_padding_then_cached_decode_match_the_full_forward(self):
    model = _learned()
    ids = _ids(4, 2, 14)
    mask = np.ones((2, 14), bool)
    mask[0, :3] = False
    full = np.asarray(model(ids, attention_mask=jnp.asarray(mask)))
    for i, start in ((0, 3), (1, 0)):  # left padding changes nothing for the real tokens
      alone = np.asarray(model(ids[i:i + 1, start:]))
      np.testing.assert_allclose(full[i, mask[i]], alone[0], rtol=TOL, atol=TOL)
    cache = model.init_cache(2, 16)
    logits, cache = model(ids[:, :9], attention_mask=jnp.asarray(mask[:, :9]), cache=cache)
    steps = [np.asarray(logits)]
    for t in range(9, 14):
      logits, cache = model(ids[:, t:t + 1], attention_mask=jnp.ones((2, 1), bool),
                            cache=cache)
      steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(steps, 1)[mask], full[mask], rtol=TOL,
                               atol=TOL)

  def test_sampler_with_chunked_prefill_and_compaction_matches_the_forward(self):
    model = _learned()
    rng = np.random.default_rng(5)
    prompts = [rng.integers(3, VOCAB, size=n).tolist() for n in (3, 9, 6)]
    first = generate(model, prompts, max_new_tokens=8, temperature=0.0, prefill_chunk=4)
    eos = int(first.tokens[1, 2])  # row 1 stops early; the batch is compacted
    outs = [generate(model, prompts, max_new_tokens=8, temperature=0.0, prefill_chunk=4,
                     eos_ids=(eos,), compact=compact) for compact in (True, False)]
    np.testing.assert_array_equal(outs[0].tokens, outs[1].tokens)
    self.assertLess(int(outs[0].lengths.min()), int(outs[0].lengths.max()))
    for i, prompt in enumerate(prompts):
      n = int(first.lengths[i])
      seq = jnp.asarray([prompt + first.tokens[i, :n].tolist()], jnp.int32)
      logp = jax.nn.log_softmax(model(seq), -1)[0, len(prompt) - 1:-1]
      expected = np.take_along_axis(np.asarray(logp), first.tokens[i, :n, None], -1)[:, 0]
      np.testing.assert_allclose(first.logprobs[i, :n], expected, atol=1e-4, rtol=0)
      np.testing.assert_array_equal(first.tokens[i, :n], np.asarray(logp).argmax(-1))

  def test_checkpoint_round_trip(self):
    model = _learned(3)
    with tempfile.TemporaryDirectory() as path, tempfile.TemporaryDirectory() as plain:
      llama_checkpoint.write(model, path)
      with open(os.path.join(path, "config.json")) as f:
        self.assertEqual(json.load(f)["canon_kernel"], 3)
      back = llama_checkpoint.load(path)
      np.testing.assert_array_equal(np.asarray(back.layers.canon[...]),
                                    np.asarray(model.layers.canon[...]))
      ids = _ids(6, 1, 10)
      np.testing.assert_array_equal(np.asarray(back(ids)), np.asarray(model(ids)))
      llama_checkpoint.write(_plain(), plain)  # transformers' config: no canon field
      with open(os.path.join(plain, "config.json")) as f:
        self.assertNotIn("canon_kernel", json.load(f))

  def test_bad_kernels_are_refused(self):
    with self.assertRaisesRegex(ValueError, "canon_kernel=1 must be 0"):
      LlamaConfig(canon_kernel=1)
    with self.assertRaisesRegex(ValueError, "canon convolution already"):
      llama_checkpoint.with_canon(_learned(), 4)


if __name__ == "__main__":
  absltest.main()
