"""Policy models in Flax NNX: the Ling-3 style hybrid KDA/MLA mixture-of-experts LM and
dense Llama-family decoders (llama, qwen2, mistral); `from_hf` picks one by checkpoint."""

from rcca_jax.models.config import LingConfig
from rcca_jax.models.families import FAMILIES, build, config_from_fields, from_hf
from rcca_jax.models.ling import LingCache, LingForCausalLM
from rcca_jax.models.llama import LlamaCache, LlamaForCausalLM
from rcca_jax.models.llama_config import LlamaConfig

__all__ = ["FAMILIES", "LingCache", "LingConfig", "LingForCausalLM", "LlamaCache",
           "LlamaConfig", "LlamaForCausalLM", "build", "config_from_fields", "from_hf"]
