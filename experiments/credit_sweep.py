"""When does rubric-to-code credit beat GRPO? The sweep over settings (docs/ablation.md).

    python -m rcca_jax.study --config=experiments/credit_sweep.py \
        --workdir=/tmp/credit_sweep --seeds=5

Settings (K_bug bug sites, K_neutral reward-neutral sites per request), run in the order
of `sweep.settings`, each a whole ablation in DIR/SETTING (its own controlled task set,
one SFT per seed shared by its arms, the same prompt order and sampling seeds in every
arm); re-running the command resumes where it stopped, and a finished setting's
`summary.json` / `ablation.md` can be committed while the next one runs:
  s3_4  3 bug sites and 4 neutral rewrites per request;
  s3_0  3 bug sites, no neutral rewrites;
  s1_0  one bug per request (the committed ablation's kind of setting), plus the SGD
        arms (the optimizer question).
`rcca_oracle` (blame exactly on the known bug sites) runs in the multi-site settings,
where the evaluator's direct recall on the policy's own bugs was below 0.95 in the pilot.

The requests: the first train task of the four families with the shortest apps among
those that have 3 bug sites at separate places and 4 neutral rewrites (counter,
filter_search, temperature_converter, password_strength), so all three settings share
them. Every RL step samples every request (4 x 6 samples at T = 1): with 8 or 12
requests and 4 per step, each request is seen a third or half as often, and in the pilot
GRPO at lr 1e-4 moved mean p_bug 0.682 -> 0.680 in 4 steps (experiments/results/
credit_sweep/README.md, "Pilot").

SFT: 300 steps of 8 on 20 targets per request (bug sites drawn at 0.25 / 0.6 / 0.75 /
0.9 round-robin, neutral ones at 0.5). RL: 12 steps, AdamW lr 2e-4 constant (the
embedded default's, which unlearns its bugs in 8-16 steps), seq-mean-token-mean, clip
0.2; SGD arms at lr 0.2 (ablation_small's rule, the first SGD step as long as AdamW's,
scaled with the AdamW rate). Dev evaluation after SFT and every 3 RL steps: the exact
site metrics (`bug_prob_mean`, per-site p_bug), greedy pass rate and reward, and pass@1
over 4 samples per request at T = 1.

Runtime and result: experiments/results/credit_sweep/README.md.
"""

import ml_collections

from experiments import ablation_small

FAMILIES = ("counter", "filter_search", "temperature_converter", "password_strength")
MULTI_SITE_ARMS = "grpo,rcca,rcca_focus,rcca_placebo,rcca_oracle"
ONE_SITE_ARMS = "grpo,rcca,rcca_focus,rcca_placebo,grpo_sgd,rcca_sgd"
LEARNING_RATE = 2e-4
SGD_LR = round(ablation_small.SGD_LR * LEARNING_RATE / 1e-4, 6)


def get_config() -> ml_collections.ConfigDict:
  config = ablation_small.get_config()
  config.data.families = FAMILIES
  config.data.controlled.families = FAMILIES
  config.sft.num_steps = 300
  config.sft.checkpoint_every = 100
  config.rl.num_steps = 12
  config.rl.prompts_per_step = 4
  config.rl.group_size = 6
  config.rl.checkpoint_every = 3
  config.rl.optimizer.learning_rate = LEARNING_RATE
  config.eval.every_rl_steps = 3
  config.eval.samples_per_request = 4
  for arm in ("grpo_sgd", "rcca_sgd"):
    config.arms[arm] = config.arms[arm].replace(
        f"rl.optimizer.learning_rate={ablation_small.SGD_LR}",
        f"rl.optimizer.learning_rate={SGD_LR}")
  config.sweep = ml_collections.ConfigDict(dict(settings="s3_4,s3_0,s1_0"))
  config.settings = ml_collections.ConfigDict(dict(
      s3_4="data.controlled.bug_sites=3;data.controlled.neutral_sites=4;"
           f"ablation.arms={MULTI_SITE_ARMS}",
      s3_0="data.controlled.bug_sites=3;data.controlled.neutral_sites=0;"
           f"ablation.arms={MULTI_SITE_ARMS}",
      s1_0=f"data.controlled.bug_sites=1;data.controlled.neutral_sites=0;"
           f"ablation.arms={ONE_SITE_ARMS}",
  ))
  return config
