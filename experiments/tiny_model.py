"""A tiny hybrid KDA/MLA MoE shape that runs on a laptop CPU.

6 layers (KDA, MLA alternating; layer 0 dense, the rest MoE with 16 experts, top-4 of
4 groups), hidden 64. Layers 2-5 form two identical groups that are scanned.

    python -m rcca_jax.models.summary --config=experiments/tiny_model.py
"""

import ml_collections


def model_config() -> ml_collections.ConfigDict:
  """Fields of rcca_jax.models.LingConfig."""
  return ml_collections.ConfigDict(dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=6,
    num_attention_heads=4,
    q_lora_rank=None,
    kv_lora_rank=32,
    qk_nope_head_dim=16,
    qk_rope_head_dim=16,
    v_head_dim=16,
    linear_head_dim=16,
    num_local_experts=16,
    num_experts_per_tok=4,
    n_shared_experts=1,
    n_group=4,
    topk_group=2,
    first_k_dense_replace=1,
    layer_group_size=2,
    pad_token_id=0,
    eos_token_id=1,
    dtype="float32",
    param_dtype="float32",
    moe_impl="dense",
  ))


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.model = model_config()
  config.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=1, expert=1, tensor=1))
  return config
