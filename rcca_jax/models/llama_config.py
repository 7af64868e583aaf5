"""Configuration of dense Llama-family decoders (`llama`, `qwen2`, `mistral`).

`LlamaConfig` holds the architecture fields of transformers' LlamaConfig / Qwen2Config /
MistralConfig that change the computation, plus JAX-side options, and reads and writes
their `config.json` dictionaries. The defaults are SmolLM2-135M-Instruct's shape.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

MODEL_TYPES = ("llama", "qwen2", "mistral")
ROPE_TYPES = ("default", "linear", "dynamic", "llama3")

# Fields that only select how JAX computes; never written to config.json.
RUNTIME_FIELDS = ("dtype", "param_dtype", "remat", "attention_block_size")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
  """Architecture of a dense GQA decoder with RoPE, RMSNorm and a SwiGLU MLP."""

  model_type: str = "llama"
  vocab_size: int = 49152
  hidden_size: int = 576
  intermediate_size: int = 1536
  num_hidden_layers: int = 30
  num_attention_heads: int = 9
  num_key_value_heads: int = 3
  head_dim: int = 0  # 0: hidden_size // num_attention_heads.
  rope_theta: float = 100000.0
  rope_parameters: dict[str, Any] | None = None  # None: default RoPE, no scaling.
  max_position_embeddings: int = 8192
  rms_norm_eps: float = 1e-5
  qkv_bias: bool = False  # Biases on q/k/v projections (Qwen2: always).
  o_bias: bool = False  # Bias on the output projection (Llama's attention_bias).
  hidden_act: str = "silu"
  tie_word_embeddings: bool = True
  pad_token_id: int | None = None
  bos_token_id: int | None = None
  eos_token_id: int | list[int] | None = None
  # A residual causal depthwise convolution of this width over each attention input
  # (`llama.canon_mix`), zero at initialization; 0: none (transformers' Llama). Not a
  # transformers field: checkpoints with it load here only.
  canon_kernel: int = 0
  # JAX-side options.
  dtype: str = "float32"  # Compute dtype ("float32" or "bfloat16").
  param_dtype: str = "float32"
  remat: bool = False  # Rematerialise each decoder layer in the backward pass.
  # Attention over longer sequences runs blockwise (flash_attention.py); 0 = always dense.
  attention_block_size: int = 512

  def __post_init__(self):
    if not self.head_dim and self.num_attention_heads:
      object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
    self.validate()

  def validate(self) -> None:
    """Raises ValueError when the fields are inconsistent."""
    problems = []
    if self.model_type not in MODEL_TYPES:
      problems.append(f"model_type={self.model_type!r}; expected one of {MODEL_TYPES}")
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads"):
      if getattr(self, name) < 1:
        problems.append(f"{name}={getattr(self, name)} must be >= 1")
    if self.num_key_value_heads >= 1 and self.num_attention_heads % self.num_key_value_heads:
      problems.append(f"num_attention_heads={self.num_attention_heads} is not a multiple "
                      f"of num_key_value_heads={self.num_key_value_heads}")
    if self.head_dim % 2:
      problems.append(f"head_dim={self.head_dim} must be even (RoPE rotates pairs)")
    if self.hidden_act != "silu":
      problems.append(f"hidden_act={self.hidden_act!r}; only 'silu' is supported")
    if self.rope_type not in ROPE_TYPES:
      problems.append(f"rope_type={self.rope_type!r}; supported: {ROPE_TYPES}")
    elif self.rope_type != "default" and "factor" not in self.rope_parameters:
      problems.append(f"rope_parameters of type {self.rope_type!r} need a 'factor'")
    if self.rope_type == "llama3":
      need = ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
      lacking = [k for k in need if k not in self.rope_parameters]
      if lacking:
        problems.append(f"llama3 rope_parameters lack {lacking}")
    if self.model_type == "qwen2" and (not self.qkv_bias or self.o_bias):
      problems.append("qwen2 has q/k/v biases and no output bias (qkv_bias=True, "
                      "o_bias=False)")
    if self.model_type == "llama" and self.qkv_bias != self.o_bias:
      problems.append("llama's attention_bias covers q/k/v and output alike "
                      "(qkv_bias must equal o_bias)")
    if self.model_type == "mistral" and (self.qkv_bias or self.o_bias):
      problems.append("mistral has no attention biases")
    if self.canon_kernel < 0 or self.canon_kernel == 1:
      problems.append(f"canon_kernel={self.canon_kernel} must be 0 (none) or >= 2")
    if self.dtype not in ("float32", "bfloat16") or self.param_dtype not in (
        "float32", "bfloat16"):
      problems.append("dtype and param_dtype must be 'float32' or 'bfloat16'")
    if problems:
      raise ValueError("Invalid LlamaConfig: " + "; ".join(problems))

  @property
  def rope_type(self) -> str:
    return (self.rope_parameters or {}).get("rope_type", "default")

  @property
  def num_groups(self) -> int:
    """Query heads per key/value head."""
    return self.num_attention_heads // self.num_key_value_heads

  def replace(self, **changes) -> "LlamaConfig":
    return dataclasses.replace(self, **changes)

  # ---- config.json --------------------------------------------------------

  @classmethod
  def from_hf_config(cls, hf: dict[str, Any], **overrides) -> "LlamaConfig":
    """Builds a config from a `llama` / `qwen2` / `mistral` config.json dictionary."""
    model_type = hf.get("model_type")
    if model_type not in MODEL_TYPES:
      raise ValueError(f"model_type={model_type!r}; expected one of {MODEL_TYPES}")
    problems = []
    if hf.get("mlp_bias"):
      problems.append("mlp_bias=true is not supported")
    window = hf.get("sliding_window")
    uses_window = (hf.get("use_sliding_window", False) if model_type == "qwen2"
                   else window is not None)
    if uses_window and window is not None and window < hf.get("max_position_embeddings", 0):
      problems.append(f"sliding_window={window} (below max_position_embeddings) is not "
                      "supported: attention here is full-causal")
    if hf.get("partial_rotary_factor", 1.0) != 1.0:
      problems.append("partial_rotary_factor != 1 is not supported")
    if problems:
      raise ValueError(f"{model_type} config.json: " + "; ".join(problems))
    d = dict(hf)
    rope = d.get("rope_parameters") or d.get("rope_scaling")
    if rope is not None:
      rope = dict(rope)
      if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
      if "rope_theta" in rope:
        d["rope_theta"] = rope.pop("rope_theta")
    d["rope_parameters"] = (rope if rope and rope.get("rope_type", "default") != "default"
                            else None)
    if model_type == "qwen2":
      d["qkv_bias"], d["o_bias"] = True, False
    else:
      d["qkv_bias"] = d["o_bias"] = bool(d.get("attention_bias", False))
    if d.get("num_key_value_heads") is None:
      d["num_key_value_heads"] = d.get("num_attention_heads")
    d["head_dim"] = d.get("head_dim") or 0
    d.setdefault("tie_word_embeddings", False)  # transformers' default for these types
    names = {f.name for f in dataclasses.fields(cls)} - set(RUNTIME_FIELDS)
    kwargs = {k: v for k, v in d.items() if k in names}
    kwargs.update(overrides)
    return cls(**kwargs)

  def to_hf_config(self) -> dict[str, Any]:
    """A config.json dictionary that transformers' Auto classes load."""
    out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
           if f.name not in RUNTIME_FIELDS + ("qkv_bias", "o_bias", "rope_parameters")
           and not (f.name == "canon_kernel" and not self.canon_kernel)}
    if self.model_type == "llama":
      out["attention_bias"] = self.qkv_bias
      out["mlp_bias"] = False
    if self.model_type == "qwen2":
      out["use_sliding_window"] = False
    if self.model_type == "mistral":
      out["sliding_window"] = None
    rope = dict(self.rope_parameters or {"rope_type": "default"})
    rope["rope_theta"] = self.rope_theta
    out["rope_parameters"] = rope
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "mistral": "MistralForCausalLM"}[self.model_type]
    out.update(architectures=[arch], dtype=self.param_dtype)
    return out


# ---- rotary embedding (pure) ---------------------------------------------------


def default_inv_freq(dim: int, base: float) -> np.ndarray:
  """1 / base^(2i/dim), float32 [dim / 2] (transformers' computation order)."""
  exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
  return (1.0 / (np.float32(base) ** exponents)).astype(np.float32)


def llama3_inv_freq(inv_freq: np.ndarray, params: dict[str, Any]) -> np.ndarray:
  """Llama 3.1 frequency scaling: long wavelengths / factor, a smooth ramp between."""
  factor = params["factor"]
  low, high = params["low_freq_factor"], params["high_freq_factor"]
  old_len = params["original_max_position_embeddings"]
  wavelen = 2 * math.pi / inv_freq
  scaled = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
  smooth = (old_len / wavelen - low) / (high - low)
  smoothed = (1 - smooth) * scaled / factor + smooth * scaled
  medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
  return np.where(medium, smoothed, scaled).astype(np.float32)


def static_inv_freq(cfg: LlamaConfig) -> np.ndarray:
  """Inverse frequencies [head_dim / 2] of the position-independent RoPE types."""
  inv_freq = default_inv_freq(cfg.head_dim, cfg.rope_theta)
  if cfg.rope_type == "linear":
    return (inv_freq / np.float32(cfg.rope_parameters["factor"])).astype(np.float32)
  if cfg.rope_type == "llama3":
    return llama3_inv_freq(inv_freq, cfg.rope_parameters)
  return inv_freq
