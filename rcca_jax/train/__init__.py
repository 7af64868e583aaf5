"""The training job: SFT on reference apps, then RCCA (or GRPO) reinforcement learning.

Modules: `trainer` (the two stages, resumable; one RL step phase by phase), `sft_loop`
(the SFT stage's loop), `rollouts` (sampling, evaluation in the worker pool, advantages,
diagnostic weights, packed batches, the RL row), `eval_loop` (dev-split evaluation and
reports), `logging` (metrics.jsonl, TensorBoard, progress bar), `config_check` (the
config validated before any work), `prompts` (RL prompts against `rl.max_prompt_len`),
`plan` (`--mode=plan`: per-device memory of the compiled steps).
"""
