"""Why does focused blame win, and how many RL steps does it save? (credit study 2)

    mkdir -p DIR/s1_0 DIR/s3_4
    cp experiments/results/credit_sweep/s1_0/controlled_tasks.jsonl DIR/s1_0/
    cp experiments/results/credit_sweep/s3_4/controlled_tasks.jsonl DIR/s3_4/
    python -m rcca_jax.study --config=experiments/credit_study2.py --workdir=DIR \
        --seeds=5

The credit sweep's settings `s1_0` (one bug per request) and `s3_4` (3 bug sites and 4
neutral rewrites per request), their request sets copied from the committed sweep (so
the study grades the same four requests), one SFT per seed rebuilt with the sweep's
command and seeds (its checkpoints were not kept), and RL three times as long: 36 steps,
the cap, since in 12 steps GRPO moved mean p_bug 0.550 -> 0.400 (s1_0) and 0.649 ->
0.617 (s3_4) and did not reach half its post-SFT value anywhere. Everything else is the
sweep's (experiments/credit_sweep.py): AdamW lr 2e-4 constant, 4 requests x 6 samples per
step, dev evaluation after SFT and every 3 RL steps (exact site metrics, greedy pass,
pass@1 over 4 samples).

Arms (experiments/ablation_small.py, docs/ablation.md#controls):
  grpo, rcca, rcca_focus        the references;
  rcca_focus_placebo            focus's blamed runs moved to random places (location);
  grpo_neg_scaled               focus's per-response negative total spread evenly
                                (magnitude; the loss rcca_neg_mean);
  rcca_focus_oracle             focus on the known bug sites (s3_4 only: in s1_0 the
                                evaluator's direct recall was 1.000);
  sibling_diff_focus            focus on the tokens that differ from the group's best
                                response (model-free localizer);
  entropy_top20                 GRPO on each response's 20% highest-entropy tokens;
  grpo_neg_const                GRPO with a failed response's tokens at 0.1, no blame
                                (the model-free magnitude control; added after s1_0's
                                five seeds showed magnitude, not location: a resume
                                trains it for the finished seeds, rebuilding their SFT,
                                which must reproduce the recorded post-SFT evaluation).
Settings run in the order s1_0, s3_4 (the cheaper one first); seeds run one after the
other, every arm of a seed before the next seed.

Runtime: 4.6 h (s1_0) and 5.3 h (s3_4) for 5 seeds on 2 CPU cores (RL steps 7-10 s).
Result (experiments/results/credit_study2/README.md): magnitude, not location. Focus's
blame at random places does as well as focus; grpo_neg_const needs the fewest RL steps
(0.43x GRPO's to halve p_bug in s1_0, 0.40x to reach GRPO's final p_bug in s3_4; focus
0.57x and 0.46x) and beats focus on 9 of 10 seeds; the model-free localizers stay at
GRPO.
"""

import ml_collections

from experiments import credit_sweep

REFERENCE_ARMS = "grpo,rcca,rcca_focus"
NEW_ARMS = ("rcca_focus_placebo,grpo_neg_scaled,sibling_diff_focus,entropy_top20,"
            "grpo_neg_const")
RL_STEPS = 36


def get_config() -> ml_collections.ConfigDict:
  config = credit_sweep.get_config()
  config.rl.num_steps = RL_STEPS
  config.sweep.settings = "s1_0,s3_4"
  config.settings = ml_collections.ConfigDict(dict(
      s1_0="data.controlled.bug_sites=1;data.controlled.neutral_sites=0;"
           f"ablation.arms={REFERENCE_ARMS},{NEW_ARMS}",
      s3_4="data.controlled.bug_sites=3;data.controlled.neutral_sites=4;"
           f"ablation.arms={REFERENCE_ARMS},{NEW_ARMS},rcca_focus_oracle",
  ))
  return config
