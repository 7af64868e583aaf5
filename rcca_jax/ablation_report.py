"""Alias kept for one release; use `rcca_jax.study.ablation_report` (the summary, table
and plot) and `rcca_jax.study.stats` (the comparison's statistics)."""

# pylint: disable=wildcard-import,unused-wildcard-import
from rcca_jax.study.ablation_report import *
from rcca_jax.study.stats import *
