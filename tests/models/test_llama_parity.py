"""LlamaForCausalLM against transformers' llama / qwen2 / mistral on tiny random models.

Logits within 2e-4 (float32; they agree to ~2e-6), greedy `generate` tokens equal to
transformers' greedy `generate`, sampled log-probs equal to the trainer's log-probs of
a full forward, and the checkpoint converter in both directions.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import torch
from absl.testing import absltest, parameterized
from flax import nnx
from transformers import AutoModelForCausalLM

from tests.fixtures.hf_tiny import LLAMA3_ROPE, hf_logits, load_family, make_hf_llama, random_ids
from rcca_jax.models import LlamaConfig, LlamaForCausalLM, from_hf
from rcca_jax.models import llama_checkpoint, safetensors_io
from rcca_jax.rl.functional import FunctionalModel
from rcca_jax.sampling import generate

jax.config.update("jax_default_matmul_precision", "highest")

ATOL = 2e-4
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
LINEAR = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}


@nnx.jit
def _forward(model, ids, mask=None):
  return model(ids, attention_mask=mask)


@nnx.jit
def _cached(model, ids, mask, cache):
  return model(ids, attention_mask=mask, cache=cache)


def _logits(model, ids, mask=None):
  mask = None if mask is None else jnp.asarray(mask)
  return np.asarray(_forward(model, jnp.asarray(ids, jnp.int32), mask))


class LogitsTest(parameterized.TestCase):

  @parameterized.named_parameters(
    ("llama_gqa_untied", "llama", dict()),
    ("llama_tied_biases", "llama", dict(tie_word_embeddings=True, attention_bias=True)),
    ("llama_mqa_llama3_rope", "llama", dict(num_key_value_heads=1, rope_parameters=LLAMA3_ROPE)),
    ("llama_linear_rope", "llama", dict(rope_parameters=LINEAR)),
    ("llama_dynamic_rope_past_limit", "llama", dict(rope_parameters=DYNAMIC,
                                                    max_position_embeddings=8)),
    ("qwen2_qkv_bias_untied", "qwen2", dict()),
    ("qwen2_tied_mha", "qwen2", dict(tie_word_embeddings=True, num_key_value_heads=4)),
    ("mistral", "mistral", dict()),
  )
  def test_logits_match(self, model_type, overrides):
    hf = make_hf_llama(model_type, **overrides)
    model = load_family(hf)
    self.assertIsInstance(model, LlamaForCausalLM)
    self.assertEqual(model.config.model_type, model_type)
    ids = random_ids(1, 2, 20, hf.config.vocab_size)
    np.testing.assert_allclose(_logits(model, ids), hf_logits(hf, ids), atol=ATOL, rtol=0)

  def test_blockwise_attention_matches(self):
    hf = make_hf_llama("qwen2", seed=1)
    model = load_family(hf, attention_block_size=8)
    ids = random_ids(2, 2, 30, hf.config.vocab_size)
    mask = np.ones((2, 30), np.int64)
    mask[1, :7] = 0
    positions = np.where(mask, np.cumsum(mask, 1) - 1, 0)
    valid = mask.astype(bool)
    np.testing.assert_allclose(_logits(model, ids, mask)[valid],
                               hf_logits(hf, ids, mask, positions)[valid], atol=ATOL, rtol=0)

  def test_left_padding_then_cached_decode_match_reference(self):
    hf = make_hf_llama("llama", seed=2, rope_parameters=LLAMA3_ROPE)
    model = load_family(hf)
    ids = random_ids(3, 2, 14, hf.config.vocab_size)
    mask = np.ones((2, 14), np.int64)
    mask[0, :3] = 0
    positions = np.where(mask, np.cumsum(mask, 1) - 1, 0)
    ref = hf_logits(hf, ids, mask, positions)
    valid = mask.astype(bool)
    np.testing.assert_allclose(_logits(model, ids, mask)[valid], ref[valid], atol=ATOL, rtol=0)
    cache = model.init_cache(2, 16)
    logits, cache = _cached(model, jnp.asarray(ids[:, :9], jnp.int32),
                            jnp.asarray(mask[:, :9]), cache)
    steps = [np.asarray(logits)]
    for t in range(9, 14):
      logits, cache = _cached(model, jnp.asarray(ids[:, t:t + 1], jnp.int32),
                              jnp.ones((2, 1), bool), cache)
      steps.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(steps, 1)[valid], ref[valid], atol=ATOL, rtol=0)
    self.assertEqual(int(cache.index), 14)
    np.testing.assert_array_equal(np.asarray(cache.positions), mask.sum(1))

  def test_remat_gives_same_gradients(self):
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    ids = jnp.asarray(random_ids(9, 2, 8, 64), jnp.int32)
    grads = []
    for remat in (False, True):
      model = LlamaForCausalLM(cfg.replace(remat=remat), rngs=nnx.Rngs(0))
      loss = lambda m: jnp.mean(jax.nn.log_softmax(m(ids))[..., 0])
      grads.append(nnx.jit(nnx.grad(loss))(model))
    for a, b in zip(jax.tree.leaves(grads[0]), jax.tree.leaves(grads[1])):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6, rtol=1e-5)


class SummaryAndShardingTest(absltest.TestCase):

  def test_smollm2_shape_counts_and_shards(self):
    from jax.sharding import PartitionSpec as P  # pylint: disable=import-outside-toplevel
    from rcca_jax.models import summary  # pylint: disable=import-outside-toplevel
    out = summary.summarize({"family": "llama"}, "data:1,fsdp:2,tensor:2")
    # SmolLM2-135M: 30 x (4 attention + 3 MLP projections + 2 norms), tied table, norm.
    per_layer = 576 * (576 + 2 * 192 + 576) + 3 * 576 * 1536 + 2 * 576
    self.assertEqual(out["total_params"], 49152 * 576 + 30 * per_layer + 576)
    self.assertEqual(out["active_params"], out["total_params"])  # the tied head is used
    self.assertEqual((out["family"], out["layer_schedule"]["groups"]), ("llama", 30))
    self.assertLess(out["param_bytes_per_device"], 4 * out["total_params"] / 3)
    model = summary.abstract_model(LlamaConfig())
    mesh = summary.mesh_lib.abstract_mesh("data:1,fsdp:2,tensor:2")
    spec = summary.variable_spec
    self.assertEqual(spec(model.layers.self_attn.q_proj.kernel, mesh), P(None, "fsdp", "tensor"))
    self.assertEqual(spec(model.layers.mlp.down_proj.kernel, mesh), P(None, "tensor", "fsdp"))
    self.assertEqual(spec(model.embed_tokens.embedding, mesh), P("tensor", "fsdp"))
    # 3 key/value heads x 64 = 192 columns split 2 ways; a split that does not divide
    # stays whole.
    mesh3 = summary.mesh_lib.abstract_mesh("data:1,fsdp:1,tensor:5")
    self.assertEqual(spec(model.layers.self_attn.k_proj.kernel, mesh3), P(None, None, None))


class GenerateTest(parameterized.TestCase):

  @parameterized.named_parameters(("llama_tied", "llama", dict(tie_word_embeddings=True)),
                                  ("qwen2", "qwen2", dict()))
  def test_greedy_equals_transformers_generate(self, model_type, overrides):
    hf = make_hf_llama(model_type, seed=3, **overrides)
    model = load_family(hf)
    rng = np.random.default_rng(4)
    prompts = [rng.integers(3, hf.config.vocab_size, size=n).tolist() for n in (5, 11, 2)]
    # grow=4: the cache gains 4 slots at a time (3 times over 12 new tokens).
    outs = [generate(model, prompts, max_new_tokens=12, temperature=0.0, prefill_chunk=4,
                     grow=grow) for grow in (0, 4)]
    for i, prompt in enumerate(prompts):
      with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(prompt):].numpy()
      for out in outs:
        np.testing.assert_array_equal(out.tokens[i], ref)

  def test_sampled_logprobs_equal_the_trainers_forward(self):
    hf = make_hf_llama("qwen2", seed=5)
    model = load_family(hf)
    rng = np.random.default_rng(6)
    prompts = [rng.integers(3, hf.config.vocab_size, size=n).tolist() for n in (4, 9)]
    out = generate(model, prompts, max_new_tokens=10, temperature=0.7, seed=1)
    fmodel = FunctionalModel(model)
    for i, prompt in enumerate(prompts):
      n = int(out.lengths[i])
      seq = jnp.asarray([prompt + out.tokens[i, :n].tolist()], jnp.int32)
      # At temperature T the sampler's log-probs are log_softmax(logits / T).
      scaled = model(seq) / 0.7
      logp = jax.nn.log_softmax(scaled, -1)[0, len(prompt) - 1:-1]
      expected = np.take_along_axis(np.asarray(logp), out.tokens[i, :n, None], -1)[:, 0]
      np.testing.assert_allclose(out.logprobs[i, :n], expected, atol=1e-4, rtol=0)
      train_logp, _, aux = fmodel.logprobs(fmodel.params, fmodel.model_state, seq, None)
      self.assertEqual(aux, {})
      greedy = generate(model, [prompt], max_new_tokens=n, temperature=0.0)
      full = jnp.asarray([prompt + greedy.tokens[0].tolist()], jnp.int32)
      train_logp, _, _ = fmodel.logprobs(fmodel.params, fmodel.model_state, full, None)
      np.testing.assert_allclose(greedy.logprobs[0], np.asarray(train_logp)[0, len(prompt):],
                                 atol=1e-4, rtol=0)


class CheckpointTest(parameterized.TestCase):

  @parameterized.named_parameters(("single", "llama", 0, dict(attention_bias=True)),
                                  ("sharded", "qwen2", 40_000, dict()),
                                  ("tied_sharded", "llama", 40_000,
                                   dict(tie_word_embeddings=True)))
  def test_export_loads_in_transformers_and_back(self, model_type, shard_bytes, overrides):
    hf = make_hf_llama(model_type, seed=7, **overrides)
    model = load_family(hf)
    path = self.create_tempdir().full_path
    llama_checkpoint.write(model, path, max_shard_bytes=shard_bytes)
    self.assertEqual(os.path.exists(os.path.join(path, "model.safetensors.index.json")),
                     bool(shard_bytes))
    if shard_bytes:
      self.assertGreater(len(safetensors_io.safetensors_files(path)), 1)
    reloaded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    self.assertEqual(type(reloaded).__name__, type(hf).__name__)
    ids = random_ids(8, 2, 10, hf.config.vocab_size)
    np.testing.assert_allclose(hf_logits(reloaded, ids), hf_logits(hf, ids), atol=1e-6, rtol=0)
    again = from_hf(path)
    self.assertEqual(again.config, model.config)
    ours, theirs = nnx.state(model, nnx.Param), nnx.state(again, nnx.Param)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  def test_sharded_transformers_checkpoint_loads(self):
    hf = make_hf_llama("llama", seed=8)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path, max_shard_size="20KB")
    self.assertTrue(os.path.exists(os.path.join(path, "model.safetensors.index.json")))
    ids = random_ids(9, 1, 8, hf.config.vocab_size)
    np.testing.assert_allclose(_logits(from_hf(path), ids), hf_logits(hf, ids), atol=ATOL,
                               rtol=0)

  def test_unknown_missing_and_misshaped_tensors_are_listed_at_once(self):
    hf = make_hf_llama("qwen2", seed=9)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path)
    tensors = safetensors_io.read_file_tensors(os.path.join(path, "model.safetensors"))
    del tensors["model.layers.1.self_attn.k_proj.bias"]
    tensors["model.layers.0.self_attn.mystery.weight"] = np.zeros((2,), np.float32)
    tensors["model.norm.weight"] = np.zeros((3,), np.float32)
    os.remove(os.path.join(path, "model.safetensors"))
    safetensors_io.save_tensors(tensors, path)
    with self.assertRaisesRegex(ValueError, r"(?s)unknown tensors \(1\).*mystery"
                                r".*missing tensors \(1\).*layers\.1\.self_attn\.k_proj\.bias"
                                r".*norm\.weight: checkpoint shape \(3,\)"):
      from_hf(path)

  def test_unsupported_configs_are_refused_with_reasons(self):
    path = self.create_tempdir().full_path
    with open(os.path.join(path, "config.json"), "w") as f:
      json.dump({"model_type": "gpt2"}, f)
    with self.assertRaisesRegex(ValueError, "model_type='gpt2' is not supported"):
      from_hf(path)
    with self.assertRaisesRegex(ValueError, r"(?s)mlp_bias.*sliding_window=16"):
      LlamaConfig.from_hf_config({"model_type": "mistral", "sliding_window": 16,
                                  "max_position_embeddings": 64, "mlp_bias": True})
    with self.assertRaisesRegex(ValueError, "rope_type='yarn'"):
      LlamaConfig(rope_parameters={"rope_type": "yarn", "factor": 2.0})


if __name__ == "__main__":
  absltest.main()
