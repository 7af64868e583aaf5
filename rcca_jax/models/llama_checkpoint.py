"""Conversion between Llama-family safetensors checkpoints and `LlamaForCausalLM`.

Tensor names are transformers' (`model.embed_tokens`, `model.layers.{i}.self_attn.
{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`, the two layer norms, `model.norm`,
`lm_head`), stored [out, in]; the model keeps [in, out] kernels stacked over layers.
Loading fails with one message listing every unknown, missing or mis-shaped tensor.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.models import safetensors_io
from rcca_jax.models.llama import LlamaForCausalLM
from rcca_jax.models.llama_config import LlamaConfig

Path = tuple[str, ...]
_SKIPPED = re.compile(r"\.rotary_emb\.inv_freq$")  # A buffer old checkpoints saved.


def layer_names(cfg: LlamaConfig) -> list[tuple[Path, str, bool]]:
  """(param path under a layer, tensor name suffix, transposed) of one decoder layer."""
  names: list[tuple[Path, str, bool]] = [
      (("input_layernorm", "weight"), "input_layernorm.weight", False),
      (("post_attention_layernorm", "weight"), "post_attention_layernorm.weight", False)]
  for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
    names.append((("self_attn", proj, "kernel"), f"self_attn.{proj}.weight", True))
    if (cfg.o_bias if proj == "o_proj" else cfg.qkv_bias):
      names.append((("self_attn", proj, "bias"), f"self_attn.{proj}.bias", False))
  for proj in ("gate_proj", "up_proj", "down_proj"):
    names.append((("mlp", proj, "kernel"), f"mlp.{proj}.weight", True))
  if cfg.canon_kernel:
    names.append((("canon",), "canon.weight", False))  # [K, hidden], not transformers'
  return names


def top_names(cfg: LlamaConfig) -> list[tuple[Path, str, bool]]:
  names = [(("embed_tokens", "embedding"), "model.embed_tokens.weight", False),
           (("norm", "weight"), "model.norm.weight", False)]
  if not cfg.tie_word_embeddings:
    names.append((("lm_head", "kernel"), "lm_head.weight", True))
  return names


def params_from_tensors(cfg: LlamaConfig, tensors: dict[str, np.ndarray]
                        ) -> tuple[dict[Path, np.ndarray], list[str], list[str]]:
  """({param path: array}, missing names, unknown names) from transformers' tensors."""
  tensors = {k: v for k, v in tensors.items() if not _SKIPPED.search(k)}
  if cfg.tie_word_embeddings:
    tensors.pop("lm_head.weight", None)  # transformers ties it to the embedding anyway
  values: dict[Path, np.ndarray] = {}
  missing: list[str] = []

  def take(name: str, transpose: bool) -> np.ndarray | None:
    if name not in tensors:
      missing.append(name)
      return None
    w = np.asarray(tensors.pop(name))
    return np.ascontiguousarray(w.T) if transpose else w

  for path, name, transpose in top_names(cfg):
    w = take(name, transpose)
    if w is not None:
      values[path] = w
  for path, suffix, transpose in layer_names(cfg):
    stack = [take(f"model.layers.{i}.{suffix}", transpose)
             for i in range(cfg.num_hidden_layers)]
    if all(w is not None for w in stack):
      shapes = {w.shape for w in stack}
      if len(shapes) > 1:
        missing.append(f"model.layers.*.{suffix} (shapes differ across layers: "
                       f"{sorted(shapes)})")
      else:
        values[("layers",) + path] = np.stack(stack)
  return values, missing, sorted(tensors)


def load_params(model: LlamaForCausalLM, values: dict[Path, np.ndarray], *,
                missing: list[str], unknown: list[str], source: str) -> None:
  """Fills `model` (possibly abstract) from {param path: array}; raises ValueError
  listing unknown, missing and mis-shaped tensors."""
  flat = safetensors_io.flat_state(model)
  safetensors_io.check_fill(flat, values, unknown=unknown, missing=missing, source=source)
  for path, var in flat.items():
    var.set_value(jnp.asarray(values[path], dtype=var.dtype))


def build_abstract(cfg: LlamaConfig) -> LlamaForCausalLM:
  return nnx.eval_shape(lambda: LlamaForCausalLM(cfg, rngs=nnx.Rngs(0)))


def with_canon(model: LlamaForCausalLM, kernel: int) -> LlamaForCausalLM:
  """`model` with a zero canon convolution of width `kernel` (`LlamaConfig.canon_kernel`)
  before every attention: the same function (the convolution adds exact zeros), now
  able to learn one."""
  if model.config.canon_kernel:
    raise ValueError(f"the model has a canon convolution already "
                     f"(canon_kernel={model.config.canon_kernel})")
  cfg = model.config.replace(canon_kernel=kernel)
  values = {path: np.asarray(jax.device_get(var[...]))
            for path, var in safetensors_io.flat_state(model).items()}
  values[("layers", "canon")] = np.zeros((cfg.num_hidden_layers, kernel, cfg.hidden_size),
                                         jnp.dtype(cfg.param_dtype))
  out = build_abstract(cfg)
  load_params(out, values, missing=[], unknown=[], source="with_canon")
  return out


def load(path: str, dtype=jnp.float32, **config_overrides) -> LlamaForCausalLM:
  """Loads a `llama` / `qwen2` / `mistral` checkpoint directory (config.json +
  safetensors, single or sharded); `dtype` is the parameter and compute dtype and
  keyword arguments override LlamaConfig fields (e.g. remat=True)."""
  name = jnp.dtype(dtype).name
  cfg = LlamaConfig.from_hf_config(safetensors_io.read_config(path), dtype=name,
                                   param_dtype=name, **config_overrides)
  model = build_abstract(cfg)
  tensors: dict[str, np.ndarray] = {}
  for file in safetensors_io.safetensors_files(path):
    tensors.update(safetensors_io.read_file_tensors(file))
  values, missing, unknown = params_from_tensors(cfg, tensors)
  load_params(model, values, missing=missing, unknown=unknown, source=path)
  return model


def model_tensors(model: LlamaForCausalLM) -> dict[str, np.ndarray]:
  """transformers' tensors ([out, in]) of `model`."""
  cfg = model.config
  flat = {tuple(str(p) for p in path): np.asarray(jax.device_get(var[...]))
          for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param))}

  def arr(w, transpose):
    return np.ascontiguousarray(np.swapaxes(w, -1, -2) if transpose else w)

  out = {name: arr(flat[path], t) for path, name, t in top_names(cfg)}
  for path, suffix, t in layer_names(cfg):
    stack = flat[("layers",) + path]
    for i in range(cfg.num_hidden_layers):
      out[f"model.layers.{i}.{suffix}"] = arr(stack[i], t)
  return out


def write(model: LlamaForCausalLM, path: str, max_shard_bytes: int = 0) -> None:
  """config.json and the safetensors (one file, or shards of at most
  `max_shard_bytes` with an index when > 0) that transformers loads."""
  os.makedirs(path, exist_ok=True)
  hf: dict[str, Any] = model.config.to_hf_config()
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(hf, f, indent=2, sort_keys=True)
  safetensors_io.save_tensors(model_tensors(model), path, max_shard_bytes)
