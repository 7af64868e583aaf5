"""RL and SFT training: GRPO/RCCA objectives, the sharded train step, checkpoints.

Modules: `grpo` (advantages, clipped weighted loss, aggregations), `rcca` (effective
token weights), `losses` (policy losses by name, presets), `optim` (AdamW schedule),
`train_step` (the compiled step), `sft` (next-token step), `checkpoint` (orbax).
"""
