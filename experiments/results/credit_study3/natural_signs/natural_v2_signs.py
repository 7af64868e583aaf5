"""The natural study's `rl` preset (experiments/natural_v2.py at commit 622fb00, the code
of its committed runs) with the sign arms of credit study 3 added: negative samples
only (grpo_neg_only: positive_scale 0), positive updates only (grpo_neg0:
negative_scale 0) and W-REINFORCE (positive updates x 0.1). Run from a worktree of
622fb00 with the committed runs unpacked in DIR (study/runs.tar.gz):

    python -m rcca_jax.study --config=natural_v2_signs.py:rl --workdir=DIR --seeds=3 \
        --only_arms=grpo_neg_only,grpo_neg0,w_reinforce
"""
from experiments import natural_v2

SIGN_ARMS = {"grpo_neg_only": "rl.policy_loss=grpo;rl.loss.positive_scale=0.0",
             "grpo_neg0": "rl.policy_loss=grpo;rl.loss.negative_scale=0.0",
             "w_reinforce": "rl.policy_loss=grpo;rl.loss.positive_scale=0.1"}


def get_config(preset: str = "rl"):
  config = natural_v2.get_config(preset)
  for name, overrides in SIGN_ARMS.items():
    config.arms[name] = overrides
  config.ablation.arms = ",".join([natural_v2.ARMS, *SIGN_ARMS])
  return config
