"""RL and SFT training: GRPO/RCCA objectives, the sharded train step, checkpoints.

Modules: `grpo` (advantages, clipped weighted loss, aggregations), `rcca` (effective
token weights), `losses` (policy losses by name, presets), `optim` (AdamW schedule),
`train_step` (the compiled step) with `functional` (the NNX model as pure functions),
`objectives` and `batch_check` (a host batch checked and cast for the step),
`batch_updates` (a rollout batch as μ passes of mini-batch optimizer updates),
`logprobs` (the KL reference and recomputed old log-probs), `sft` (next-token step),
`checkpoint` (orbax).
"""
