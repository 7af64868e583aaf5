"""Host-side batch packing: rows of prompt + response into the step's arrays.

`pack_batch` lays out right-padded rows (nothing is cut); `numpy_batch` checks a
host batch against an objective's keys and converts it to the step's dtypes.
"""

from typing import Any, Mapping, Optional, Sequence

import numpy as np


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
  for name in keys:
    if name == "input_ids":
      continue
    x = np.asarray(batch[name], np.float32)
    want = ids.shape[:1] if name == "advantages" else ids.shape
    if x.shape != want:
      raise ValueError(f"{name} has shape {x.shape}, expected {want}")
    out[name] = x
  mask = out["loss_mask"]
  if np.any(mask[:, 0]):
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
      raise ValueError(f"{name} has non-finite values in rows {rows}")
  return out


def pack_batch(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], *,
               max_len: int, pad_id: int = 0,
               per_token: Optional[Mapping[str, Sequence[Sequence[float]]]] = None,
               per_sequence: Optional[Mapping[str, Sequence[float]]] = None,
               token_fill: Optional[Mapping[str, float]] = None
               ) -> dict[str, np.ndarray]:
  """Right-padded [B, max_len] rows `prompt + response` in the step's batch layout.

  `per_token[name][i]` holds one value per response token of row i (e.g. the
  sampler's log-probs or the diagnostic weights); it is placed at those tokens'
  positions, `token_fill[name]` (default 0) elsewhere. Nothing is cut: a row longer
  than `max_len` is an error naming the rows (the sampler and the loss must see the
  same tokens).
  """
  if len(prompts) != len(responses):
    raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
  long_rows = [f"row {i}: {len(p)} + {len(r)} tokens"
               for i, (p, r) in enumerate(zip(prompts, responses))
               if len(p) + len(r) > max_len]
  if long_rows:
    raise ValueError(f"prompt + response longer than max_len={max_len}: "
                     + "; ".join(long_rows))
  per_token = dict(per_token or {})
  token_fill = dict(token_fill or {})
  b = len(prompts)
  out = {"input_ids": np.full((b, max_len), pad_id, np.int32),
         "attention_mask": np.zeros((b, max_len), np.float32),
         "loss_mask": np.zeros((b, max_len), np.float32)}
  for name in per_token:
    out[name] = np.full((b, max_len), token_fill.get(name, 0.0), np.float32)
  for i, (prompt, response) in enumerate(zip(prompts, responses)):
    prompt = list(prompt)
    row = prompt + list(response)
    out["input_ids"][i, :len(row)] = row
    out["attention_mask"][i, :len(row)] = 1.0
    out["loss_mask"][i, len(prompt):len(row)] = 1.0
    for name, values in per_token.items():
      if len(values[i]) != len(response):
        raise ValueError(f"row {i}: {name} has {len(values[i])} values for "
                         f"{len(response)} response tokens")
      out[name][i, len(prompt):len(row)] = np.asarray(values[i], np.float32)
  for name, values in (per_sequence or {}).items():
    out[name] = np.asarray(values, np.float32).reshape(b)
  return out
