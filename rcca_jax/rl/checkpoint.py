"""orbax checkpoints of a TrainState plus the data position, resumable on any mesh.

A checkpoint holds the whole `TrainState` (params, model state such as router
correction biases, optimizer state, step, PRNG key) and a JSON record with the data
iterator position. Saving is asynchronous; only the latest `max_to_keep` are kept.
Restoring takes an abstract target (`jax.ShapeDtypeStruct`s carrying the shardings
wanted now), so a run saved on one mesh resumes on another.
"""

import os
from typing import Any, Mapping, Optional

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


class Checkpointer:
  """Keeps the latest `max_to_keep` checkpoints of a run under `directory`."""

  def __init__(self, directory: str, *, max_to_keep: int = 3,
               save_interval_steps: int = 1, async_save: bool = True):
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, save_interval_steps=save_interval_steps,
        create=True, enable_async_checkpointing=async_save)
    self.directory = os.path.abspath(directory)
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
    """The state at `step` (default: latest) laid out like `target`, and the data
    position. `target` is a TrainState of arrays or ShapeDtypeStructs."""
    self._manager.wait_until_finished()
    if step is None:
      step = self._manager.latest_step()
      if step is None:
        raise FileNotFoundError(f"no checkpoint in {self.directory}")
    restored = self._manager.restore(
        step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_like(target)),
            meta=ocp.args.JsonRestore()))
    return restored["state"], restored["meta"]["data_position"]

  def data_position(self, step: Optional[int] = None) -> Optional[dict[str, Any]]:
    """The JSON record saved with `step` (default: latest) without the state; None
    when there is no checkpoint."""
    self._manager.wait_until_finished()
    step = self._manager.latest_step() if step is None else step
    if step is None:
      return None
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
