"""The training job: SFT on reference apps, then RCCA (or GRPO) reinforcement learning.

Modules: `trainer` (the two stages, resumable), `rollouts` (sampling, evaluation in the
worker pool, diagnostic weights, packed batches), `eval_loop` (dev-split evaluation and
reports), `logging` (metrics.jsonl, TensorBoard, progress bar).
"""
