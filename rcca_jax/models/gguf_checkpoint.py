"""GGUF import for Llama-family models (llama.cpp's file format), dequantized to float.

    model = load("SmolLM2-135M-Instruct.Q4_1.gguf")

Reads the architecture from the file's metadata (`general.architecture` "llama" or
"qwen2" and its `{arch}.*` keys), dequantizes every tensor with `gguf.quants`, renames
llama.cpp's tensors to transformers' names and undoes the row permutation llama.cpp's
converter applies to the Q and K projections of "llama" files (its RoPE pairs rows
(i, i + d/2) as (2i, 2i + 1)). Then the safetensors path's checks apply: one error
lists every unknown, missing or mis-shaped tensor. Needs the `gguf` package (the
project's `gguf` extra).
"""

from __future__ import annotations

import os
import re
from typing import Any

import jax.numpy as jnp
import numpy as np

from rcca_jax.models import llama_checkpoint
from rcca_jax.models.llama import LlamaForCausalLM
from rcca_jax.models.llama_config import LlamaConfig

ARCHITECTURES = ("llama", "qwen2")
_PERMUTED = ("llama",)  # llama.cpp permutes Q/K rows of these architectures only.
_TOP = {"token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


def _gguf():
  try:
    import gguf  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("reading GGUF files needs the `gguf` package: pip install "
                      "'rcca_jax[gguf]'") from e
  return gguf


def hf_name(name: str) -> str:
  """transformers' name of a llama.cpp tensor name (unknown names stay as they are)."""
  if name in _TOP:
    return _TOP[name]
  m = _BLOCK.match(name)
  if m and m.group(2) in _LAYER:
    return f"model.layers.{m.group(1)}.{_LAYER[m.group(2)]}.{m.group(3)}"
  return name


def unpermute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
  """Inverse of llama.cpp's Q/K permutation of [n_head * head_dim, ...] rows."""
  shape = w.shape
  return (w.reshape(n_head, shape[0] // n_head // 2, 2, *shape[1:])
          .swapaxes(1, 2).reshape(shape))


def metadata(reader: Any) -> dict[str, Any]:
  """Scalar and string metadata of a GGUFReader (token lists and merges left out)."""
  out = {}
  for key, field in reader.fields.items():
    if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
               "tokenizer.ggml.scores"):
      continue
    out[key] = field.contents()
  return out


def hf_config(meta: dict[str, Any], tensor_names: set[str], vocab: int,
              source: str) -> dict[str, Any]:
  """A transformers config.json dictionary for the file's architecture."""
  arch = meta.get("general.architecture")
  if arch not in ARCHITECTURES:
    raise ValueError(f"{source}: general.architecture={arch!r}; supported: {ARCHITECTURES}")
  problems = []
  if "rope_freqs.weight" in tensor_names:
    problems.append("per-frequency RoPE factors (rope_freqs.weight, Llama 3.1 scaling) "
                    "are not supported")
  scaling = meta.get(f"{arch}.rope.scaling.type", "none")
  if scaling not in ("none", "linear"):
    problems.append(f"{arch}.rope.scaling.type={scaling!r} is not supported")

  def need(key):
    if f"{arch}.{key}" not in meta:
      problems.append(f"metadata {arch}.{key} is missing")
      return 0
    return meta[f"{arch}.{key}"]

  heads = need("attention.head_count")
  hidden = need("embedding_length")
  config = {
      "model_type": arch, "vocab_size": int(meta.get(f"{arch}.vocab_size", vocab)),
      "hidden_size": int(hidden), "intermediate_size": int(need("feed_forward_length")),
      "num_hidden_layers": int(need("block_count")), "num_attention_heads": int(heads),
      "num_key_value_heads": int(meta.get(f"{arch}.attention.head_count_kv", heads)),
      "head_dim": int(meta.get(f"{arch}.attention.key_length",
                               meta.get(f"{arch}.rope.dimension_count",
                                        hidden // heads if heads else 0))),
      "max_position_embeddings": int(meta.get(f"{arch}.context_length", 4096)),
      "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
      "rope_theta": float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
      "tie_word_embeddings": "output.weight" not in tensor_names,
      "attention_bias": "blk.0.attn_q.bias" in tensor_names and arch == "llama",
      "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
      "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
      "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
  }
  if scaling == "linear":
    config["rope_parameters"] = {"rope_type": "linear",
                                 "factor": float(meta[f"{arch}.rope.scaling.factor"])}
  if problems:
    raise ValueError(f"{source}: " + "; ".join(problems))
  return config


def _reader(path: str) -> Any:
  gguf = _gguf()
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: no such GGUF file")
  return gguf.GGUFReader(path)


def _config(reader: Any, path: str) -> dict[str, Any]:
  vocab = len(reader.fields["tokenizer.ggml.tokens"].data) if (
      "tokenizer.ggml.tokens" in reader.fields) else 0
  return hf_config(metadata(reader), {t.name for t in reader.tensors}, vocab, path)


def read_config(path: str) -> dict[str, Any]:
  """The config.json dictionary of a GGUF file (nothing dequantized)."""
  return _config(_reader(path), path)


def read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """(config.json dictionary, float32 tensors under transformers' names) of a file."""
  gguf = _gguf()
  reader = _reader(path)
  config = _config(reader, path)
  heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
  tensors = {}
  for t in reader.tensors:
    shape = tuple(int(n) for n in reversed(t.shape))  # GGML lists dimensions inner first
    w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32).reshape(shape)
    m = _BLOCK.match(t.name)
    if config["model_type"] in _PERMUTED and m and m.group(2) in ("attn_q", "attn_k"):
      w = unpermute_rows(w, heads if m.group(2) == "attn_q" else kv_heads)
    tensors[hf_name(t.name)] = w
  return config, tensors


def load(path: str, dtype=jnp.float32, **config_overrides) -> LlamaForCausalLM:
  """A `LlamaForCausalLM` of a GGUF file; `dtype` and overrides as `llama_checkpoint.load`."""
  hf, tensors = read(path)
  name = jnp.dtype(dtype).name
  cfg = LlamaConfig.from_hf_config(hf, dtype=name, param_dtype=name, **config_overrides)
  model = llama_checkpoint.build_abstract(cfg)
  values, missing, unknown = llama_checkpoint.params_from_tensors(cfg, tensors)
  llama_checkpoint.load_params(model, values, missing=missing, unknown=unknown, source=path)
  return model


def load_tokenizer(path: str) -> Any:
  """The file's tokenizer (and chat template) through transformers' GGUF reader."""
  _gguf()
  from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
  return AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                       gguf_file=os.path.basename(path))
