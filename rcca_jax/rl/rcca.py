"""Alias kept for one release; use `rcca_jax.rl.objective` (`effective_weights`,
`negative_mean_weights`)."""

from rcca_jax.rl.objective import *  # pylint: disable=wildcard-import,unused-wildcard-import
