"""Parameter counts and per-device memory of a model config, from abstract shapes.

    python -m rcca_jax.models.summary --config=experiments/moe_124b.py \
        [--mesh=data:1,fsdp:64,expert:8,tensor:1]

The last line printed is JSON with total_params, active_params (what one token uses:
all non-expert parameters except an untied input embedding table, plus top_k/num_experts of
the routed experts) and, for the mesh, the largest per-device parameter and AdamW
optimizer-state (two float32 moments) bytes. Nothing is allocated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from absl import app, flags
from flax import nnx
from ml_collections import config_flags

from rcca_jax.models import families
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.parallel.partitioning import variable_spec

_EXPERT_LEAVES = ("w_gate", "w_up", "w_down")


def config_from_dict(model: Mapping[str, Any]) -> families.ModelConfig:
  """The model config of a job config's `model` fields (`family` picks the class)."""
  return families.config_from_fields(model)


def abstract_model(cfg: families.ModelConfig):
  """The model with ShapeDtypeStruct parameters (nothing allocated)."""
  return families.abstract(cfg)


def _params(model) -> list[tuple[tuple[str, ...], Any]]:
  return [(tuple(str(p) for p in path), var)
          for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param))]


def count_params(model) -> dict[str, int]:
  cfg = model.config
  total = routed = embedding = 0
  for path, var in _params(model):
    n = math.prod(var.shape)
    total += n
    if path[-2:-1] == ("mlp",) and path[-1] in _EXPERT_LEAVES:
      routed += n
    elif path == ("embed_tokens", "embedding"):
      embedding += n
  # A tied table is the LM head as well, which every token uses.
  active = total - routed - (0 if model.lm_head is None else embedding)
  if routed:
    active += routed * cfg.num_experts_per_tok // cfg.num_local_experts
  return {"total_params": total, "active_params": active, "routed_expert_params": routed,
          "embedding_params": embedding}


def per_device_bytes(model, mesh_spec: str | Mapping[str, int]
                     ) -> dict[str, int]:
  """Bytes on the most loaded device: parameters, and AdamW moments (2 x float32)."""
  mesh = mesh_lib.abstract_mesh(mesh_spec)
  param_bytes = opt_bytes = 0
  for _, var in _params(model):
    spec = variable_spec(var, mesh)
    shards = 1
    for entry in spec:
      for name in (entry,) if isinstance(entry, str) else (entry or ()):
        shards *= mesh.shape[name]
    local = math.ceil(math.prod(var.shape) / shards)
    param_bytes += local * var.dtype.itemsize
    opt_bytes += local * 2 * 4
  return {"param_bytes_per_device": param_bytes, "optimizer_bytes_per_device": opt_bytes,
          "num_devices": math.prod(mesh.shape.values())}


def summarize(model_config: Mapping[str, Any] | families.ModelConfig,
              mesh_spec: str | Mapping[str, int] | None = None) -> dict[str, Any]:
  cfg = (config_from_dict(model_config) if isinstance(model_config, Mapping)
         else model_config)
  model = abstract_model(cfg)
  out: dict[str, Any] = count_params(model)
  out["family"] = families.family_of_config(cfg)
  out["num_layers"] = cfg.num_hidden_layers
  schedule = (cfg.layer_schedule() if isinstance(cfg, families.LingConfig)
              else (0, 1, cfg.num_hidden_layers))  # Llama: every layer in one scan
  out["layer_schedule"] = dict(zip(("unrolled", "period", "groups"), schedule))
  if mesh_spec is not None:
    out["mesh"] = mesh_lib.parse_mesh_spec(mesh_spec)
    out.update(per_device_bytes(model, mesh_spec))
  return out


_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_MESH = flags.DEFINE_string("mesh", None, "Mesh like data:1,fsdp:64,expert:8,tensor:1; "
                            "default: the config's `mesh`.")


def main(argv):
  del argv
  config = _CONFIG.value
  if config is None:
    raise app.UsageError("--config=experiments/NAME.py is required")
  mesh_spec = _MESH.value or (dict(config.mesh) if "mesh" in config else None)
  result = summarize(config.model.to_dict(), mesh_spec)
  print(f"total {result['total_params'] / 1e9:.3f}B, active {result['active_params'] / 1e9:.3f}B")
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
