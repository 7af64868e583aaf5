"""Tiny random transformers `bailing_hybrid` checkpoints for model tests."""

import tempfile

import numpy as np
import torch
from transformers import BailingHybridConfig, BailingHybridForCausalLM

BASE = dict(
  vocab_size=96, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
  num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32,
  q_lora_rank=None, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16, head_dim=16,
  n_group=4, topk_group=2, num_experts_per_tok=3, num_local_experts=16,
  first_k_dense_replace=1, layer_group_size=2, num_mtp_layers=0, pad_token_id=0,
  eos_token_id=1, initializer_range=0.08, routed_scaling_factor=2.5)
# Shapes the model and sampling tests share: attention-only layers, YaRN rope scaling.
MLA_ONLY = ["full_attention"] * 4
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 16, "mscale": 1.0, "mscale_all_dim": 1.0,
        "beta_fast": 32, "beta_slow": 1}


def make_hf_model(seed: int = 0, **overrides) -> BailingHybridForCausalLM:
  """A random fp32 model; norms, biases and router correction biases perturbed too."""
  kwargs = dict(BASE)
  kwargs.update(overrides)
  torch.manual_seed(seed)
  model = BailingHybridForCausalLM(BailingHybridConfig(**kwargs)).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("norm.weight") or "layernorm" in name:
        p.add_(0.2 * torch.randn_like(p))
      elif name.endswith(".bias"):
        p.copy_(0.05 * torch.randn_like(p))
    for name, b in model.named_buffers():
      if name.endswith("e_score_correction_bias"):
        b.copy_(0.05 * torch.randn_like(b))
  return model


def load_ling(hf_model, **overrides):
  """Our LingForCausalLM loaded from `hf_model` saved to a temporary checkpoint."""
  from rcca_jax.models import LingForCausalLM  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory() as path:
    hf_model.save_pretrained(path)
    return LingForCausalLM.from_hf(path, **overrides)


def hf_logits(model, ids: np.ndarray, attention_mask: np.ndarray | None = None,
              position_ids: np.ndarray | None = None) -> np.ndarray:
  kwargs = {}
  if attention_mask is not None:
    kwargs["attention_mask"] = torch.tensor(attention_mask)
  if position_ids is not None:
    kwargs["position_ids"] = torch.tensor(position_ids)
  with torch.no_grad():
    return model(input_ids=torch.tensor(ids), **kwargs).logits.float().numpy()


def random_ids(seed: int, batch: int, length: int, vocab: int) -> np.ndarray:
  return np.random.default_rng(seed).integers(2, vocab, size=(batch, length), dtype=np.int64)


# ---- dense Llama-family checkpoints (llama, qwen2, mistral) ------------------------

LLAMA_BASE = dict(
  vocab_size=96, hidden_size=64, intermediate_size=80, num_hidden_layers=3,
  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
  rms_norm_eps=1e-5, pad_token_id=0, bos_token_id=1, eos_token_id=2,
  initializer_range=0.08, tie_word_embeddings=False)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}


def make_hf_llama(model_type: str = "llama", seed: int = 0, **overrides):
  """A random fp32 `llama` / `qwen2` / `mistral` model; norms and biases perturbed."""
  import transformers  # pylint: disable=import-outside-toplevel
  names = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
           "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
           "mistral": ("MistralConfig", "MistralForCausalLM")}[model_type]
  config_cls, model_cls = (getattr(transformers, n) for n in names)
  kwargs = dict(LLAMA_BASE)
  if model_type == "mistral":
    kwargs["sliding_window"] = None
  kwargs.update(overrides)
  torch.manual_seed(seed)
  model = model_cls(config_cls(**kwargs)).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("norm.weight"):
        p.add_(0.2 * torch.randn_like(p))
      elif name.endswith(".bias"):
        p.copy_(0.05 * torch.randn_like(p))
  return model


def load_family(hf_model, **overrides):
  """`rcca_jax.models.from_hf` of `hf_model` saved to a temporary checkpoint."""
  from rcca_jax.models import from_hf  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory() as path:
    hf_model.save_pretrained(path)
    return from_hf(path, **overrides)
