"""Independent float64 numpy references of the RL math, shared by tests
(docs/method.md#7-objective, docs/method.md#6-asymmetric-effective-weights)."""

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


def np_effective_weights(wbar, adv, c, positive_blamed):
  out = np.empty_like(wbar)
  for i in range(wbar.shape[0]):
    for t in range(wbar.shape[1]):
      if adv[i] < 0:
        out[i, t] = wbar[i, t]
      elif wbar[i, t] > 1:
        out[i, t] = positive_blamed
      else:
        out[i, t] = c
  return out


def np_token_logprobs(logits, ids):
  """Independent float64 log-softmax and gather, aligned like the step's arrays."""
  logits = np.asarray(logits, np.float64)[:, :-1]
  logits = logits - logits.max(-1, keepdims=True)
  logz = np.log(np.exp(logits).sum(-1))
  picked = np.take_along_axis(logits, ids[:, 1:, None], -1)[..., 0]
  return np.pad(picked - logz, ((0, 0), (1, 0)))
