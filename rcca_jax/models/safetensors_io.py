"""Safetensors checkpoint directories, for every model family's converter.

Reads config.json and the tensors of a single file or a sharded index, writes tensors
(sharded above a size when asked, with the index transformers reads), and fills a
model's parameters from converted arrays, failing with one message listing every
unknown, missing or mis-shaped tensor.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for safetensors)
import numpy as np
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import save_file

Path = tuple[str, ...]


def read_config(path: str) -> dict[str, Any]:
  file = os.path.join(path, "config.json")
  if not os.path.isfile(file):
    raise FileNotFoundError(f"{file}: no config.json in checkpoint directory")
  with open(file) as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{file}, line {e.lineno}: invalid JSON: {e.msg}") from e


def safetensors_files(path: str) -> list[str]:
  """The checkpoint's safetensors files (from the index when sharded)."""
  index = os.path.join(path, "model.safetensors.index.json")
  if os.path.isfile(index):
    with open(index) as f:
      files = sorted(set(json.load(f)["weight_map"].values()))
    return [os.path.join(path, name) for name in files]
  files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
  if not files:
    raise FileNotFoundError(f"{path}: no *.safetensors files")
  return [os.path.join(path, f) for f in files]


def read_file_tensors(file: str) -> dict[str, np.ndarray]:
  """The tensors of one safetensors file, under their stored names."""
  with safe_open(file, framework="np") as f:
    return {key: f.get_tensor(key) for key in f.keys()}


def save_tensors(tensors: Mapping[str, np.ndarray], path: str,
                 max_shard_bytes: int = 0) -> list[str]:
  """Writes `tensors` as model.safetensors, or (when `max_shard_bytes` > 0 and they do
  not fit in one) as model-0000i-of-0000n.safetensors shards of at most that many
  bytes each (a larger tensor gets a shard of its own) plus the index transformers
  reads. Returns the file names written."""
  names = sorted(tensors)
  shards: list[list[str]] = [[]]
  size = 0
  for name in names:
    nbytes = tensors[name].nbytes
    if max_shard_bytes > 0 and shards[-1] and size + nbytes > max_shard_bytes:
      shards.append([])
      size = 0
    shards[-1].append(name)
    size += nbytes
  if len(shards) == 1:
    files = ["model.safetensors"]
  else:
    files = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
  for file, members in zip(files, shards):
    save_file({k: np.ascontiguousarray(tensors[k]) for k in members},
              os.path.join(path, file), metadata={"format": "pt"})
  if len(files) > 1:
    index = {"metadata": {"total_size": int(sum(t.nbytes for t in tensors.values()))},
             "weight_map": {k: f for f, members in zip(files, shards) for k in members}}
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
      json.dump(index, f, indent=2, sort_keys=True)
  return files


def check_fill(flat: dict[Path, Any], values: dict[Path, Any], *, unknown: list[str],
               missing: list[str], source: str) -> None:
  """Raises ValueError listing what keeps checkpoint `values` from filling the model's
  parameters `flat`: unknown and missing tensors, parameters without a tensor (when
  none is reported missing), and tensors without a parameter or of the wrong shape."""
  problems = []
  if unknown:
    problems.append(f"unknown tensors ({len(unknown)}): {', '.join(unknown[:40])}")
  if missing:
    problems.append(f"missing tensors ({len(missing)}): {'; '.join(missing[:40])}")
  not_filled = sorted(set(flat) - set(values))
  if not_filled and not missing:
    problems.append("parameters without a tensor: "
                    + ", ".join(".".join(p) for p in not_filled[:40]))
  for path, value in values.items():
    if path not in flat:
      problems.append(f"no parameter for {'.'.join(path)}")
    elif tuple(value.shape) != tuple(flat[path].shape):
      problems.append(f"{'.'.join(path)}: checkpoint shape {tuple(value.shape)} "
                      f"!= model shape {tuple(flat[path].shape)}")
  if problems:
    raise ValueError(f"{source}: checkpoint does not match the config: " + " | ".join(problems))


def flat_state(model: nnx.Module) -> dict[Path, Any]:
  return {tuple(str(p) for p in path): var
          for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param))}
