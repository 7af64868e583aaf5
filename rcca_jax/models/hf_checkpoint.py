"""Conversion between `bailing_hybrid` safetensors checkpoints and `LingForCausalLM`.

Reads either spelling of tensor names (the official checkpoint names, which
transformers' `save_pretrained` also writes, and transformers' in-memory names),
per-expert or packed experts, a single file or a sharded index; skips MTP layers; and
fails with one message listing every unknown, missing or mis-shaped tensor. Writes the
official spelling, which transformers loads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, traverse_util

from rcca_jax.models import safetensors_io
from rcca_jax.models.config import LingConfig
from rcca_jax.models.safetensors_io import Path

# Other spelling -> official spelling (applied in order, on the full name).
_RENAMES = (
  (re.compile(r"^model\.embed_tokens\."), "model.word_embeddings."),
  (re.compile(r"\.self_attn\."), ".attention."),
  (re.compile(r"\.attention\.forget_gate\."), ".attention."),
  (re.compile(r"\.attention\.o_proj\."), ".attention.dense."),
  (re.compile(r"\.mlp\.gate\.e_score_correction_bias$"), ".mlp.gate.expert_bias"),
)
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.*)$")
_MTP = re.compile(r"(^|\.)mtp[._]")


def canonical_name(name: str) -> str:
  for pattern, repl in _RENAMES:
    name = pattern.sub(repl, name)
  return name


# ---- files --------------------------------------------------------------------


def read_tensors(path: str) -> dict[str, np.ndarray]:
  """All tensors of a checkpoint directory, keyed by their official names."""
  out: dict[str, np.ndarray] = {}
  for file in safetensors_io.safetensors_files(path):
    for key, value in safetensors_io.read_file_tensors(file).items():
      out[canonical_name(key)] = value
  return out


# ---- one decoder layer --------------------------------------------------------


def _t(w: np.ndarray) -> np.ndarray:
  return np.ascontiguousarray(np.asarray(w).T)


_MLA_LINEARS = ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",
                "g_proj")


def _mla_names(cfg: LingConfig) -> list[tuple[Path, str, bool]]:
  """(param path, official name suffix, transpose) of an MLA layer."""
  names: list[tuple[Path, str, bool]] = []
  linears = ["kv_a_proj_with_mqa", "kv_b_proj", "g_proj"]
  linears += ["q_proj"] if cfg.q_lora_rank is None else ["q_a_proj", "q_b_proj"]
  for name in linears:
    names.append((("self_attn", name, "kernel"), f"attention.{name}.weight", True))
  names.append((("self_attn", "o_proj", "kernel"), "attention.dense.weight", True))
  norms = ["kv_a_layernorm"] + ([] if cfg.q_lora_rank is None else ["q_a_layernorm"])
  for name in norms:
    names.append((("self_attn", name, "weight"), f"attention.{name}.weight", False))
  if cfg.attention_bias:
    biased = ["kv_a_proj_with_mqa", "dense"] + ([] if cfg.q_lora_rank is None else ["q_a_proj"])
    for name in biased:
      module = "o_proj" if name == "dense" else name
      names.append((("self_attn", module, "bias"), f"attention.{name}.bias", False))
  return names


def _mlp_names(prefix: str, module: Path) -> list[tuple[Path, str, bool]]:
  return [(module + (n, "kernel"), f"{prefix}{n}.weight", True)
          for n in ("gate_proj", "up_proj", "down_proj")]


def layer_from_hf(cfg: LingConfig, kind: tuple[str, str], tensors: dict[str, np.ndarray],
                  layer_prefix: str) -> dict[Path, np.ndarray]:
  """Converts one layer's tensors (popping what it uses) to {param path: array}."""
  from rcca_jax.models import kda  # pylint: disable=import-outside-toplevel

  out: dict[Path, np.ndarray] = {}
  missing: list[str] = []

  def take(name: str) -> np.ndarray | None:
    key = layer_prefix + name
    if key not in tensors:
      missing.append(key)
      return None
    return tensors.pop(key)

  def put(path: Path, name: str, transpose: bool):
    w = take(name)
    if w is not None:
      out[path] = _t(w) if transpose else np.asarray(w)

  attn, mlp = kind
  for path, name, transpose in [
      (("input_layernorm", "weight"), "input_layernorm.weight", False),
      (("post_attention_layernorm", "weight"), "post_attention_layernorm.weight", False)]:
    put(path, name, transpose)
  if attn == "full_attention":
    for path, name, transpose in _mla_names(cfg):
      put(path, name, transpose)
  else:
    prefix = layer_prefix + "attention."
    try:
      params, consumed = kda.kda_params_from_hf(tensors, prefix)
    except KeyError as e:
      missing.append(str(e.args[0]))
    else:
      for key in consumed:
        tensors.pop(key)
      for path, value in traverse_util.flatten_dict(params).items():
        out[("self_attn",) + tuple(path)] = value
  if mlp == "dense":
    for path, name, transpose in _mlp_names("mlp.", ("mlp",)):
      put(path, name, transpose)
  else:
    put(("mlp", "router"), "mlp.gate.weight", True)
    put(("mlp", "correction_bias"), "mlp.gate.expert_bias", False)
    if cfg.n_shared_experts:
      for path, name, transpose in _mlp_names("mlp.shared_experts.", ("mlp", "shared_experts")):
        put(path, name, transpose)
    else:  # transformers keeps zero-sized shared-expert weights; they hold nothing.
      for _, name, _ in _mlp_names("mlp.shared_experts.", ()):
        if layer_prefix + name in tensors and tensors[layer_prefix + name].size == 0:
          tensors.pop(layer_prefix + name)
    out.update(_experts_from_hf(cfg, tensors, layer_prefix + "mlp.experts.", missing))
  if missing:
    raise KeyError("; ".join(missing))
  return out


def _experts_from_hf(cfg: LingConfig, tensors: dict[str, np.ndarray], prefix: str,
                     missing: list[str]) -> dict[Path, np.ndarray]:
  i = cfg.moe_intermediate_size
  if prefix + "gate_up_proj" in tensors:  # Packed [E, 2I, D] and [E, D, I].
    gate_up = tensors.pop(prefix + "gate_up_proj")
    if prefix + "down_proj" not in tensors:
      missing.append(prefix + "down_proj")
      return {}
    down = tensors.pop(prefix + "down_proj")
    return {("mlp", "w_gate"): np.ascontiguousarray(gate_up[:, :i].transpose(0, 2, 1)),
            ("mlp", "w_up"): np.ascontiguousarray(gate_up[:, i:].transpose(0, 2, 1)),
            ("mlp", "w_down"): np.ascontiguousarray(down.transpose(0, 2, 1))}
  stacks: dict[str, list[np.ndarray]] = {"gate_proj": [], "up_proj": [], "down_proj": []}
  for e in range(cfg.num_local_experts):
    for name, stack in stacks.items():
      key = f"{prefix}{e}.{name}.weight"
      if key in tensors:
        stack.append(_t(tensors.pop(key)))
      else:
        missing.append(key)
  if any(len(s) != cfg.num_local_experts for s in stacks.values()):
    return {}
  return {("mlp", "w_gate"): np.stack(stacks["gate_proj"]),
          ("mlp", "w_up"): np.stack(stacks["up_proj"]),
          ("mlp", "w_down"): np.stack(stacks["down_proj"])}


def layer_to_hf(cfg: LingConfig, kind: tuple[str, str], params: Mapping[Path, np.ndarray],
                layer_prefix: str, kda_module=None) -> dict[str, np.ndarray]:
  """Inverse of `layer_from_hf` (official names); `kda_module` for KDA layers."""
  from rcca_jax.models import kda  # pylint: disable=import-outside-toplevel

  out: dict[str, np.ndarray] = {}
  names = [(("input_layernorm", "weight"), "input_layernorm.weight", False),
           (("post_attention_layernorm", "weight"), "post_attention_layernorm.weight", False)]
  attn, mlp = kind
  if attn == "full_attention":
    names += _mla_names(cfg)
  else:
    out.update(kda.kda_params_to_hf(kda_module, layer_prefix + "attention."))
  if mlp == "dense":
    names += _mlp_names("mlp.", ("mlp",))
  else:
    names += [(("mlp", "router"), "mlp.gate.weight", True),
              (("mlp", "correction_bias"), "mlp.gate.expert_bias", False)]
    if cfg.n_shared_experts:
      names += _mlp_names("mlp.shared_experts.", ("mlp", "shared_experts"))
    for e in range(cfg.num_local_experts):
      for path, name in ((("mlp", "w_gate"), "gate_proj"), (("mlp", "w_up"), "up_proj"),
                         (("mlp", "w_down"), "down_proj")):
        out[f"{layer_prefix}mlp.experts.{e}.{name}.weight"] = _t(params[path][e])
  for path, name, transpose in names:
    w = np.asarray(params[path])
    out[layer_prefix + name] = _t(w) if transpose else w
  return out


# ---- whole model --------------------------------------------------------------


def load_hf_tensors(model: nnx.Module, tensors: dict[str, np.ndarray], *, source: str) -> None:
  """Fills `model` (possibly abstract, from nnx.eval_shape) from official-name tensors.

  Raises ValueError listing unknown, missing and mis-shaped tensors.
  """
  cfg: LingConfig = model.config
  tensors = dict(tensors)
  skipped = [k for k in tensors if _MTP.search(k) or (
    (m := _LAYER.match(k)) and int(m.group(1)) >= cfg.num_hidden_layers)]
  for k in skipped:
    tensors.pop(k)

  values: dict[Path, np.ndarray] = {}
  missing: list[str] = []

  def top(path: Path, name: str, transpose: bool):
    if name in tensors:
      w = tensors.pop(name)
      values[path] = _t(w) if transpose else np.asarray(w)
    else:
      missing.append(name)

  top(("embed_tokens", "embedding"), "model.word_embeddings.weight", False)
  top(("norm", "weight"), "model.norm.weight", False)
  if "lm_head.weight" not in tensors and cfg.tie_word_embeddings and (
      ("embed_tokens", "embedding") in values):
    values[("lm_head", "kernel")] = _t(values[("embed_tokens", "embedding")])
  else:
    top(("lm_head", "kernel"), "lm_head.weight", True)

  grouped: dict[Path, list[np.ndarray | None]] = {}
  for i in range(cfg.num_hidden_layers):
    try:
      layer = layer_from_hf(cfg, cfg.layer_kind(i), tensors, f"model.layers.{i}.")
    except KeyError as e:
      missing.append(str(e.args[0]))
      continue
    group, pos = model.layer_location(i)
    for rel, value in layer.items():
      if group is None:
        values[("layers", str(i)) + rel] = value
      else:
        key = ("groups", "layers", str(pos)) + rel
        grouped.setdefault(key, [None] * model.num_groups)[group] = value
  for key, stack in grouped.items():
    if all(s is not None for s in stack):
      values[key] = np.stack(stack)

  flat = safetensors_io.flat_state(model)
  safetensors_io.check_fill(flat, values, unknown=sorted(tensors), missing=missing, source=source)
  for path, var in flat.items():
    var.set_value(jnp.asarray(values[path], dtype=var.dtype))


def _layer_module(model, i: int):
  """The decoder layer `i` as a standalone module (a slice of the stack if scanned)."""
  group, pos = model.layer_location(i)
  if group is None:
    return model.layers[pos]
  graphdef, state = nnx.split(model.groups.layers[pos])
  return nnx.merge(graphdef, jax.tree.map(lambda a: a[group], state))


def model_to_hf_tensors(model: nnx.Module) -> dict[str, np.ndarray]:
  cfg: LingConfig = model.config

  def arr(v):
    return np.asarray(jax.device_get(v[...]))

  out = {"model.word_embeddings.weight": arr(model.embed_tokens.embedding),
         "model.norm.weight": arr(model.norm.weight),
         "lm_head.weight": _t(arr(model.lm_head.kernel))}
  for i in range(cfg.num_hidden_layers):
    layer = _layer_module(model, i)
    params = {tuple(str(p) for p in path): arr(var)
              for path, var in nnx.to_flat_state(nnx.state(layer, nnx.Param))}
    out.update(layer_to_hf(cfg, cfg.layer_kind(i), params, f"model.layers.{i}.",
                           kda_module=layer.self_attn))
  return out


def write_hf(model: nnx.Module, path: str) -> None:
  """Writes config.json and model.safetensors (official tensor names)."""
  os.makedirs(path, exist_ok=True)
  cfg: LingConfig = model.config
  hf = cfg.to_hf_config()
  hf["num_mtp_layers"] = 0  # No MTP weights are written.
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(hf, f, indent=2, sort_keys=True)
  safetensors_io.save_tensors(model_to_hf_tensors(model), path)
