"""The policy model: Ling-3 style hybrid KDA/MLA mixture-of-experts LM in Flax NNX."""

from rcca_jax.models.config import LingConfig
from rcca_jax.models.ling import LingCache, LingForCausalLM

__all__ = ["LingCache", "LingConfig", "LingForCausalLM"]
