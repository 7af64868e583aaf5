"""RL and SFT training: GRPO/RCCA objectives, the sharded train step, checkpoints.

Modules: `grpo` (advantages, clipped weighted loss, aggregations), `rcca` (effective
token weights), `losses` (policy losses by name, presets), `optim` (AdamW schedule),
`train_step` (the compiled step) with `functional` (the NNX model as pure functions),
`objectives` and `batching` (host-side packing), `updates` (μ updates over mini-batches
per rollout batch), `logprobs` (the KL reference and recomputed old log-probs), `sft`
(next-token step), `checkpoint` (orbax).
"""
