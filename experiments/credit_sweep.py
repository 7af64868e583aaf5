"""When does rubric-to-code credit beat GRPO? The sweep over settings (docs/ablation.md).

    python -m rcca_jax.ablation --config=experiments/credit_sweep.py \
        --workdir=/tmp/credit_sweep --seeds=5

Settings (K_bug bug sites, K_neutral reward-neutral sites per request), run in the order
of `sweep.settings`, each a whole ablation in DIR/SETTING (its own controlled task set,
one SFT per seed shared by its arms, the same prompt order and sampling seeds in every
arm); re-running the command resumes where it stopped, and a finished setting's
`summary.json` / `ablation.md` can be committed while the next one runs:
  s3_4  3 bug sites and 4 neutral rewrites per request (8 of the 12 requests have them);
  s3_0  3 bug sites, no neutral rewrites (the same 8 requests);
  s1_0  one bug per request: `experiments/ablation_small.py` re-measured with the exact
        site metrics (12 requests), plus the SGD arms (the optimizer question).
`rcca_oracle` (blame exactly on the known bug sites) runs in the multi-site settings,
where the evaluator's blame is not known to be exact; in s1_0 RCCA's direct recall on the
policy's own bugs was 1.000 (experiments/results/ablation_small/).

Everything else is ablation_small's: the tiny hybrid, SFT 600 steps on 20 targets per
request (each site drawn at its rate: 0.25 / 0.6 / 0.75 / 0.9 round-robin for bug sites,
0.5 for neutral ones), RL at T = 1 with 4 requests x 8 samples per step, AdamW lr 1e-4
constant. The RL run is shorter (16 steps) and the sampled pass@1 uses 4 samples per
request, to fit the sweep's CPU budget; the primary metric, `bug_prob_mean`, is exact
(teacher-forced, `train/site_metrics.py`) at every evaluation.

Runtime and result: experiments/results/credit_sweep/README.md.
"""

import ml_collections

from experiments import ablation_small

MULTI_SITE_ARMS = "grpo,rcca,rcca_focus,rcca_placebo,rcca_oracle"
ONE_SITE_ARMS = "grpo,rcca,rcca_focus,rcca_placebo,grpo_sgd,rcca_sgd"


def get_config() -> ml_collections.ConfigDict:
  config = ablation_small.get_config()
  config.rl.num_steps = 16
  config.eval.every_rl_steps = 4
  config.eval.samples_per_request = 4
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
