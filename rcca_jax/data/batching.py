"""Host-side batches: the shuffled epoch stream and rows of prompt + response.

`batch_indices` walks an endless stream of per-epoch permutations, so a run that
resumes at data position k draws the same batches as one that never stopped
(`grouped_batch_indices`: the same stream, batches of similar lengths);
`pack_batch` lays out right-padded rows in the train step's layout (nothing is cut;
`bucket_length` picks a batch's row length from its longest row);
`sft_batch` packs SFT examples with it, one per row, or several per row
(`packed_sft_batch`: `attention_mask` then holds segment ids, which the dense model
reads as separate sequences; no FLOPs spent on padding a short example to `max_len`).
"""

from typing import Mapping, Optional, Sequence

import numpy as np


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
  """The permutation of `n` items used in `epoch`."""
  return np.random.default_rng([seed, epoch]).permutation(n)


def batch_indices(n: int, batch_size: int, position: int, seed: int) -> list[int]:
  """Indices of batch number `position` of the endless, per-epoch shuffled stream."""
  orders: dict[int, np.ndarray] = {}  # A batch spans at most a few epochs.
  out = []
  for k in range(position * batch_size, (position + 1) * batch_size):
    epoch, i = divmod(k, n)
    if epoch not in orders:
      orders[epoch] = epoch_order(n, seed, epoch)
    out.append(int(orders[epoch][i]))
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


def prefix_batch(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], *,
                 group_size: int, prompt_len: int, response_len: int, pad_id: int = 0,
                 per_token: Optional[Mapping[str, Sequence[Sequence[float]]]] = None,
                 per_sequence: Optional[Mapping[str, Sequence[float]]] = None,
                 token_fill: Optional[Mapping[str, float]] = None
                 ) -> dict[str, np.ndarray]:
  """`pack_batch`'s batch with each group's prompt stored once (`rl.shared_prefix`).

  Rows `g * group_size ..` form group g and must share one prompt. `prompt_ids` and
  `prompt_mask` are [B / group_size, prompt_len], left-padded (every prompt ends in the
  last column, whose prediction is the first response token's); `input_ids`,
  `attention_mask`, `loss_mask` (1 on response tokens) and `per_token` arrays are
  [B, response_len], the responses alone, right-padded; `per_sequence` arrays [B]. A
  prompt or response longer than its width is an error naming the rows.
  """
  if group_size < 1 or len(prompts) % group_size:
    raise ValueError(f"{len(prompts)} rows are not groups of {group_size}")
  if len(prompts) != len(responses):
    raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
  problems = [f"row {i}: its prompt differs from row {i - i % group_size}'s"
              for i, p in enumerate(prompts) if list(p) != list(prompts[i - i % group_size])]
  problems += [f"row {i}: {len(p)} prompt tokens > {prompt_len}"
               for i, p in enumerate(prompts) if len(p) > prompt_len]
  problems += [f"row {i}: {len(r)} response tokens > {response_len}"
               for i, r in enumerate(responses) if len(r) > response_len]
  if problems:
    raise ValueError("shared-prefix batch: " + "; ".join(problems))
  out = pack_batch([[]] * len(responses), responses, max_len=response_len, pad_id=pad_id,
                   per_token=per_token, per_sequence=per_sequence, token_fill=token_fill)
  groups = len(prompts) // group_size
  out["prompt_ids"] = np.full((groups, prompt_len), pad_id, np.int32)
  out["prompt_mask"] = np.zeros((groups, prompt_len), np.float32)
  for g in range(groups):
    prompt = list(prompts[g * group_size])
    if prompt:
      out["prompt_ids"][g, -len(prompt):] = prompt
      out["prompt_mask"][g, -len(prompt):] = 1.0
  return out


def grouped_batch_indices(lengths: Sequence[int], batch_size: int, position: int,
                          seed: int, group: int) -> list[int]:
  """Batch `position` of the stream with length grouping: each window of `group`
  consecutive batches of the shuffled stream (`batch_indices`) is sorted by length and
  cut into `group` batches of similar lengths, taken in an order shuffled per window.
  Every example still comes once per epoch; a batch's rows then need little padding
  (`bucket_length`). `group` <= 1: `batch_indices`."""
  if group <= 1:
    return batch_indices(len(lengths), batch_size, position, seed)
  window, j = divmod(position, group)
  window_idx = batch_indices(len(lengths), batch_size * group, window, seed)
  window_idx.sort(key=lambda i: lengths[i])  # stable: ties keep the stream's order
  k = int(np.random.default_rng([seed, window, group]).permutation(group)[j])
  return window_idx[k * batch_size:(k + 1) * batch_size]


def bucket_length(longest: int, max_len: int, bucket: int) -> int:
  """A batch's row length: its `longest` row rounded up to a multiple of `bucket`, at
  most `max_len` (`bucket` 0: always `max_len`). A batch of rows up to `longest`
  tokens then costs what its own rows need, and a run compiles at most
  `ceil(max_len / bucket)` shapes. A row longer than `max_len` gets `max_len` (for
  `pack_batch` to refuse it)."""
  if bucket < 0:
    raise ValueError(f"bucket={bucket} must be >= 0 (0: always max_len)")
  if not bucket:
    return max_len
  return min(max_len, max(bucket, -(-longest // bucket) * bucket))


def sft_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], *, max_len: int,
              pad_id: int, bucket: int = 0) -> dict[str, np.ndarray]:
  """`pack_batch` of SFT examples `(ids, loss_mask)`, whose mask is 0 over the prompt
  and 1 over the answer (`chat.format_sft_example`); rows of `bucket_length` tokens."""
  prompts, answers = [], []
  for ids, mask in examples:
    start = list(mask).index(1) if 1 in mask else len(ids)
    prompts.append(ids[:start])
    answers.append(ids[start:])
  longest = max((len(ids) for ids, _ in examples), default=0)
  return pack_batch(prompts, answers, max_len=bucket_length(longest, max_len, bucket),
                    pad_id=pad_id)


def first_fit(lengths: Sequence[int], rows: int, max_len: int) -> Optional[list[list[int]]]:
  """Indices of `lengths` placed in `rows` bins of `max_len`, longest first, each into
  the first bin with room (in their original order within a bin); None when they do
  not fit."""
  bins: list[list[int]] = [[] for _ in range(rows)]
  room = [max_len] * rows
  for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
    j = next((j for j in range(rows) if room[j] >= lengths[i]), None)
    if j is None:
      return None
    bins[j].append(i)
    room[j] -= lengths[i]
  return [sorted(b) for b in bins]


def packed_sft_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], *,
                     rows: int, max_len: int, pad_id: int) -> Optional[dict[str, np.ndarray]]:
  """SFT examples `(ids, loss_mask)` packed into `rows` rows of `max_len` (`first_fit`):
  `attention_mask` holds each example's segment id (1, 2, ... along its row; 0 for
  padding), `loss_mask` the examples' own masks. None when they do not fit."""
  lengths = [len(ids) for ids, _ in examples]
  long_rows = [f"example {i}: {n} tokens" for i, n in enumerate(lengths) if n > max_len]
  if long_rows:
    raise ValueError(f"SFT example longer than max_len={max_len}: " + "; ".join(long_rows))
  bins = first_fit(lengths, rows, max_len)
  if bins is None:
    return None
  out = {"input_ids": np.full((rows, max_len), pad_id, np.int32),
         "attention_mask": np.zeros((rows, max_len), np.float32),
         "loss_mask": np.zeros((rows, max_len), np.float32)}
  for r, members in enumerate(bins):
    at = 0
    for segment, i in enumerate(members, start=1):
      ids, mask = examples[i]
      out["input_ids"][r, at:at + len(ids)] = ids
      out["attention_mask"][r, at:at + len(ids)] = segment
      out["loss_mask"][r, at:at + len(ids)] = mask
      at += len(ids)
  return out


def loss_positions(loss_mask: np.ndarray, bucket: int = 0) -> np.ndarray:
  """[B, R] int32: each row's positions t >= 1 whose token the loss reads
  (`loss_mask` > 0), in order, padded with 0 (position 0 is never a target); R the
  most of any row, rounded up to a multiple of `bucket` (0: R = the row length), at
  most the row length. The LM head then runs at these targets' positions alone
  (`functional.selected_token_logprobs`)."""
  mask = np.asarray(loss_mask) > 0
  mask[:, 0] = False
  counts = mask.sum(axis=1)
  width = bucket_length(int(counts.max(initial=1)), mask.shape[1], bucket)
  out = np.zeros((mask.shape[0], width), np.int32)
  for row, n in enumerate(counts):
    out[row, :n] = np.flatnonzero(mask[row])
  return out


def packed_rows(lengths: Sequence[int], batch_size: int, max_len: int, *,
                multiple: int = 1, share: float = 0.98, trials: int = 200,
                seed: int = 0) -> int:
  """The fewest rows of `max_len` (a multiple of `multiple`: the batch axis) into which
  at least `share` of `trials` random batches of `batch_size` of these example lengths
  fit (`first_fit`); `batch_size` when packing saves no row."""
  rng = np.random.default_rng(seed)
  draws = [[lengths[i] for i in rng.integers(0, len(lengths), batch_size)]
           for _ in range(trials)]
  lo = max(1, -(-int(np.mean([sum(d) for d in draws])) // max_len))
  for rows in range(-(-lo // multiple) * multiple, batch_size, multiple):
    if np.mean([first_fit(d, rows, max_len) is not None for d in draws]) >= share:
      return rows
  return batch_size


def sft_rows(examples: Sequence[tuple[Sequence[int], Sequence[int]]], *, rows: int,
             max_len: int, pad_id: int, bucket: int = 0) -> dict[str, np.ndarray]:
  """`packed_sft_batch` into `rows` rows when `rows` > 0 and the examples fit, else
  `sft_batch` (one example per row, `bucket`: its row length)."""
  batch = (packed_sft_batch(examples, rows=rows, max_len=max_len, pad_id=pad_id)
           if 0 < rows < len(examples) else None)
  return batch if batch is not None else sft_batch(examples, max_len=max_len,
                                                   pad_id=pad_id, bucket=bucket)
