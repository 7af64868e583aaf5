"""Alias kept for one release; use `rcca_jax.study.overrides`."""

from rcca_jax.study.overrides import *  # pylint: disable=wildcard-import,unused-wildcard-import
