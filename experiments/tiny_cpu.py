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
`seq-mean-token-mean`, clip 0.2, one update per rollout batch.

Measured (commit of this docstring; the 2-core CPU machine shared with other agents'
jobs, load average 15-30 throughout, this job under `nice -n 10`):
  seed 0: SFT 46 min at 3.4-24 s/step, RL 40-190 s/step; the run was stopped by its
  `timeout 4000` (67 min) during RL step 14 and resumed from the step-12 checkpoint. The
  load, not the job, sets these times (`experiments/ablation_small.py` on a quieter
  machine: 0.8 s per SFT step of 8, 13.8 s per RL step of 32 rollouts); a quiet-machine
  wall time was not measured.
  After SFT (per-token loss 0.0036) greedy decoding writes the exact bug on all three
  requests: dev reward 0.243, gates 0.33 (the misspelt id and the thrown error fail the
  runtime gate), pass rate 0.00 (seeds 0, 1 and 2 alike). T = 1 samples are the exact
  bug or the exact reference ~40% of the time. RL, seed 0: dev pass rate 0.67, reward
  0.843, gates 1.00 at RL steps 4, 8 and 12 (char_counter and guess_number now write the
  reference; star_rating still its wrong handler operator); training reward 0.38 at
  step 1, 0.4-0.6 after.
  Seeds 1 and 2: RL not finished within the session (post-SFT as above).
"""

import ml_collections

from experiments import tiny_natural

FAMILIES = ("star_rating", "char_counter", "guess_number")
model_config = tiny_natural.model_config


def get_config() -> ml_collections.ConfigDict:
  config = tiny_natural.get_config()
  config.data.families = FAMILIES
  config.data.setting = "controlled"
  config.data.controlled = ml_collections.ConfigDict(dict(
      families=FAMILIES,
      tasks_per_family=1,
      rates=(0.6,),
      # Request i gets operator i: the ablation's bugs for these three requests.
      operators=("handler_op", "misspell_id", "throw"),
      draws=20,
      max_mutant_reward=0.9,
      seed=0,
      path="",  # empty: DIR/controlled_tasks.jsonl
  ))
  config.credit = ml_collections.ConfigDict(dict(direct=3.0, context=1.5, cap=4.0))
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
  config.rl.optimizer.learning_rate = 2e-4
  config.eval.every_rl_steps = 4
  config.eval.max_new_tokens = 464
  config.eval.num_reports = 3
  config.eval.evaluator.reward = ml_collections.ConfigDict(dict(
      format_fail=0.0, source_fail=0.05, runtime_fail=0.10, floor=0.2))
  config.checkpoint.max_to_keep = 1
  return config
