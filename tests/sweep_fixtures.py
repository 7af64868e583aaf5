"""Ablation summaries in `ablation_report`'s form, for the sweep report and notebook tests."""

from typing import Any


def run(seed: int, bug_probs, pass_at_1: float = 0.5) -> dict[str, Any]:
  """A run: post-SFT then evaluations at RL steps 4 and 8, with these mean p_bug."""
  points = [{"pass_rate": 0.5, "reward_mean": 0.5, "bug_prob_mean": p,
             "pass_at_1": pass_at_1} for p in bug_probs]
  return {"seed": seed, "post_sft": points[0], "rl_steps": 8, "rl": {},
          "evals": [dict(step=s, **p) for s, p in zip((4, 8), points[1:])]}


def summary(rcca_offset: float) -> dict[str, Any]:
  """Five seeds; GRPO's p_bug falls 0.6 -> 0.4 -> 0.3, RCCA's by `rcca_offset` more per
  evaluation on seeds 0-3 and not at all better on seed 4."""
  grpo = [run(s, (0.6, 0.4, 0.3)) for s in range(5)]
  rcca = [run(s, (0.6, 0.4 - rcca_offset * (s < 4), 0.3 - rcca_offset * (s < 4)))
          for s in range(5)]
  return {"arms": {"grpo": grpo, "rcca": rcca}}
