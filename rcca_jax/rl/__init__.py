"""RL and SFT training: GRPO/RCCA objectives, the sharded train step, checkpoints.

Modules: `objective` (the RL objective whole: advantages, token weights, the clipped
loss, its reductions, presets), `optim` (AdamW schedule), `train_step` (the compiled
step) with `functional` (the NNX model as pure functions) and `batch_check` (a host
batch checked and cast for the step), `batch_updates` (a rollout batch as μ passes of
mini-batch optimizer updates), `logprobs` (the KL reference and recomputed old
log-probs), `sft` (next-token step), `checkpoint` (orbax). `grpo`, `rcca`, `losses` and
`objectives` are aliases of `objective` kept for one release.
"""
