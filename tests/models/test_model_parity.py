"""LingForCausalLM against transformers' bailing_hybrid on tiny random checkpoints."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized
from flax import nnx
from transformers import BailingHybridForCausalLM

from tests.fixtures.hf_tiny import MLA_ONLY, YARN, hf_logits, load_ling, make_hf_model, random_ids
from rcca_jax.models import LingForCausalLM
from rcca_jax.models import hf_checkpoint

jax.config.update("jax_default_matmul_precision", "highest")

ATOL = 1e-4


@nnx.jit
def _forward(model, ids, mask=None):
  return model(ids, attention_mask=mask)


@nnx.jit
def _cached(model, ids, mask, cache):
  return model(ids, attention_mask=mask, cache=cache)


def _logits(model, ids, mask=None):
  mask = None if mask is None else jnp.asarray(mask)
  return np.asarray(_forward(model, jnp.asarray(ids, jnp.int32), mask))


class ParityTest(parameterized.TestCase):

  @parameterized.named_parameters(
    ("mla_plain_q", dict(layer_types=MLA_ONLY), 2, 12),
    ("mla_q_lora_bias_yarn", dict(layer_types=MLA_ONLY, q_lora_rank=24, attention_bias=True,
                                  rope_parameters=YARN, max_position_embeddings=64), 2, 20),
    ("hybrid_longer_than_chunk", dict(), 2, 70),
    ("hybrid_scanned_groups", dict(num_hidden_layers=6), 3, 9),
    ("dense_only_no_renorm", dict(first_k_dense_replace=4, norm_topk_prob=False), 1, 8),
    ("moe_ungrouped_no_shared", dict(n_group=1, topk_group=1, n_shared_experts=0,
                                     first_k_dense_replace=0), 2, 10),
  )
  def test_logits_match(self, overrides, batch, length):
    hf = make_hf_model(0, **overrides)
    model = load_ling(hf)
    ids = random_ids(1, batch, length, hf.config.vocab_size)
    ours = _logits(model, ids)
    np.testing.assert_allclose(ours, hf_logits(hf, ids), atol=ATOL, rtol=0)

  def test_left_padding_matches_reference_positions(self):
    hf = make_hf_model(1, num_hidden_layers=6)
    model = load_ling(hf)
    ids = random_ids(2, 2, 12, hf.config.vocab_size)
    mask = np.ones((2, 12), np.int64)
    mask[1, :5] = 0
    positions = np.where(mask, np.cumsum(mask, 1) - 1, 0)
    ref = hf_logits(hf, ids, mask, positions)
    ours = _logits(model, ids, mask)
    valid = mask.astype(bool)
    np.testing.assert_allclose(ours[valid], ref[valid], atol=ATOL, rtol=0)

  def test_prefill_then_decode_matches_full_forward(self):
    hf = make_hf_model(2, num_hidden_layers=6)
    model = load_ling(hf)
    ids = random_ids(3, 2, 14, hf.config.vocab_size)
    mask = np.ones((2, 14), np.int64)
    mask[0, :3] = 0
    positions = np.where(mask, np.cumsum(mask, 1) - 1, 0)
    ref = hf_logits(hf, ids, mask, positions)
    cache = model.init_cache(2, 16)
    logits, cache = _cached(model, jnp.asarray(ids[:, :9], jnp.int32),
                            jnp.asarray(mask[:, :9]), cache)
    steps = [np.asarray(logits)]
    for t in range(9, 14):
      logits, cache = _cached(model, jnp.asarray(ids[:, t:t + 1], jnp.int32),
                              jnp.ones((2, 1), bool), cache)
      steps.append(np.asarray(logits))
    ours = np.concatenate(steps, axis=1)
    valid = mask.astype(bool)
    np.testing.assert_allclose(ours[valid], ref[valid], atol=ATOL, rtol=0)
    self.assertEqual(int(cache.index), 14)
    np.testing.assert_array_equal(np.asarray(cache.positions), mask.sum(1))

  def test_to_hf_round_trip(self):
    hf = make_hf_model(3, num_hidden_layers=6, q_lora_rank=24)
    model = load_ling(hf)
    path = self.create_tempdir().full_path
    model.to_hf(path)
    reloaded = BailingHybridForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = random_ids(4, 2, 10, hf.config.vocab_size)
    np.testing.assert_allclose(hf_logits(reloaded, ids), hf_logits(hf, ids), atol=1e-6, rtol=0)
    again = LingForCausalLM.from_hf(path)
    ours, theirs = nnx.state(model, nnx.Param), nnx.state(again, nnx.Param)
    self.assertEqual(jax.tree.structure(ours), jax.tree.structure(theirs))
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  def test_in_memory_spelling_and_packed_experts_load(self):
    hf = make_hf_model(4)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path)
    for f in os.listdir(path):
      if f.endswith(".safetensors"):
        os.remove(os.path.join(path, f))
    state = {k: v.contiguous() for k, v in hf.state_dict().items()}
    self.assertIn("model.layers.1.mlp.experts.gate_up_proj", state)  # Packed experts.
    from safetensors.torch import save_file
    save_file(state, os.path.join(path, "model.safetensors"))
    model = LingForCausalLM.from_hf(path)
    ids = random_ids(5, 1, 8, hf.config.vocab_size)
    np.testing.assert_allclose(_logits(model, ids),
                               hf_logits(hf, ids), atol=ATOL, rtol=0)

  def test_sharded_index_with_mtp_layer_is_loaded(self):
    hf = make_hf_model(5)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path, max_shard_size="20KB")
    self.assertTrue(os.path.exists(os.path.join(path, "model.safetensors.index.json")))
    tensors = hf_checkpoint.read_tensors(path)
    tensors["model.layers.4.eh_proj.weight"] = np.zeros((4, 4), np.float32)  # MTP layer.
    model = LingForCausalLM.from_hf(path)
    ids = random_ids(6, 1, 8, hf.config.vocab_size)
    np.testing.assert_allclose(_logits(model, ids),
                               hf_logits(hf, ids), atol=ATOL, rtol=0)

  def test_unknown_and_missing_tensors_are_listed(self):
    hf = make_hf_model(6)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path)
    tensors = hf_checkpoint.read_tensors(path)
    del tensors["model.layers.1.attention.kv_b_proj.weight"]
    tensors["model.layers.0.attention.mystery.weight"] = np.zeros((2,), np.float32)
    model = LingForCausalLM.from_hf(path)
    with self.assertRaisesRegex(ValueError, r"(?s)unknown tensors.*mystery.*missing tensors"
                                r".*layers\.1\.attention\.kv_b_proj"):
      hf_checkpoint.load_hf_tensors(model, tensors, source=path)


  def test_bfloat16_keeps_router_and_kda_gates_in_float32(self):
    hf = make_hf_model(7, num_hidden_layers=6)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path)
    model = LingForCausalLM.from_hf(path, dtype=jnp.bfloat16)
    dtypes = {"/".join(map(str, p)): v.dtype
              for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    for name, dtype in dtypes.items():
      fp32 = any(k in name for k in ("router", "correction_bias", "A_log", "dt_bias",
                                     "conv1d", "o_norm"))
      self.assertEqual(dtype, jnp.float32 if fp32 else jnp.bfloat16, name)
    cache = model.init_cache(2, 4)
    self.assertEqual(cache.prefix[0].recurrent.dtype, jnp.float32)
    # Numerics, on dense layers (MoE routing flips make bf16 errors chaotic): as close
    # to the float32 reference as transformers' own bfloat16 run.
    hf = make_hf_model(7, num_hidden_layers=4, first_k_dense_replace=4)
    path = self.create_tempdir().full_path
    hf.save_pretrained(path)
    model = LingForCausalLM.from_hf(path, dtype=jnp.bfloat16)
    ids = random_ids(8, 2, 16, hf.config.vocab_size)
    logits = _forward(model, jnp.asarray(ids, jnp.int32))
    self.assertEqual(logits.dtype, jnp.bfloat16)
    ref = hf_logits(hf, ids)
    torch_bf16 = hf_logits(hf.to(torch.bfloat16), ids)
    err = np.abs(np.asarray(logits, np.float32) - ref).mean()
    self.assertLess(err, 1.5 * np.abs(torch_bf16 - ref).mean())

  @pytest.mark.slow
  def test_remat_gives_same_gradients(self):
    from rcca_jax.models import LingConfig
    cfg = LingConfig(vocab_size=64, hidden_size=32, intermediate_size=48,
                     moe_intermediate_size=16, num_hidden_layers=6, num_attention_heads=2,
                     kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
                     linear_head_dim=16, n_group=2, topk_group=1, num_experts_per_tok=2,
                     num_local_experts=4, first_k_dense_replace=1, layer_group_size=2)
    ids = jnp.asarray(random_ids(9, 2, 8, 64), jnp.int32)
    grads = []
    for remat in (False, True):
      model = LingForCausalLM(cfg.replace(remat=remat), rngs=nnx.Rngs(0))
      loss = lambda m: jnp.mean(jax.nn.log_softmax(m(ids))[..., 0])
      grads.append(nnx.jit(nnx.grad(loss))(model))
    for a, b in zip(jax.tree.leaves(grads[0]), jax.tree.leaves(grads[1])):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6, rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
