"""Alias kept for one release; use `rcca_jax.study.sweep_report`."""

from rcca_jax.study.sweep_report import *  # pylint: disable=wildcard-import,unused-wildcard-import
