"""Each RL step's graded rollouts, optionally sampled a step ahead (`rl.overlap_steps`).

`overlap_steps=0` (the default): step n samples its rollouts with the current policy,
then grades them.

`overlap_steps=1`: step n's rollouts were sampled during step n-1, with the policy
before update n-1, so training is one step off-policy: the importance ratio's
denominator is the sampler's log-probs of the policy that sampled (the trainer does
not recompute them) and the PPO clip bounds the step. While step n's rollouts are
graded (in a thread; the browsers run in the grader's processes), the main thread
samples step n+1's with the current policy (before update n); training on step n
follows. Sampling and grading overlap; training and sampling do not (they share the
devices, and the train step donates the weights the sampler reads). The first step
samples its own rollouts first.

Resume: the rollouts sampled ahead are written next to each RL checkpoint
(`DIR/checkpoints/rl_ahead/STEP.pI-of-N.pkl`, one file per process) and read back on
resume, so a resumed run trains on the rollouts an uninterrupted one would have; with
another process count (other shares) they are sampled again with the restored policy.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any, Callable, Optional

import jax

from rcca_jax.train import run_log


class RolloutSource:
  """Rollouts of RL step n: `sample(state, n)` then `grade(rollouts, state, n)`; with
  overlap, step n's come sampled ahead and `grade` samples step n+1's while grading."""

  def __init__(self, sample: Callable[[Any, int], list], grade: Callable[[list], None],
               *, overlap_steps: int, num_steps: int, ahead_dir: str):
    self._sample = sample
    self._grade = grade
    self.overlap_steps = overlap_steps
    self.num_steps = num_steps
    self.ahead_dir = ahead_dir
    self._ahead: Optional[tuple[int, list]] = None
    self._sample_s = 0.0

  def _path(self, step: int) -> str:
    return os.path.join(self.ahead_dir, f"{step:08d}.p{jax.process_index()}-of-"
                                        f"{jax.process_count()}.pkl")

  def _sampled_ahead(self, step: int) -> Optional[list]:
    if self._ahead is not None and self._ahead[0] == step:
      return self._ahead[1]
    if os.path.exists(self._path(step)):
      with open(self._path(step), "rb") as f:
        return pickle.load(f)
    if step:
      run_log.note("overlap: step %d's rollouts sampled now (none saved)", step)
    return None

  def sample(self, state: Any, step: int) -> list:
    """Step `step`'s rollouts: sampled ahead (with overlap), else now with `state`."""
    t0 = time.time()
    rollouts = self._sampled_ahead(step) if self.overlap_steps else None
    if rollouts is None:
      rollouts = self._sample(state, step)
    self._sample_s = time.time() - t0
    return rollouts

  def grade(self, rollouts: list, state: Any, step: int) -> dict[str, float]:
    """Grades step `step`'s `rollouts` (with overlap, in a thread while step+1's are
    sampled with `state`); the seconds spent sampling (this step's `sample` included)
    and grading."""
    t0 = time.time()
    if not self.overlap_steps:
      self._grade(rollouts)
      return {"sample_s": self._sample_s, "eval_s": time.time() - t0}
    outcome: dict[str, Any] = {}

    def grade() -> None:
      started = time.time()
      try:
        self._grade(rollouts)
      except BaseException as e:  # pylint: disable=broad-except  (re-raised below)
        outcome["error"] = e
      outcome["eval_s"] = time.time() - started

    grader = threading.Thread(target=grade, name="grade-rollouts", daemon=True)
    grader.start()
    t1 = time.time()
    self._ahead = None
    if step + 1 < self.num_steps:
      self._ahead = (step + 1, self._sample(state, step + 1))
    sample_s = self._sample_s + time.time() - t1
    grader.join()
    if "error" in outcome:
      raise outcome["error"]
    return {"sample_s": sample_s, "eval_s": outcome["eval_s"]}

  def save(self, done: int) -> None:
    """After the checkpoint of `done` steps: keeps the rollouts sampled for step `done`
    (this process's file; older ones are removed)."""
    if not self.overlap_steps or self._ahead is None or self._ahead[0] != done:
      return
    os.makedirs(self.ahead_dir, exist_ok=True)
    tmp = self._path(done) + ".tmp"
    with open(tmp, "wb") as f:
      pickle.dump(self._ahead[1], f)
    os.replace(tmp, self._path(done))
    mine = f".p{jax.process_index()}-of-{jax.process_count()}.pkl"
    for name in os.listdir(self.ahead_dir):
      if name.endswith(mine) and int(name.split(".")[0]) < done:
        os.remove(os.path.join(self.ahead_dir, name))
