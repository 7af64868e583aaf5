"""How a training run stops safely: preemption, non-finite updates, unscorable steps.

- `RunStopped`: the run cannot go on without losing what it trains (a non-finite update
  `max_nonfinite_in_row` times in a row, an RL step whose share of unscorable responses
  stays over `rl.max_unscorable` after its retries). Raised after the last good step is
  checkpointed; `main` prints its one line and exits with `EXIT_STOPPED`.
- `Preempted`: SIGTERM (or, with several processes, JAX's preemption notice) arrived;
  the step in flight was finished and checkpointed, its rows written. `main` exits with
  `EXIT_PREEMPTED` (75, EX_TEMPFAIL: run the same command again to resume).
docs/faults.md says what each fault costs. Nothing here imports JAX at
module level: `main` catches these before JAX starts.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable, Optional

EXIT_STOPPED = 3
EXIT_PREEMPTED = 75


class RunStopped(RuntimeError):
  """The run stopped safely; the message is one line saying why and what was kept."""
  exit_code = EXIT_STOPPED


class Preempted(RunStopped):
  """SIGTERM or a preemption notice: the current step was checkpointed."""
  exit_code = EXIT_PREEMPTED


class PreemptionWatch:
  """Turns SIGTERM into a flag that the training loops read between steps.

  `requested(step)` is True once SIGTERM arrived in any process, or, in a
  multi-process job, when JAX's preemption sync point is reached at `step` (a
  collective there: every process asks at the same steps). Installs its handler only in the main thread
  and restores the previous one on `close`.
  """

  def __init__(self) -> None:
    self.signalled = False
    self._previous: Any = None
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._on_term)

  def _on_term(self, signum: int, frame: Any) -> None:
    del signum, frame
    self.signalled = True

  def requested(self, step: int, notice: bool = True) -> bool:
    """`notice=False` leaves JAX's preemption sync point out (ask it once per step)."""
    from rcca_jax.parallel import multihost  # pylint: disable=import-outside-toplevel
    if multihost.is_multi_process():
      return (multihost.any_process(self.signalled)
              or (notice and multihost.reached_preemption(step)))
    return self.signalled

  def close(self) -> None:
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None


def stop_if(preempted: bool, checkpointer: Any, what: str) -> None:
  """When `preempted`: waits for `checkpointer`'s pending save, then raises `Preempted`
  saying `what` was done and kept."""
  if preempted:
    checkpointer.wait()
    raise Preempted(f"preempted: {what}; run the same command to resume")


class NonFiniteStop(RunStopped):
  """Updates were skipped for non-finite values too many times in a row."""


class NonFiniteGuard:
  """Counts updates skipped for a non-finite loss, gradient norm or policy log-probs
  (the state is kept, `train_step.make_train_step`); `check` raises NonFiniteStop
  after `limit` in a row (0: never)."""

  def __init__(self, stage: str, limit: int):
    self.stage = stage
    self.limit = limit
    self.in_row = 0
    self.total = 0

  def update(self, skipped: float) -> None:
    self.in_row = self.in_row + 1 if skipped else 0
    self.total += bool(skipped)

  def check(self, step: int, last_saved: Callable[[], Optional[int]]) -> None:
    if self.limit and self.in_row >= self.limit:
      saved = last_saved()
      raise NonFiniteStop(
          f"{self.stage} step {step}: {self.in_row} updates in a row skipped for a "
          f"non-finite loss, gradient norm or log-probs (max_nonfinite_in_row="
          f"{self.limit}); parameters unchanged since the last finite update, last "
          f"checkpoint: {'none' if saved is None else f'step {saved}'}")
