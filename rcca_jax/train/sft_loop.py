"""The SFT stage's loop: next-token updates on the SFT examples (`TaskSources`), from
any step of it (the data position is the number of batches consumed), checkpointed
every `sft.checkpoint_every` steps, every `checkpoint.every_seconds`, at the end and
when preempted; rows every `sft.log_every` steps; the dev evaluations due during SFT
(`DevEvaluation.during_sft`)."""

from __future__ import annotations

import time
from typing import Callable

import jax

from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step
from rcca_jax.train import faults
from rcca_jax.train import run_log
from rcca_jax.train import sections
from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.dev_eval import DevEvaluation
from rcca_jax.train.programs import Programs
from rcca_jax.train.task_sources import TaskSources


class SftLoop:
  """Runs the SFT stage of a job with the trainer's roles."""

  def __init__(self, job: sections.JobConfig, programs: Programs, tasks: TaskSources,
               checkpoints: Checkpoints, metrics: run_log.MetricsLogger,
               dev: DevEvaluation):
    self.job, self.programs, self.tasks = job, programs, tasks
    self.checkpoints, self.metrics, self.dev = checkpoints, metrics, dev

  def run(self, state, preempted: Callable[[int], bool]) -> train_step.TrainState:
    """SFT from `state`'s step to `sft.num_steps`; `preempted(step)` says whether the
    run is asked to stop after `step` (checkpointed then: `faults.Preempted`)."""
    stage, s = self.checkpoints.sft, self.job.sft
    start = int(jax.device_get(state.step))
    if start >= stage.num_steps:
      return state
    examples = self.tasks.sft_examples()
    lengths = [len(ids) for ids, _ in examples]
    rows = self.programs.packed_rows(examples, s)
    update = self.programs.compile(sft_lib.next_token_objective(s.head_on_loss_positions),
                                   s.optimizer)
    bar = run_log.Progress("sft", stage.num_steps, start)
    guard = faults.NonFiniteGuard("SFT", self.job.max_nonfinite_in_row)
    every_s, saved_at = self.job.checkpoint.every_seconds, time.time()
    try:
      while start < stage.num_steps:
        t0 = time.time()
        state, m = update(state, self.programs.sft_batch(examples, lengths, rows, start))
        start += 1
        m = jax.device_get(m)
        guard.update(m["skipped_nonfinite"])
        stop = preempted(start)
        timed = 0 < every_s <= time.time() - saved_at
        if self.checkpoints.save(stage, state, {"batches": start, "seed": self.job.seed},
                                 every=s.checkpoint_every,
                                 force=start == stage.num_steps or stop or timed):
          saved_at = time.time()
        if start % s.log_every == 0 or start == stage.num_steps or stop:
          self.metrics.write("sft", start, {
              "loss": m["loss"], "nll": m["nll"], "grad_norm": m["grad_norm"],
              "clipped": m["clipped"], "skipped_nonfinite": guard.total,
              "learning_rate": m["learning_rate"], "tokens": m["response_tokens"],
              "step_s": time.time() - t0})
        bar.update(loss=float(m["loss"]))
        guard.check(start, stage.checkpointer.latest_step)
        faults.stop_if(stop, stage.checkpointer,
                       f"SFT stopped after step {start}, checkpointed")
        self.dev.during_sft(state, start)
    finally:
      bar.close()
    stage.checkpointer.wait()
    return state
