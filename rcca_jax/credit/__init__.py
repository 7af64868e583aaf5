"""Rubric-to-code credit: localization of issues and per-token diagnostic weights."""

from rcca_jax.credit.align import diagnostic_weights

__all__ = ["diagnostic_weights"]
