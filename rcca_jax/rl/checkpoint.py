"""orbax checkpoints of a TrainState plus the data position, resumable on any mesh.

A checkpoint holds the whole `TrainState` (params, model state such as router
correction biases, optimizer state, step, PRNG key) and a JSON record with the data
iterator position. Saving is asynchronous; only the latest `max_to_keep` are kept.
Restoring takes an abstract target (`jax.ShapeDtypeStruct`s carrying the shardings
wanted now), so a run saved on one mesh resumes on another.

Repairs of what a crash leaves: opening removes orbax's temporary directories of
interrupted saves (`STEP.orbax-checkpoint-tmp...`); restoring the latest checkpoint
falls back to the newest step that restores and moves the broken newer ones aside
(`STEP.broken-TIME`), so saving that step again works. Opening a directory that another
live Checkpointer saves into is not supported (the workdir lock keeps other jobs out).
"""

import os
import shutil
import time
from typing import Any, Mapping, Optional

from absl import logging
import jax
import orbax.checkpoint as ocp

from rcca_jax.rl.train_step import TrainState


def abstract_like(state: Any, shardings: Optional[Any] = None) -> Any:
  """ShapeDtypeStructs of `state`'s leaves (with `shardings`, a matching tree)."""
  if shardings is None:
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                       sharding=getattr(x, "sharding", None)), state)
  return jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state,
      shardings)


# orbax (0.12) saves into `NAME.orbax-checkpoint-tmp` (older versions add `-TIMESTAMP`)
# and renames it to NAME when the save is complete.
ORBAX_TMP_MARK = ".orbax-checkpoint-tmp"
BROKEN_MARK = ".broken-"


class CheckpointError(RuntimeError):
  """No checkpoint of a directory restores."""


def remove_orbax_tmp(directory: str) -> list[str]:
  """Removes the temporary directories that interrupted orbax saves left in
  `directory` (process 0 only); their names."""
  if jax.process_index() or not os.path.isdir(directory):
    return []
  names = sorted(n for n in os.listdir(directory) if ORBAX_TMP_MARK in n)
  for name in names:
    shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    logging.warning("%s: removed %s, left by an interrupted save", directory, name)
  return names


class Checkpointer:
  """Keeps the latest `max_to_keep` checkpoints of a run under `directory`."""

  def __init__(self, directory: str, *, max_to_keep: int = 3,
               save_interval_steps: int = 1, async_save: bool = True):
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, save_interval_steps=save_interval_steps,
        create=True, enable_async_checkpointing=async_save)
    self.directory = os.path.abspath(directory)
    remove_orbax_tmp(self.directory)
    self._manager = ocp.CheckpointManager(self.directory, options=options)

  def save(self, state: TrainState, data_position: Mapping[str, Any], *,
           force: bool = False) -> bool:
    """Starts saving `state` at its step; False when the interval skips it."""
    step = int(jax.device_get(state.step))
    return self._manager.save(
        step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            meta=ocp.args.JsonSave({"step": step,
                                    "data_position": dict(data_position)})),
        force=force)

  def latest_step(self) -> Optional[int]:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def restore(self, target: TrainState, step: Optional[int] = None
              ) -> tuple[TrainState, dict[str, Any]]:
    """The state at `step` laid out like `target`, and the data position. `target` is
    a TrainState of arrays or ShapeDtypeStructs. Without `step`: the newest step that
    restores (`restore_latest_good`)."""
    if step is None:
      return self.restore_latest_good(target)[:2]
    self._manager.wait_until_finished()
    restored = self._manager.restore(
        step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_like(target)),
            meta=ocp.args.JsonRestore()))
    return restored["state"], restored["meta"]["data_position"]

  def restore_latest_good(self, target: TrainState
                          ) -> tuple[TrainState, dict[str, Any], int]:
    """(state, data position, step) of the newest step that restores. Newer steps that
    do not (a crash or a full disk mid-save) are moved aside as `STEP.broken-TIME`
    with a warning naming them and the step used. FileNotFoundError without any
    checkpoint; CheckpointError, moving nothing, when none restores."""
    failed: list[tuple[int, Exception]] = []
    for step in sorted(self.all_steps(), reverse=True):
      try:
        state, position = self.restore(target, step)
      except Exception as e:  # pylint: disable=broad-except  # any damage
        failed.append((step, e))
        continue
      for bad, e in failed:
        aside = self._move_aside(bad)
        logging.warning("%s: step %d does not restore (%s: %s); moved to %s; resuming "
                        "from step %d", self.directory, bad, type(e).__name__,
                        _first_line(e), aside, step)
      if failed:
        self._manager.reload()
      return state, position, step
    if not failed:
      raise FileNotFoundError(f"no checkpoint in {self.directory}")
    raise CheckpointError(
        f"no checkpoint in {self.directory} restores: " + "; ".join(
            f"step {s}: {type(e).__name__}: {_first_line(e)}" for s, e in failed)
    ) from failed[0][1]

  def set_aside_all(self) -> list[str]:
    """Moves every checkpoint aside (`STEP.broken-TIME`): the stage starts over. Their
    new paths."""
    moved = [self._move_aside(step) for step in sorted(self.all_steps())]
    self._manager.reload()
    return moved

  def _move_aside(self, step: int) -> str:
    """Renames step `step`'s directory to `STEP.broken-TIME` (process 0); its path."""
    path = os.path.join(self.directory, str(step))
    aside = f"{path}{BROKEN_MARK}{time.strftime('%Y%m%d-%H%M%S')}"
    if jax.process_index() == 0 and os.path.isdir(path):
      os.rename(path, aside)
    return aside

  def data_position(self, step: Optional[int] = None) -> Optional[dict[str, Any]]:
    """The JSON record saved with `step` without the state. Without `step`: the newest
    readable one (a warning names the unreadable newer steps); None when there is
    none."""
    self._manager.wait_until_finished()
    if step is not None:
      return self._read_position(step)
    for latest in sorted(self.all_steps(), reverse=True):
      try:
        return self._read_position(latest)
      except Exception as e:  # pylint: disable=broad-except  # any damage
        logging.warning("%s: step %d's data position does not read (%s: %s)",
                        self.directory, latest, type(e).__name__, _first_line(e))
    return None

  def _read_position(self, step: int) -> dict[str, Any]:
    restored = self._manager.restore(
        step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return restored["meta"]["data_position"]

  def delete_from(self, step: int) -> None:
    """Deletes the checkpoints at `step` and later (work a resumed run redoes)."""
    self._manager.wait_until_finished()
    for saved in self._manager.all_steps():
      if saved >= step:
        self._manager.delete(saved)

  def wait(self) -> None:
    """Blocks until pending asynchronous saves are on disk."""
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _first_line(error: Exception) -> str:
  return (str(error).strip().splitlines() or [""])[0][:300]
