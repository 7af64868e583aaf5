"""The natural study's `rl` preset (experiments/natural_v2.py at commit 622fb00, the code
of its committed runs) with credit study 3's sign arms added (their overrides from
experiments/credit_study3.py): negative samples only (grpo_neg_only), positive updates
only (grpo_neg0) and W-REINFORCE (positive updates x 0.1). Run from a worktree of
622fb00 with the committed runs unpacked in DIR (study/runs.tar.gz); run_signs.sh.
"""
from experiments import credit_study3
from experiments import natural_v2

SIGN_ARMS = ("grpo_neg_only", "grpo_neg0", "w_reinforce")


def get_config(preset: str = "rl"):
  config = natural_v2.get_config(preset)
  study3 = credit_study3.get_config().arms
  for name in SIGN_ARMS:
    config.arms[name] = study3[name]
  config.ablation.arms = ",".join([natural_v2.ARMS, *SIGN_ARMS])
  return config
