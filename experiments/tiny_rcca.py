"""GRPO-vs-RCCA ablation, RCCA arm: tiny_natural with a longer RL stage.

    python -m rcca_jax.main --config=experiments/tiny_rcca.py --workdir=/tmp/abl_rcca
    python -m rcca_jax.main --config=experiments/tiny_grpo.py --workdir=/tmp/abl_grpo

The two configs differ only in `rl.policy_loss`. Both run the same SFT stage (same
seed and data); to train it once, copy `checkpoints/sft` of the first run into the
second run's directory before starting it (the SFT stage is then restored as
finished). Compare `reward_mean` and `pass_rate` of the `rl` and `eval` rows in the
two `metrics.jsonl` files (or `tensorboard --logdir` over both directories).
"""

from experiments import tiny_natural


def get_config(policy_loss: str = "rcca"):
  config = tiny_natural.get_config()
  config.rl.num_steps = 40
  config.rl.prompts_per_step = 4
  config.eval.every_rl_steps = 10
  config.rl.policy_loss = policy_loss
  return config
