"""The check of a host batch before a train step: `numpy_batch` returns the arrays an
objective's keys name, in the step's dtypes, or raises naming what is wrong
(`NonFiniteBatch` for NaN or inf).

The rows themselves are laid out by `data.batching.pack_batch` (or `prefix_batch`).
"""

from typing import Any, Mapping

import numpy as np


class NonFiniteBatch(ValueError):
  """A batch with NaN or inf where numbers must be finite (e.g. log-probs of a policy
  whose parameters diverged)."""


def numpy_batch(batch: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """Checks a host batch and returns the arrays the step uses, in its dtypes.

  Per-token values outside response tokens are replaced by neutral ones (0, or 1
  for `wbar`); raises ValueError naming the entry (and rows) that is wrong.
  """
  missing = [k for k in keys if k not in batch]
  if missing:
    raise ValueError(f"batch is missing {missing}; it has {sorted(batch)}")
  ids = np.asarray(batch["input_ids"])
  if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
    raise ValueError(f"input_ids must be an integer [B, L] array, got {ids.dtype} "
                     f"{ids.shape}")
  out = {"input_ids": ids.astype(np.int32)}
  prompts = _prompts(batch, keys, len(ids))
  positions = _positions(batch, keys, ids.shape)
  for name in keys:
    if name == "input_ids" or name in prompts or name in positions:
      continue
    x = np.asarray(batch[name], np.float32)
    want = ids.shape[:1] if name == "advantages" else ids.shape
    if x.shape != want:
      raise ValueError(f"{name} has shape {x.shape}, expected {want}")
    out[name] = x
  mask = out["loss_mask"]
  if np.any(mask[:, 0]) and not prompts:
    raise ValueError("loss_mask[:, 0] must be 0: the first token has no prefix")
  for name, x in out.items():
    if name in ("input_ids", "loss_mask", "attention_mask", "advantages"):
      bad = ~np.isfinite(x) if x.dtype != np.int32 else np.zeros_like(x, bool)
    else:
      x = np.where(mask > 0, x, 1.0 if name == "wbar" else 0.0).astype(np.float32)
      out[name] = x
      bad = ~np.isfinite(x)
    if bad.any():
      rows = sorted(set(np.nonzero(bad.reshape(bad.shape[0], -1))[0].tolist()))
      raise NonFiniteBatch(f"{name} has non-finite values in rows {rows}")
  return {**out, **prompts, **positions}


def _positions(batch: Mapping[str, Any], keys: tuple[str, ...], shape: tuple[int, int]
               ) -> dict[str, np.ndarray]:
  """A batch's `loss_positions` [B, R] (int32, each in [0, L): `batching.loss_positions`);
  {} for a batch without them."""
  if "loss_positions" not in keys:
    return {}
  x = np.asarray(batch["loss_positions"])
  if (x.ndim != 2 or x.shape[0] != shape[0] or not np.issubdtype(x.dtype, np.integer)
      or x.min(initial=0) < 0 or x.max(initial=0) >= shape[1]):
    raise ValueError(f"loss_positions {x.dtype} {x.shape} must be an integer [B, R] array "
                     f"of positions in [0, {shape[1]}), B = {shape[0]} rows")
  return {"loss_positions": x.astype(np.int32)}


def _prompts(batch: Mapping[str, Any], keys: tuple[str, ...], rows: int
             ) -> dict[str, np.ndarray]:
  """A shared-prefix batch's `prompt_ids` (int32) and `prompt_mask` [G, P], G dividing
  the B rows (`data.batching.prefix_batch`); {} for a batch without them."""
  if "prompt_ids" not in keys:
    return {}
  ids = np.asarray(batch["prompt_ids"])
  mask = np.asarray(batch["prompt_mask"], np.float32)
  if (ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer) or mask.shape != ids.shape
      or not len(ids) or rows % len(ids)):
    raise ValueError(f"prompt_ids {ids.dtype} {ids.shape} and prompt_mask {mask.shape} "
                     f"must be [G, P], integer and float, G dividing the {rows} rows")
  return {"prompt_ids": ids.astype(np.int32), "prompt_mask": mask}
