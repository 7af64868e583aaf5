"""Ling-3.0-Flash shape: 124.4B total / 5.10B active parameters (docs/model.md).

    python -m rcca_jax.models.summary --config=experiments/moe_124b.py
prints the parameter counts and per-device bytes for the mesh below, from abstract
shapes (nothing allocated; a few seconds on a CPU).

    python -m rcca_jax.main --mode=plan --config=experiments/moe_124b.py
checks this config, compiles its SFT step, RL step and log-prob function for the 256
devices below ahead of time (fake CPU devices) and prints the per-device memory: peak
60.3 GB (RL step, 20k-token rows), SFT 51.7 GB, state 3.7 GB (bf16 parameters and
AdamW moments); about 3 minutes on 2 CPU cores.
"""

import ml_collections

from rcca_jax.train import sections


# Set to its default on purpose (tests/experiments/test_experiment_configs.py): the RL learning
# rate of the paper-scale job, stated for its reader.
DELIBERATE = ("rl.optimizer.learning_rate",)


def model_config() -> ml_collections.ConfigDict:
  """Fields of rcca_jax.models.LingConfig."""
  return ml_collections.ConfigDict(dict(
    vocab_size=157184,
    hidden_size=2560,
    intermediate_size=6144,
    moe_intermediate_size=768,
    num_hidden_layers=42,
    num_attention_heads=32,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    rope_theta=6_000_000.0,
    max_position_embeddings=262144,
    linear_head_dim=128,
    short_conv_kernel_size=4,
    kda_lower_bound=-5.0,
    num_local_experts=512,
    num_experts_per_tok=8,
    n_shared_experts=1,
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    first_k_dense_replace=2,
    layer_group_size=6,
    rms_norm_eps=1e-6,
    dtype="bfloat16",
    param_dtype="bfloat16",
    remat=True,
    # Expert dispatch inside each batch shard, slots for twice the even share of tokens
    # (the dropless "ragged" path sorts the whole batch on every device). Decoding steps
    # never drop (fewer tokens than slots); watch the sampler-vs-trainer log-prob gap.
    moe_impl="grouped",
    moe_capacity_factor=2.0,
    # Long-sequence memory bounds (see README, "Long sequences and large meshes").
    attention_block_size=512,
    kda_chunks_per_step=16,
    moe_token_chunk=2048,
  ))


def get_config() -> ml_collections.ConfigDict:
  """Every field at its default (`sections.defaults_config`) but those set here."""
  config = sections.defaults_config()
  config.model = model_config()
  # Mesh axis sizes (rcca_jax.parallel.mesh); -1 takes the remaining devices.
  # 256 devices: fsdp=32 x expert=8 (the plan above).
  config.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=32, expert=8, tensor=1))
  # Training settings for `python -m rcca_jax.main`. The paper gives no
  # hyper-parameters; these are a starting point. Set init_from_hf to the Ling-3.0-Flash
  # checkpoint directory (its tokenizer is used too).
  # Every micro-batch is split over the 256-way batch axis (fsdp x expert): one row
  # per device per micro-batch. SFT: 512 rows = 2 micro-batches; RL: 64 prompts x 8
  # samples = 512 rows = 2 micro-batches.
  config.micro_batches = 2
  config.logits_chunk = 1024  # loss logits made this many positions at a time
  config.data.train_tasks = "data/tasks/train.jsonl"
  config.sft.update(num_steps=2000, batch_size=512, max_len=16384, checkpoint_every=200)
  config.sft.optimizer.update(learning_rate=1e-5, warmup_steps=100, weight_decay=0.1)
  config.rl.update(num_steps=500, group_size=8, prompts_per_step=64, max_new_tokens=16384,
                   max_prompt_len=4096, checkpoint_every=10, recompute_old_logprobs=True)
  config.rl.optimizer.update(learning_rate=1e-6, warmup_steps=10, end_lr_ratio=1.0,
                             weight_decay=0.0)
  config.rl.loss.eps_high = 0.28
  config.eval.update(every_rl_steps=25, tasks="data/tasks/dev.jsonl",
                     max_new_tokens=16384, workers=32, num_reports=4)
  config.checkpoint.update(max_to_keep=3, async_save=True)
  return config
