"""A job's checkpoints (orbax, under `DIR/checkpoints/`), their restore, save and
lifecycle:

  sft/  TrainState of the SFT stage; its step counts SFT updates (the data position
        is the number of batches consumed).
  rl/   TrainState of the RL stage (fresh optimizer, params from the finished SFT
        stage); its step counts optimizer updates, `rl.num_iterations` x
        `rl.mini_batches` per RL step (data position: prompt batches consumed).
  best/ (`checkpoint.keep_best`, default on) the RL TrainState of the best dev reward
        so far, the post-SFT evaluation (RL step 0) included; its data position also
        holds `dev_reward` and `rl_step`. `--mode=eval --checkpoint=best` reads it.
With `rl.loss.kl_beta > 0` the KL reference is the latest sft/ checkpoint (or the one
`rl.reference` names), so a resumed run uses the same reference."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from rcca_jax.data.selection import resolve_path
from rcca_jax.rl import checkpoint as checkpoint_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step
from rcca_jax.train import faults
from rcca_jax.train import run_log
from rcca_jax.train import sections


def all_finite(tree: Any) -> bool:
  """Whether every floating-point leaf of `tree` is finite (one device reduction)."""
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(x.dtype, jnp.floating)]
  return bool(jax.device_get(jnp.all(jnp.stack(leaves)))) if leaves else True


def _cause(error: Exception) -> str:
  """A CheckpointError's per-step causes, without its leading directory."""
  return str(error).split(" restores: ", 1)[-1]


CHOICES = ("latest", "sft", "rl", "best", "base")


def valid_choice(which: str) -> bool:
  """Whether `which` names what `Checkpoints.state_for` can evaluate."""
  name, _, step = which.partition(":")
  return (which in CHOICES
          or (name in ("sft", "rl") and step.isdigit()))


@dataclasses.dataclass
class Stage:
  """A training stage: its checkpoints, optimizer (the job's, as given) and length (RL:
  in RL steps)."""
  name: str
  checkpointer: checkpoint_lib.Checkpointer
  opt_config: optim.OptimizerConfig
  num_steps: int


class Checkpoints:
  """The stages `sft` and `rl` and, with `checkpoint.keep_best`, `best`. `target`
  gives the abstract TrainState of an optimizer (restore targets); an RL TrainState
  counts optimizer updates, `updates_per_batch` per RL step. `sft_optimizer` and
  `rl_optimizer` are the stages' optimizers as the config layer built them (the job's
  `sft.optimizer` and `rl.optimizer`, train/sections.py), kept as given."""

  def __init__(self, workdir: str, job: sections.JobConfig,
               target: Callable[[optim.OptimizerConfig], train_step.TrainState],
               updates_per_batch: int, *, sft_optimizer: optim.OptimizerConfig,
               rl_optimizer: optim.OptimizerConfig):
    self.workdir, self.job, self._target = workdir, job, target
    self.updates_per_batch = updates_per_batch
    self.sft = Stage("sft", self._checkpointer("sft"), sft_optimizer, job.sft.num_steps)
    self.rl = Stage("rl", self._checkpointer("rl"), rl_optimizer, job.rl.num_steps)
    self.keep_best = bool(job.checkpoint.keep_best)
    self.best = self._checkpointer("best", max_to_keep=1) if self.keep_best else None

  def _checkpointer(self, stage: str, max_to_keep: Optional[int] = None
                    ) -> checkpoint_lib.Checkpointer:
    c = self.job.checkpoint
    return checkpoint_lib.Checkpointer(
        os.path.join(self.workdir, "checkpoints", stage),
        max_to_keep=max_to_keep or c.max_to_keep, async_save=c.async_save)

  def reopen(self) -> None:
    """New checkpointers after `close`."""
    for stage in (self.sft, self.rl):
      stage.checkpointer = self._checkpointer(stage.name)
    if self.keep_best:
      self.best = self._checkpointer("best", max_to_keep=1)

  def close(self) -> None:
    """Waits for pending saves and closes every checkpointer."""
    for stage in (self.sft, self.rl):
      stage.checkpointer.close()
    if self.best is not None:
      self.best.close()

  def restore(self, stage: Stage, step: Optional[int] = None):
    """(state, data position) of `stage`'s checkpoint `step` (default: the latest)."""
    return stage.checkpointer.restore(self._target(stage.opt_config), step)

  def restore_latest(self, stage: Stage, *, start_over: bool = False
                     ) -> Optional[tuple[Any, dict, int]]:
    """(state, data position, step) of `stage`'s newest checkpoint that restores (a
    broken newer one is set aside with a warning); None without any. When none
    restores: `faults.RunStopped` naming them, or with `start_over` (a stage that can
    begin again from the one before it) all are set aside with one warning and None."""
    latest = stage.checkpointer.latest_step()
    if latest is None:
      return None
    try:
      return stage.checkpointer.restore_latest_good(self._target(stage.opt_config))
    except checkpoint_lib.CheckpointError as e:
      if not start_over:
        raise faults.RunStopped(f"{e}; nothing to resume from (exit 3: do not restart "
                                "as is)") from e
      moved = stage.checkpointer.set_aside_all()
      steps = latest // (self.updates_per_batch if stage is self.rl else 1)
      start = "the SFT result" if stage is self.rl else "the initial weights"
      run_log.note("warning: no %s checkpoint restores (%s); set aside: %s; %s starts "
                   "over from %s, redoing %d steps", stage.name, _cause(e),
                   ", ".join(moved), stage.name, start, steps)
      return None

  def last_rl(self) -> str:
    """The latest RL checkpoint in words: what a stopped run resumes from."""
    saved = self.rl.checkpointer.latest_step()
    return ("none in rl/ (the SFT result)" if saved is None
            else f"rl/{saved} (after RL step {saved // self.updates_per_batch})")

  def restore_from(self, directory: str, stage: Stage):
    """(state, data position) of the latest checkpoint in another directory, read as a
    `stage` state (e.g. a KL reference: OTHER/checkpoints/sft)."""
    other = dataclasses.replace(stage, checkpointer=checkpoint_lib.Checkpointer(
        resolve_path(directory), async_save=False))
    return self.restore(other)

  def reference_state(self, path: str):
    """The KL reference's state when it is a checkpoint of this project: the one `path`
    (`rl.reference`) names, else this run's final SFT state; None when neither
    exists."""
    if path:
      return self.restore_from(path, self.sft)[0]
    if self.sft.checkpointer.latest_step() is not None:
      return self.restore(self.sft)[0]
    return None

  def save(self, stage: Stage, state, position: dict, *, every: int,
           force: bool = False, done: Optional[int] = None) -> bool:
    """Saves every `every` steps (`done`: steps done, default the state's) or when
    `force`d; whether it saved. A state with a non-finite leaf is never saved:
    RunStopped."""
    step = int(jax.device_get(state.step)) if done is None else done
    if not force and step % every:
      return False
    if not all_finite((state.params, state.opt_state, state.model_state)):
      raise faults.RunStopped(
          f"{stage.name} step {step}: non-finite parameters or optimizer state, not "
          f"saved; last checkpoint: step {stage.checkpointer.latest_step()}")
    stage.checkpointer.save(state, position, force=True)
    return True

  def state_for(self, which: str, fresh: Callable[[optim.OptimizerConfig], Any]
                ) -> tuple[str, train_step.TrainState]:
    """(stage name, state) to evaluate: "latest" (RL if any, else SFT), "rl", "sft",
    "sft:STEP" / "rl:STEP" (that kept checkpoint), "best" (the RL state of the best dev
    reward) or "base" (no checkpoint: `fresh`, the initial, `init_from_hf` or
    `init_from_gguf` parameters)."""
    if not valid_choice(which):
      raise ValueError(f"checkpoint {which!r}: expected one of {CHOICES} or STAGE:STEP")
    if ":" in which:
      name, step = which.split(":")
      stage = {"sft": self.sft, "rl": self.rl}[name]
      kept = stage.checkpointer.all_steps()
      if int(step) not in kept:
        raise FileNotFoundError(f"no {name} checkpoint {step} under {self.workdir}/"
                                f"checkpoints (kept: {kept or 'none'})")
      return stage.name, self.restore(stage, int(step))[0]
    if which == "base":
      return "base", fresh(self.sft.opt_config)
    if which == "best":
      if self.best is None or self.best.latest_step() is None:
        raise FileNotFoundError(
            f"no best checkpoint under {self.workdir}/checkpoints/best (a run with "
            "checkpoint.keep_best=True saves one after its dev evaluations)")
      return "best", self.restore(dataclasses.replace(self.rl, checkpointer=self.best))[0]
    stages = {"latest": (self.rl, self.sft), "rl": (self.rl,), "sft": (self.sft,)}[which]
    for stage in stages:
      if stage.checkpointer.latest_step() is not None:
        return stage.name, self.restore(stage)[0]
    what = "" if which == "latest" else f"{which} "
    raise FileNotFoundError(f"no {what}checkpoint under {self.workdir}/checkpoints")
