"""Alias kept for one release; use `rcca_jax.study.sweep`."""

from rcca_jax.study.sweep import *  # pylint: disable=wildcard-import,unused-wildcard-import
