"""The embedded default (`make demo`): SFT plants known bugs, RCCA RL unlearns them.

    python -m rcca_jax.main --config=experiments/tiny_cpu.py --workdir=/tmp/rcca_tiny

A small controlled setting (the ablation's, `experiments/ablation_small.py`, cut to
three requests): the first train task of star_rating, char_counter and guess_number,
each with one known bug (a mutant of its reference: a wrong handler operator, a
misspelt id, a thrown error) that fails at least one rubric. SFT trains the tiny hybrid
(`tiny_natural.model_config`, 1.2M parameters) on 20 targets per request, 60% of them
the bug, so greedy decoding writes the bug on every request (post-SFT pass rate 0).
RL (the three requests x 8 samples per step, T = 1) has to unlearn the bugs; the dev
evaluation is greedy on the same requests, after SFT and every 4 RL steps.

SFT: 300 steps of 4 targets (lr 3e-3, cosine); RL: 16 steps, lr 2e-4 (constant),
`seq-mean-token-mean`, clip 0.2, one update per rollout batch, each group's prompt
computed once in the update (`rl.shared_prefix`: exact for this model, which has no MoE
layer; the update 1.9x faster with the host allocator, the outcome below unchanged,
docs/performance.md "`make demo`'s RL step").

Measured (`make demo`'s command on a fresh clone of 1bc914e, install excluded, `--config.seed=N`,
the 2-core CPU machine; a background experiment shared it at the lowest CPU priority,
and, for seed 0's SFT, at equal priority):

  | seed | wall | post-SFT reward / gates / pass | RL step 4 | step 8 | step 12 | step 16 |
  |---|---|---|---|---|---|---|
  | 0 | 623 s | 0.243 / 0.33 / 0.00 | 0.843 / 0.67 | 0.843 / 0.67 | 0.843 / 0.67 | 1.000 / 1.00 |
  | 1 | 500 s | 0.243 / 0.33 / 0.00 | 0.543 / 0.33 | 1.000 / 1.00 | 1.000 / 1.00 | 1.000 / 1.00 |
  | 2 | 492 s | 0.243 / 0.33 / 0.00 | 0.543 / 0.33 | 0.843 / 0.67 | 1.000 / 1.00 | 1.000 / 1.00 |

  (RL columns: greedy dev reward / pass rate.) After SFT (300 steps, 3.7 min at about
  0.7 s/step; seed 0: 5.7 min) greedy decoding writes the exact bug on all three
  requests (the misspelt id and the thrown error fail the runtime gate). RL, 16 steps in
  3.8 min (about 14 s/step, grading most of it), unlearns all three bugs on every seed:
  final reward 1.000 and pass rate 1.00, gates 1.00; the exact probability of the bug
  against the reference (mean p_bug, train/site_metrics.py) falls 0.61 -> 0.27. Training
  reward at T = 1 stays 0.3-0.65 (samples still write the bug a good part of the time).
  No collapse warning fired.
"""

import ml_collections

from experiments import tiny_natural

FAMILIES = ("star_rating", "char_counter", "guess_number")
model_config = tiny_natural.model_config


def get_config() -> ml_collections.ConfigDict:
  config = tiny_natural.get_config()
  config.data.families = FAMILIES
  config.data.setting = "controlled"
  # Request i gets operator i: the ablation's bugs for these three requests; the task
  # file is DIR/controlled_tasks.jsonl (`path` empty).
  config.data.controlled.update(families=FAMILIES, rates=(0.6,), path="",
                                operators=("handler_op", "misspell_id", "throw"))
  config.sft.num_steps = 300
  config.sft.batch_size = 4
  config.sft.max_len = 640  # the longest target is 610 tokens
  config.sft.checkpoint_every = 100
  config.sft.optimizer.warmup_steps = 30
  config.rl.num_steps = 16
  config.rl.group_size = 8
  config.rl.prompts_per_step = 3
  config.rl.max_new_tokens = 464
  config.rl.max_prompt_len = 192
  config.rl.checkpoint_every = 4
  config.rl.shared_prefix = True
  # One update width (rows of max_prompt_len + max_new_tokens): the responses run
  # 300-464 tokens, so buckets of 64 gave two widths (448, 464) and a second 15-16 s
  # compile of the update in 16 steps, for 3.6% less work on the narrower steps
  # (docs/performance.md, "`make demo`: compiles counted").
  config.rl.length_bucket = 0
  config.rl.optimizer.learning_rate = 2e-4
  config.eval.every_rl_steps = 4
  config.eval.max_new_tokens = 464
  # Three grading processes on two cores: a failing rubric's expectation waits 150 ms
  # before it is read again (`expect_retry_ms`), so two workers leave the cores idle
  # part of the time. Over RL steps 2-16 the grading took 17.2 s in all with three
  # against 20.9 s with two (18.0 with four), the same verdicts and outcome
  # (docs/performance.md, "`make demo`: a third grading worker").
  config.eval.workers = 3
  config.eval.evaluator.reward = ml_collections.ConfigDict(dict(
      format_fail=0.0, source_fail=0.05, runtime_fail=0.10, floor=0.2))
  config.checkpoint.max_to_keep = 1
  return config
