"""RCCA's asymmetric effective token weights and their magnitude control
(docs/method.md#6-asymmetric-effective-weights)."""

import jax
import jax.numpy as jnp


def effective_weights(wbar: jax.Array, advantages: jax.Array, *, c: float = 1.2,
                      positive_blamed: float = 1.0,
                      negative_unblamed: float = 1.0) -> jax.Array:
  """Per-token loss weights from diagnostic weights and advantages.

  Negative-advantage responses keep the diagnostic weight on blamed tokens (`wbar > 1`:
  the update concentrates on blamed code) and give the others `negative_unblamed *
  wbar` (= `negative_unblamed`, unblamed tokens having weight 1; the default 1.0 is
  the paper's rule exactly); non-negative ones give blamed tokens `positive_blamed` and every
  other token `c`.

  Args:
    wbar: [B, T] diagnostic weights (1 for untouched tokens).
    advantages: [B] per-response advantages.
    c: weight of unblamed tokens of non-negative-advantage responses.
    positive_blamed: weight of blamed tokens of non-negative-advantage responses.
    negative_unblamed: factor on the unblamed tokens of negative-advantage responses
      (0: the negative update only on blamed code).

  Returns:
    [B, T] effective weights, dtype of `wbar`.
  """
  wbar = jnp.asarray(wbar)
  if wbar.ndim != 2 or jnp.ndim(advantages) != 1:
    raise ValueError(f"expected wbar [B, T] and advantages [B], got "
                     f"{wbar.shape} and {jnp.shape(advantages)}")
  positive = jnp.where(wbar > 1.0, positive_blamed, c).astype(wbar.dtype)
  negative = jnp.where(wbar > 1.0, wbar, (negative_unblamed * wbar).astype(wbar.dtype))
  return jnp.where(jnp.asarray(advantages)[:, None] < 0, negative, positive)


def negative_mean_weights(wbar: jax.Array, advantages: jax.Array, mask: jax.Array, *,
                          c: float = 1.2, positive_blamed: float = 1.0,
                          negative_unblamed: float = 1.0) -> jax.Array:
  """RCCA's weights with each negative-advantage response's weight spread evenly over
  its tokens: the magnitude of RCCA's negative update without its location
  (docs/method.md#6-asymmetric-effective-weights).

  With `e = effective_weights(...)` (same keywords), a response with `A_i < 0` gets
  `f_i = sum_t m_it e_it / sum_t m_it` on every token, so its total weight over its
  response tokens is RCCA's (0 under focus, `negative_unblamed = 0`, when nothing of it
  is blamed); the others keep `e` (the positive update is RCCA's too, so an arm built
  on this differs from RCCA only in where a failed response's weight lies).

  Args:
    wbar: [B, T] diagnostic weights.
    advantages: [B] per-response advantages.
    mask: [B, T] 1 on response tokens.
    c, positive_blamed, negative_unblamed: as in `effective_weights`.

  Returns:
    [B, T] weights, dtype of `wbar`.
  """
  wbar = jnp.asarray(wbar)
  effective = effective_weights(wbar, advantages, c=c, positive_blamed=positive_blamed,
                                negative_unblamed=negative_unblamed)
  mask = jnp.asarray(mask).astype(wbar.dtype)
  factor = jnp.sum(effective * mask, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)
  negative = jnp.asarray(advantages)[:, None] < 0
  return jnp.where(negative, factor[:, None], effective).astype(wbar.dtype)
