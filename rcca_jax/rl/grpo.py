"""Alias kept for one release; use `rcca_jax.rl.objective` (advantages, the clipped
loss, its reductions and statistics). `policy_loss_terms` is now `objective.loss_terms`
with `LossConfig(policy_loss="weighted")`."""

from rcca_jax.rl.objective import *  # pylint: disable=wildcard-import,unused-wildcard-import
