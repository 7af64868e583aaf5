"""Alias kept for one release; use `rcca_jax.rl.objective` (`Objective`,
`PolicyObjective`, `RL_KEYS`)."""

from rcca_jax.rl.objective import *  # pylint: disable=wildcard-import,unused-wildcard-import
