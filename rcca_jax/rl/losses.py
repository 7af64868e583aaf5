"""Alias kept for one release; use `rcca_jax.rl.objective` (`LossConfig`, `PRESETS`,
`preset`). The policy-loss registry is now the table `objective.TOKEN_WEIGHTS` read by
`objective.loss_terms`: `get_policy_loss(name)(...)` is `loss_terms(..., config)` with
`config.policy_loss = name`, and `policy_loss_name` checks a name."""

from rcca_jax.rl.objective import *  # pylint: disable=wildcard-import,unused-wildcard-import
