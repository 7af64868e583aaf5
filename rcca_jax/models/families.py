"""One entry point for every model family: Ling hybrids and dense Llama-family decoders.

A family is picked by a checkpoint's `config.json` `model_type` (`from_hf`) or by a job
config's `model.family` field (`config_from_fields`, for models built from scratch):
"ling" (`bailing_hybrid`, `LingForCausalLM`) or "llama" / "qwen2" / "mistral"
(`LlamaForCausalLM`, its `model_type` the family's name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
from flax import nnx

from rcca_jax.models import config as ling_config
from rcca_jax.models import llama_checkpoint
from rcca_jax.models import llama_config
from rcca_jax.models import safetensors_io
from rcca_jax.models.config import LingConfig
from rcca_jax.models.ling import LingForCausalLM
from rcca_jax.models.llama import LlamaForCausalLM
from rcca_jax.models.llama_config import LlamaConfig

FAMILIES = ("ling",) + llama_config.MODEL_TYPES
DEFAULT_FAMILY = "ling"
_MODEL_TYPES = {"bailing_hybrid": "ling", **{t: t for t in llama_config.MODEL_TYPES}}

ModelConfig = LingConfig | LlamaConfig


def check_family(family: str) -> str:
  if family not in FAMILIES:
    raise ValueError(f"model.family={family!r}; expected one of {', '.join(FAMILIES)}")
  return family


def family_of(hf_config: Mapping[str, Any], source: str = "config.json") -> str:
  """The family of a checkpoint's config.json dictionary (by `model_type`)."""
  model_type = hf_config.get("model_type")
  if model_type not in _MODEL_TYPES:
    raise ValueError(f"{source}: model_type={model_type!r} is not supported; expected one "
                     f"of {', '.join(sorted(_MODEL_TYPES))}")
  return _MODEL_TYPES[model_type]


def runtime_fields(family: str) -> tuple[str, ...]:
  """Config fields that select how JAX computes (not the architecture)."""
  if check_family(family) == "ling":
    return ling_config.RUNTIME_FIELDS
  return llama_config.RUNTIME_FIELDS


def runtime_overrides(family: str, fields: Mapping[str, Any],
                      exclude: tuple[str, ...] = ()) -> dict[str, Any]:
  """The entries of job config `model` fields that are runtime fields of `family`."""
  return {k: v for k, v in fields.items()
          if k in runtime_fields(family) and k not in exclude}


def config_from_fields(fields: Mapping[str, Any]) -> ModelConfig:
  """The model config of job config `model` fields (`family` picks the class)."""
  fields = dict(fields)
  family = check_family(fields.pop("family", DEFAULT_FAMILY))
  if family == "ling":
    return LingConfig(**fields)
  return LlamaConfig(**{"model_type": family, **fields})


def config_from_hf(hf_config: Mapping[str, Any], **overrides) -> ModelConfig:
  """The model config of a checkpoint's config.json dictionary."""
  if family_of(hf_config) == "ling":
    return LingConfig.from_hf_config(dict(hf_config), **overrides)
  return LlamaConfig.from_hf_config(dict(hf_config), **overrides)


def family_of_config(cfg: ModelConfig) -> str:
  return "ling" if isinstance(cfg, LingConfig) else cfg.model_type


def build(cfg: ModelConfig, rngs: nnx.Rngs) -> nnx.Module:
  """A freshly initialised model of `cfg`'s family."""
  if isinstance(cfg, LingConfig):
    return LingForCausalLM(cfg, rngs=rngs)
  return LlamaForCausalLM(cfg, rngs=rngs)


def abstract(cfg: ModelConfig) -> nnx.Module:
  """The model with ShapeDtypeStruct parameters (nothing allocated)."""
  return nnx.eval_shape(lambda: build(cfg, nnx.Rngs(0)))


def from_hf(path: str, dtype=jnp.float32, **config_overrides) -> nnx.Module:
  """Loads a checkpoint directory with the class its config.json `model_type` names.

  `dtype` is the parameter and compute dtype; keyword arguments override config fields
  (runtime fields such as remat=True).
  """
  family = family_of(safetensors_io.read_config(path), f"{path}/config.json")
  if family == "ling":
    return LingForCausalLM.from_hf(path, dtype=dtype, **config_overrides)
  return llama_checkpoint.load(path, dtype=dtype, **config_overrides)
