"""Teacher-forced copy metrics: does the policy put the request's values where the
reference app first writes them? (issue 54's pilot instrument.)

For each task of a copying family (families/copying.py), the values the request states
are found in the reference answer at their first occurrence, and the policy's
teacher-forced probability of the value's first token there is read from one log-prob
pass over the reference (tokenized exactly as an SFT target). Kinds of value:

- `w1`, `w2`: the first and second pool word of an id `ROLE-W1-W2` (`w1` needs the
  request's slot for the role, `w2` plain induction on `w1`);
- `label`: a quoted pool word (`"word"`);
- `number`: an integer of the request.

Reported per kind and per split of the task (`extra["split"]`: dev ids of train words,
or of novel words): the mean probability `p_KIND` and `copied_KIND`, the share of values
whose first token has probability above 1/2 (so it is the argmax: greedy decoding
copies it given the reference's prefix), and the mean predictive entropy there,
`entropy_KIND`, beside `entropy_tokens`, the mean over every answer token (where
sampling at temperature 1 explores). No sampling, so no sampling noise.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Callable, Sequence

import numpy as np

from rcca_jax.data import batching
from rcca_jax.data import chat

_ID = re.compile(r"`#([a-z]+)-([a-z]+)-([a-z]+)`")
_LABEL = re.compile(r'"([a-z]+)"')
_NUMBER = re.compile(r"(?<![\w.-])(-?\d+)(?![\w.])")
KINDS = ("w1", "w2", "label", "number")

# `score(batch) -> (logp, entropy)`, each [rows, max_len]: per row and position, the
# answer token's log-probability and the predictive entropy (0 outside `loss_mask`),
# as `rl.logprobs.make_logprob_fn(..., with_entropy=True)` returns them.
ScoreFn = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


def _values(request: str) -> list[tuple[str, str, str]]:
  """(kind, value, text it follows in the app or '') of the request's copied values."""
  out = []
  for role, w1, w2 in _ID.findall(request):
    out += [("w1", w1, f"{role}-"), ("w2", w2, f"{role}-{w1}-")]
  out += [("label", w, "") for w in _LABEL.findall(request)]
  out += [("number", n, "") for n in dict.fromkeys(_NUMBER.findall(request))]
  return out


def copy_targets(tokenizer: Any, task: Any
                 ) -> tuple[list[int], list[int], list[tuple[str, int]]]:
  """(prompt ids, answer ids, [(kind, answer token index)]) of a task's reference: the
  token that starts each value's first occurrence in the answer (a value whose start is
  not a token boundary is left out)."""
  answer_text = chat.format_response(task.reference)
  ids, mask = chat.format_sft_example(tokenizer, task.request, answer_text)
  start = mask.index(1)
  enc = tokenizer(answer_text, add_special_tokens=False, return_offsets_mapping=True)
  if list(enc["input_ids"]) != ids[start:-1]:
    raise ValueError(f"task {task.id}: offsets tokenization differs from the SFT target")
  starts = {s: i for i, (s, e) in enumerate(enc["offset_mapping"]) if e > s}
  targets = []
  for kind, value, before in _values(task.request):
    if kind == "number":
      m = re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.])", answer_text)
    elif kind == "label":
      m = re.search(rf"(?<=[>\"']){re.escape(value)}(?=[<\"'])", answer_text)
    else:
      m = re.search(rf"(?<=[\"'#]){re.escape(before)}({re.escape(value)})(?=[-\"'])",
                    answer_text)
    if m is None:
      continue
    pos = m.start(1) if kind in ("w1", "w2") else m.start()
    if pos in starts:
      targets.append((kind, starts[pos]))
  return ids[:start], ids[start:], targets


def copy_metrics(score: ScoreFn, tokenizer: Any, tasks: Sequence[Any], *, rows: int,
                 max_len: int, pad_id: int) -> dict[str, Any]:
  """`copy/SPLIT/p_KIND` and `copy/SPLIT/copied_KIND` (and `n_KIND`) over the tasks
  of copying families (`extra["split"]`, data.draws.fresh_splits) that fit `max_len`;
  {} when there are none."""
  items = []
  for task in tasks:
    split = task.extra.get("split")
    if not split:  # not a copying family's draw
      continue
    prompt, answer, targets = copy_targets(tokenizer, task)
    if targets and len(prompt) + len(answer) <= max_len:
      items.append((split, prompt, answer, targets))
  if not items:
    return {}
  probs: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
  entropies: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
  for lo in range(0, len(items), rows):
    chunk = items[lo:lo + rows]
    padded = chunk + [chunk[0]] * (rows - len(chunk))
    batch = batching.pack_batch([c[1] for c in padded], [c[2] for c in padded],
                                max_len=max_len, pad_id=pad_id)
    logp, entropy = (np.asarray(x, np.float64) for x in score(batch))
    for row, (split, prompt, answer, targets) in enumerate(chunk):
      span = slice(len(prompt), len(prompt) + len(answer))
      entropies[(split, "tokens")] += entropy[row, span].tolist()
      for kind, index in targets:
        probs[(split, kind)].append(float(np.exp(logp[row, len(prompt) + index])))
        entropies[(split, kind)].append(float(entropy[row, len(prompt) + index]))
  out: dict[str, Any] = {}
  for (split, kind), values in sorted(probs.items()):
    v = np.asarray(values)
    out[f"copy/{split}/p_{kind}"] = float(v.mean())
    out[f"copy/{split}/copied_{kind}"] = float((v > 0.5).mean())
    out[f"copy/{split}/n_{kind}"] = len(v)
  for (split, kind), values in sorted(entropies.items()):
    out[f"copy/{split}/entropy_{kind}"] = float(np.mean(values))
  return out


def id_slots(request: str, text: str, offsets: np.ndarray) -> list[int]:
  """Indices of the response tokens that write an id's first pool word: the token at
  the character just after each `ROLE-` in `text`, for the roles of the request's ids
  (where the policy must copy `W1`, whether it does or not)."""
  roles = sorted({role for role, _, _ in _ID.findall(request)})
  if not roles or not len(offsets):
    return []
  pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, roles)) + r")-")
  ends = np.asarray(offsets)[:, 1]
  slots = []
  for m in pattern.finditer(text):
    i = int(np.searchsorted(ends, m.end(), side="right"))  # first token ending past it
    if i < len(ends) and offsets[i][0] <= m.end():
      slots.append(i)
  return sorted(set(slots))


def slot_surprisal(samples: Sequence[tuple[str, str, np.ndarray, np.ndarray]]
                   ) -> dict[str, float]:
  """Over sampled responses (request, text, token offsets, sampler log-probs): the mean
  surprisal -log p of the sampled token at the id slots (`id_slots`) and over every
  response token. The sampled token is drawn from p, so each mean estimates the mean
  predictive entropy there without bias (the exact per-token entropy of the update is
  the row's `entropy`). {} when no response has an id slot."""
  at_slots, everywhere = [], []
  for request, text, offsets, logprobs in samples:
    slots = id_slots(request, text, offsets)
    if slots:
      at_slots.append(-np.asarray(logprobs, np.float64)[slots])
    everywhere.append(-np.asarray(logprobs, np.float64))
  if not at_slots:
    return {}
  return {"id_slot_surprisal": float(np.concatenate(at_slots).mean()),
          "id_slots": float(sum(len(s) for s in at_slots) / len(samples)),
          "token_surprisal": float(np.concatenate(everywhere).mean())}
