"""Independent float64 numpy references of the RL math, shared by tests
(docs/method.md#7-objective, docs/method.md#6-asymmetric-effective-weights,
docs/method.md#9-blame-sources)."""

import math

import numpy as np


def np_advantages(rewards, group_size, eps=1e-6):
  out = np.empty(len(rewards))
  for g in range(0, len(rewards), group_size):
    r = np.asarray(rewards[g:g + group_size], np.float64)
    out[g:g + group_size] = (r - r.mean()) / (r.std() + eps)
  return out


def np_normaliser(mask, aggregation):
  """Per-token factor d loss / d per-token-term."""
  lengths = mask.sum(1)
  n_seq = max((lengths > 0).sum(), 1)
  if aggregation == "token-mean":
    return mask / max(mask.sum(), 1)
  if aggregation == "seq-mean-token-sum":
    return mask / n_seq
  return mask / np.maximum(lengths, 1)[:, None] / n_seq


def np_loss_and_grad(logp, old, adv, w, mask, el, eh, aggregation, ref=None, beta=0.0):
  """Loss and d loss / d logp, written out by hand in float64."""
  logp, old, w = (np.asarray(x, np.float64) for x in (logp, old, w))
  a = np.asarray(adv, np.float64)[:, None]
  ratio = np.exp(logp - old)
  clipped = np.clip(ratio, 1 - el, 1 + eh)
  surrogate = np.minimum(ratio * a, clipped * a)
  per = -w * surrogate
  # The unclipped branch carries the gradient unless the clipped one is strictly lower.
  unclipped_active = ratio * a <= clipped * a
  in_range = (ratio >= 1 - el) & (ratio <= 1 + eh)
  dper = -w * a * ratio * (unclipped_active | in_range)
  if ref is not None:
    d = np.asarray(ref, np.float64) - logp
    per = per + beta * (np.exp(d) - d - 1)
    dper = dper + beta * (1 - np.exp(d))
  norm = np_normaliser(mask, aggregation)
  return float((per * norm).sum()), dper * norm


def np_effective_weights(wbar, adv, c, positive_blamed, negative_unblamed=1.0):
  out = np.empty_like(wbar)
  for i in range(wbar.shape[0]):
    for t in range(wbar.shape[1]):
      if adv[i] < 0:
        out[i, t] = wbar[i, t] * (1.0 if wbar[i, t] > 1 else negative_unblamed)
      elif wbar[i, t] > 1:
        out[i, t] = positive_blamed
      else:
        out[i, t] = c
  return out


def np_negative_scaled_weights(wbar, adv, mask, negative_unblamed, c=1.2,
                               positive_blamed=1.0):
  """One factor per negative response: the mean over its response tokens of its
  effective weight (so its total is RCCA's); the effective weights elsewhere."""
  wbar, mask = np.asarray(wbar, np.float64), np.asarray(mask, np.float64)
  effective = np_effective_weights(wbar, adv, c, positive_blamed, negative_unblamed)
  out = effective.copy()
  for i in range(wbar.shape[0]):
    if adv[i] < 0:
      out[i] = (effective[i] * mask[i]).sum() / max(mask[i].sum(), 1.0)
  return out


def np_top_entropy_tokens(entropy, mask, fraction):
  """1 on each row's ceil(fraction * n) highest-entropy response tokens, ties to the
  earlier position (Python's sort, -0.0 equal to 0.0)."""
  out = np.zeros(np.shape(mask))
  for i, (row, m) in enumerate(zip(entropy, mask)):
    tokens = [t for t in range(len(m)) if m[t] > 0]
    k = math.ceil(round(fraction * len(tokens), 9))
    for t in sorted(tokens, key=lambda t: (-float(row[t]), t))[:k]:
      out[i, t] = 1.0
  return out


def np_sibling_diff_weights(tokens, best, direct):
  """`direct` on the tokens of `tokens` outside a longest common subsequence with
  `best` (dynamic programming; equal to a block diff when the LCS is unique)."""
  n, m = len(tokens), len(best)
  lcs = np.zeros((n + 1, m + 1), int)
  for i in range(n - 1, -1, -1):
    for j in range(m - 1, -1, -1):
      lcs[i, j] = (lcs[i + 1, j + 1] + 1 if tokens[i] == best[j]
                   else max(lcs[i + 1, j], lcs[i, j + 1]))
  out, i, j = np.full(n, float(direct)), 0, 0
  while i < n and j < m:
    if tokens[i] == best[j]:
      out[i], i, j = 1.0, i + 1, j + 1
    elif lcs[i + 1, j] >= lcs[i, j + 1]:
      i += 1
    else:
      j += 1
  return out


def np_token_logprobs(logits, ids):
  """Independent float64 log-softmax and gather, aligned like the step's arrays."""
  logits = np.asarray(logits, np.float64)[:, :-1]
  logits = logits - logits.max(-1, keepdims=True)
  logz = np.log(np.exp(logits).sum(-1))
  picked = np.take_along_axis(logits, ids[:, 1:, None], -1)[..., 0]
  return np.pad(picked - logz, ((0, 0), (1, 0)))
