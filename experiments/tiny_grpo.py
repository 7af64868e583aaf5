"""GRPO-vs-RCCA ablation, GRPO arm (token weights all 1); see tiny_rcca.py.

    python -m rcca_jax.main --config=experiments/tiny_grpo.py --workdir=/tmp/abl_grpo
"""

from experiments import tiny_rcca


def get_config():
  return tiny_rcca.get_config(policy_loss="grpo")
