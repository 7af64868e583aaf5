"""A grader without a browser and a shrunk trainer config, for the trainer tests."""

from collections.abc import Sequence

import ml_collections

from experiments import tiny_natural


class FakeGrader:
  """Grades the i-th job of a run with reward `rewards[i % len(rewards)]` (None: all
  rubrics ungraded); counts its runs and closes. No browser."""

  def __init__(self, rewards: Sequence[float | None] = (0.2, 0.9, None, 0.5)):
    self.rewards = tuple(rewards)
    self.stats = {"timeouts": 0}
    self.calls = 0
    self.closed = 0

  def run(self, jobs, progress=None):
    del progress
    self.calls += 1
    for i, _ in enumerate(jobs):
      reward = self.rewards[i % len(self.rewards)]
      yield {"reward": reward, "rubric_score": reward, "issues": [], "rubrics": [],
             "gates": {"format": True, "source": True, "runtime": True}}

  def close(self):
    self.closed += 1


def trainer_config() -> ml_collections.ConfigDict:
  """tiny_natural shrunk: one family, a 32-wide model, 1 SFT step, 2 RL steps of two
  mini-batches with a reference KL, no evaluation."""
  config = tiny_natural.get_config()
  config.model.update(hidden_size=32, intermediate_size=64)
  config.data.families = ("dark_mode",)
  config.sft.update(num_steps=1, batch_size=2, log_every=1)
  config.rl.update(num_steps=2, group_size=2, prompts_per_step=2, max_new_tokens=8,
                   num_iterations=2, mini_batches=2, recompute_old_logprobs=True)
  config.rl.loss.kl_beta = 0.05
  config.eval.enabled = False
  return config
