"""Alias kept for one release; use `rcca_jax.study.ablation` (and `python -m
rcca_jax.study` for `python -m rcca_jax.ablation`)."""

from rcca_jax.study.ablation import *  # pylint: disable=wildcard-import,unused-wildcard-import
