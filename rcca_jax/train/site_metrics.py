"""Exact site metrics: the policy's teacher-forced probability of each known site.

For a controlled task (`credit.sites`), the sequences scored are the reference answer
and, per site, the reference with only that site set to its variant. Each gets the
summed log-probability of its answer tokens (the turn end included) given the prompt,
tokenized exactly as an SFT target (`chat.format_sft_example`). For a bug site,
`p_bug = sigmoid(logp_bug - logp_reference)`: the buggy variant's share of the
probability of {buggy, correct}. No sampling, so no sampling noise
(docs/ablation.md#metrics).

Rows are packed to one fixed shape `[rows, max_len]` (the RL step's) and scored by a
caller-supplied function, so a compiled log-prob function is reused across
evaluations. A sequence longer than `max_len` is skipped and counted.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import batching
from rcca_jax.data import chat

# `score(batch) -> [rows]`: per row, the sum of the answer tokens' log-probabilities
# (batch: `input_ids`, `attention_mask`, `loss_mask` of `pack_batch`).
ScoreFn = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclasses.dataclass(frozen=True)
class SiteSequence:
  """One scored sequence: a task's reference (`site` None) or one site's variant."""
  task_id: str
  site: Optional[sites_lib.Site]
  prompt: list[int]
  answer: list[int]  # answer tokens and the turn end


def p_bug(logp_bug: float, logp_reference: float) -> float:
  """sigmoid(logp_bug - logp_reference), stable for large differences."""
  d = logp_bug - logp_reference
  if d >= 0:
    return 1.0 / (1.0 + math.exp(-d))
  e = math.exp(d)
  return e / (1.0 + e)


def site_sequences(tokenizer: Any, tasks: Sequence[Any],
                   kinds: Optional[Sequence[str]] = None) -> list[SiteSequence]:
  """The reference and every single-site variant of each task that has sites (those
  of `kinds` only, when given: e.g. ("bug",))."""
  out = []
  for task in tasks:
    sites = sites_lib.sites_of(task)
    if not sites:
      continue
    reference = sites_lib.reference_answer(task)
    texts = [(None, reference)] + [
        (s, sites_lib.render(reference, sites, {s.name: True})[0]) for s in sites
        if kinds is None or s.kind in kinds]
    for site, text in texts:
      ids, mask = chat.format_sft_example(tokenizer, task.request, text)
      start = mask.index(1)
      out.append(SiteSequence(task.id, site, ids[:start], ids[start:]))
  return out


def fitted_rows(n: int, rows: int, multiple: int) -> int:
  """Rows for `n` sequences: n rounded up to a power of two, then to a multiple of
  `multiple`, at most `rows`."""
  power = 1 << max(0, (n - 1).bit_length())
  return min(rows, -(-power // multiple) * multiple)


def sequence_logps(score: ScoreFn, sequences: Sequence[SiteSequence], *, rows: int,
                   max_len: int, pad_id: int, length_bucket: int = 0,
                   row_multiple: int = 0) -> np.ndarray:
  """Summed answer log-probability of each sequence, `rows` at a time (the last batch
  filled with copies of its first sequence); NaN for sequences longer than `max_len`.
  Batches are `max_len` long, or with `length_bucket` their longest sequence rounded up
  to a multiple of it (`batching.bucket_length`). With `row_multiple` a batch of fewer
  sequences than `rows` has their number rounded up to a power of two, then to a
  multiple of `row_multiple`, as its rows (at most `rows`)."""
  out = np.full(len(sequences), np.nan)
  fits = [i for i, s in enumerate(sequences) if len(s.prompt) + len(s.answer) <= max_len]
  for lo in range(0, len(fits), rows):
    chunk = fits[lo:lo + rows]
    picked = [sequences[i] for i in chunk]
    height = fitted_rows(len(chunk), rows, row_multiple) if row_multiple else rows
    picked += [picked[0]] * (height - len(picked))
    width = batching.bucket_length(max(len(s.prompt) + len(s.answer) for s in picked),
                                   max_len, length_bucket)
    batch = batching.pack_batch([s.prompt for s in picked], [s.answer for s in picked],
                                max_len=width, pad_id=pad_id)
    sums = np.asarray(score(batch), np.float64)
    if sums.shape != (height,):
      raise ValueError(f"score returned shape {sums.shape}, expected ({height},)")
    out[chunk] = sums[:len(chunk)]
  return out


def site_records(sequences: Sequence[SiteSequence], logps: np.ndarray
                 ) -> tuple[list[dict[str, Any]], int]:
  """One record per (task, site) with both log-probs, and how many sites were left
  out because a sequence (theirs or their task's reference) was too long."""
  reference = {s.task_id: float(lp) for s, lp in zip(sequences, logps) if s.site is None}
  records, skipped = [], 0
  for seq, lp in zip(sequences, logps):
    if seq.site is None:
      continue
    ref = reference[seq.task_id]
    if not (np.isfinite(lp) and np.isfinite(ref)):
      skipped += 1
      continue
    kind = seq.site.kind
    records.append({"task_id": seq.task_id, "site": seq.site.name, "kind": kind,
                    "logp": {"reference": ref, kind: float(lp)},
                    "p_bug": p_bug(float(lp), ref) if kind == "bug" else None})
  return records, skipped


def bug_prob_mean(records: Sequence[dict[str, Any]]) -> Optional[float]:
  """Mean p_bug over the bug sites (None without any)."""
  values = [r["p_bug"] for r in records if r["kind"] == "bug"]
  return float(np.mean(values)) if values else None


def evaluate_sites(score: ScoreFn, tokenizer: Any, tasks: Sequence[Any], *, rows: int,
                   max_len: int, pad_id: int, kinds: Optional[Sequence[str]] = None,
                   length_bucket: int = 0, row_multiple: int = 0) -> dict[str, Any]:
  """`bug_prob_mean`, `sites` (the records) and `sites_skipped` of `tasks` ({} when no
  task has sites); `kinds`, `length_bucket` and `row_multiple` as in `site_sequences`
  and `sequence_logps`."""
  sequences = site_sequences(tokenizer, tasks, kinds)
  if not sequences:
    return {}
  logps = sequence_logps(score, sequences, rows=rows, max_len=max_len, pad_id=pad_id,
                         length_bucket=length_bucket, row_multiple=row_multiple)
  records, skipped = site_records(sequences, logps)
  return {"bug_prob_mean": bug_prob_mean(records), "sites": records,
          "sites_skipped": skipped}
