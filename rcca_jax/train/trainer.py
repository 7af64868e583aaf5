"""The training job: SFT on reference apps, then RL (RCCA or GRPO), resumable.

The SFT stage's loop: `train.sft_loop`. One RL step, phase by phase:
`Trainer.rl_step`. Checkpoints (sft/, rl/, best/ under `DIR/checkpoints/`, the KL
reference): `train.checkpoints`. Dev evaluations, the collapse warning and the final
report: `train.dev_eval`.
Re-running on the same directory restores the latest checkpoint of the furthest stage
(model, optimizer, step, PRNG key, data position); a finished SFT stage is not
repeated, and metrics rows logged after the restored step are dropped before they
are written again, so no step appears twice in `metrics.jsonl`.

Sampling seeds derive from the checkpointed PRNG key and the step, prompt order from
the seed and the data position: a resumed run continues the same sequence. Several
processes run one job through `parallel.multihost` (each samples and grades its share
of the prompts); `rl.overlap_steps=1` samples a step ahead while grading
(`train.overlap`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Optional, Sequence

import jax
import ml_collections

from rcca_jax.base import compile_count
from rcca_jax.evaluation.grader import Grader
from rcca_jax.parallel import multihost
from rcca_jax.rl import batch_updates
from rcca_jax.rl import train_step
from rcca_jax.sampling import Sampler
from rcca_jax.train import config_check
from rcca_jax.train import faults
from rcca_jax.train import flat_groups
from rcca_jax.train import overlap as overlap_lib
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import row_reduce
from rcca_jax.train import run_log
from rcca_jax.train import sections
from rcca_jax.train import workdir_guard
from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.dev_eval import DevEvaluation
from rcca_jax.train.programs import Programs, RlPrograms
from rcca_jax.train.sft_loop import SftLoop
from rcca_jax.train.task_sources import TaskSources


@dataclasses.dataclass
class _RlParts:  # what every RL step of one `run_rl` uses
  programs: RlPrograms
  source: overlap_lib.RolloutSource
  guard: faults.NonFiniteGuard


class Trainer:
  """Builds the job's roles from a config and runs it; see the module docstring.

  Roles: `programs` (policy, sampler, compiled programs, KL reference, grader),
  `tasks` (task sources), `checkpoints` (sft/, rl/, best/), `dev` (dev evaluation,
  keep-best, collapse warning, outcome report), `sft_loop` (the SFT stage)."""

  def __init__(self, config: ml_collections.ConfigDict, workdir: str, *,
               mode: str = "train", sampler: Optional[Sampler] = None,
               grader: Optional[Grader] = None, allow_changes: Sequence[str] = ()):
    """`config` is checked for `mode` ("train" or "eval") before anything is built;
    `sampler` and `grader` replace the in-process `JaxSampler` and the browser
    `EvalPool` (the trainer closes the grader when it closes). The work directory is
    locked (`workdir_guard`) until `close`; in "train" mode a config other than the one
    saved there is refused unless its changed fields match `allow_changes`."""
    config_check.check(config, num_devices=jax.device_count(), mode=mode,
                       num_processes=jax.process_count())
    self.config = config
    self.job = job = sections.job_config(config)
    self.workdir = workdir
    os.makedirs(workdir, exist_ok=True)
    # Before anything reads or repairs the directory: one live job per work directory.
    self._lock = (workdir_guard.claim(workdir, config.to_dict(), check_config=mode == "train",
                                      allow=allow_changes)
                  if jax.process_index() == 0 else None)
    self.programs = Programs(job, sampler=sampler, grader=grader)
    self.tokenizer = self.programs.tokenizer
    self.update_config = self.programs.update_config  # μ x mini-batches per RL step
    self.checkpoints = Checkpoints(workdir, job, self.programs.abstract_state,
                                   self.update_config.updates_per_batch,
                                   sft_optimizer=job.sft.optimizer,
                                   rl_optimizer=job.rl.optimizer)
    self.tasks = TaskSources(job, self.tokenizer, workdir, self.programs.grade_pairs)
    self.loss = job.rl.loss
    self.metrics = run_log.MetricsLogger(workdir)
    self.credit = job.credit  # RL blame; dev evaluation keeps the evaluator's
    self.credit_weights = self.credit.weights()  # credit.diagnostic_weights keywords
    self.dev = DevEvaluation(job, workdir, self.programs, self.tasks, self.checkpoints,
                             self.metrics, self.credit_weights)
    self.sft_loop = SftLoop(job, self.programs, self.tasks, self.checkpoints, self.metrics,
                            self.dev)
    self._closed = False
    self._watch: Optional[faults.PreemptionWatch] = None

  def open(self) -> "Trainer":
    """Reopens checkpoints and metrics after `close` (a Trainer can run again)."""
    if self._closed:
      if self._lock is not None:
        self._lock.acquire()
      self.checkpoints.reopen()
      self.metrics.open()
      self._closed = False
    return self

  def close(self) -> None:
    """Waits for checkpoints and closes files and workers; `open` (or the next
    `train`/`evaluate_checkpoint`) reopens them."""
    if self._closed:
      return
    self.checkpoints.close()
    self.programs.close_grader()
    self.metrics.close()
    if self._lock is not None:
      self._lock.release()
    self._closed = True

  def __enter__(self) -> "Trainer":
    return self.open()

  def __exit__(self, *exc) -> None:
    self.close()

  def _preempted(self, step: int, notice: bool = True) -> bool:
    """Whether SIGTERM (or, with `notice`, a preemption notice) asks the run to stop
    after `step`."""
    return self._watch is not None and self._watch.requested(step, notice)

  # ---- RL ------------------------------------------------------------------------

  def rl_state_from(self, sft_state, sft_seed: Optional[int] = None
                    ) -> train_step.TrainState:
    """Step 0 of the RL stage: the SFT parameters with a fresh RL optimizer and the SFT
    state's PRNG key, folded with this job's `seed` when the SFT ran with another
    (`sft_seed`: one SFT shared by seeded RL runs, `ablation.shared_sft`)."""
    fresh = self.programs.fresh_state(self.job.rl.optimizer)
    rng = sft_state.rng
    if sft_seed is not None and sft_seed != self.job.seed:
      rng = jax.random.fold_in(rng, self.job.seed)
    return fresh.replace(params=sft_state.params, model_state=sft_state.model_state,
                         rng=rng)

  def sample_rl(self, state, step: int) -> list:
    """RL step `step`'s rollouts of this process's prompts, sampled with `state`."""
    return self.programs.sample_rollouts(state, self.tasks.rl_prompts(step), step)

  def _rl_parts(self) -> _RlParts:
    r, p = self.job.rl, self.programs
    return _RlParts(
        p.rl_programs(self.loss, r.optimizer, self.checkpoints.reference_state),
        overlap_lib.RolloutSource(
            self.sample_rl, functools.partial(rollouts_lib.grade, p.grader()),
            overlap_steps=r.overlap_steps, num_steps=r.num_steps,
            ahead_dir=os.path.join(self.workdir, "checkpoints", "rl_ahead")),
        faults.NonFiniteGuard("RL", self.job.max_nonfinite_in_row))

  def run_rl(self, state) -> train_step.TrainState:
    stage = self.checkpoints.rl
    # RL steps (rollout batches) done; the state counts optimizer updates.
    start = int(jax.device_get(state.step)) // self.update_config.updates_per_batch
    self.dev.catch_up(state, start)  # a kill between checkpoint and evaluation
    if start >= stage.num_steps:
      return state
    self.tasks.rl()
    parts = self._rl_parts()
    bar = run_log.Progress("rl", stage.num_steps, start)
    try:
      for step in range(start, stage.num_steps):
        state, row, preempted = self.rl_step(state, step, parts)
        bar.update(reward=row["reward_mean"], passed=row["pass_rate"], loss=row["loss"])
        parts.guard.check(step + 1, stage.checkpointer.latest_step)
        # Its dev evaluation, if due, is done on resume.
        faults.stop_if(preempted, stage.checkpointer,
                       f"RL stopped after step {step + 1}, checkpointed")
        if self.dev.due(step + 1):
          self.dev.after_rl_step(state, step + 1)
        faults.stop_if(self._preempted(step + 1, notice=False), stage.checkpointer,
                       f"RL stopped after step {step + 1} and its dev evaluation")
    finally:
      bar.close()
    stage.checkpointer.wait()
    return state

  def rl_step(self, state, step: int, parts: _RlParts) -> tuple[Any, dict, bool]:
    """RL step `step` (0-based), phase by phase: sample; grade and localize (the
    grader's workers run `credit.localize.localize_record` on every record,
    `Programs.grader`); settle the unscorable (graded again); fill or drop flat groups
    (dynamic sampling, `train.flat_groups`); advantages; token weights (credit); batch;
    update; checkpoint; row. Returns the state, the row and whether the run is asked
    to stop (checkpointed then)."""
    t0, r, grader = time.time(), self.job.rl, self.programs.grader()
    compiled = compile_count.snapshot()
    cached, deaths = self.programs.cache_counts(), grader.stats.get("worker_deaths", 0)
    rollouts = parts.source.sample(state, step)
    times = parts.source.grade(rollouts, state, step)
    regraded = rollouts_lib.settle_unscorable(
        grader, rollouts, step=step + 1, max_share=r.max_unscorable,
        retries=r.unscorable_retries, last_checkpoint=self.checkpoints.last_rl)
    rollouts, flat, in_loss = flat_groups.dynamic_sampling(
        rollouts, r.group_size, rounds=r.resample_flat_rounds, mode=r.flat_groups,
        draw=functools.partial(self._draw_round, state, step))
    advantages = rollouts_lib.group_advantages(rollouts, r.group_size,
                                               self.loss.scale_advantages_by_std)
    rollouts_lib.assign_weights(rollouts, weights=self.credit_weights,
                                blame=self.credit.blame,
                                placebo_draw=self.credit.placebo_draw)
    t_batch = time.time()
    batch = rollouts_lib.rl_batch(rollouts, advantages, in_loss=in_loss,
                                  pad_id=self.programs.pad_id, **rollouts_lib.rl_layout(r))
    # With flat groups dropped, a step without a group left anywhere applies no update.
    signal = in_loss is None or multihost.any_process(flat["groups_kept"] > 0)
    state, update = self._update(state, step, batch, parts, signal)
    t_update, preempted = time.time(), self._preempted(step + 1)
    if self.checkpoints.save(self.checkpoints.rl, state, {"prompt_batches": step + 1},
                             every=r.checkpoint_every, done=step + 1,
                             force=step + 1 == r.num_steps or preempted):
      parts.source.save(step + 1)
    row = rollouts_lib.step_row(
        rollouts, self.credit.blame, self.tasks.is_controlled, update, started=t0,
        skipped_long_prompts=self.tasks.skipped_prompts,
        timeouts=grader.stats.get("timeouts", 0), regraded=regraded,
        worker_deaths=grader.stats.get("worker_deaths", 0) - deaths, **times,
        **self.programs.cache_row(cached), **flat, train_s=t_update - t_batch,
        **compile_count.since(compiled))
    row = row_reduce.combine(multihost.gather_shares(row, len(rollouts)))
    self.metrics.write("rl", step + 1, row)
    return state, row, preempted

  def _draw_round(self, state, step: int, round_: int) -> list:
    """Dynamic sampling's round `round_` of RL step `step`: further prompts' rollouts,
    sampled and graded (their unscorable responses stay ungraded: out of the loss)."""
    p = self.programs
    extra = p.sample_rollouts(state, self.tasks.rl_prompts(step, round_), step, round_)
    rollouts_lib.grade(p.grader(), extra)
    return extra

  def _update(self, state, step: int, batch: dict, parts: _RlParts, signal: bool
              ) -> tuple[Any, dict[str, float]]:
    """The batch's optimizer updates (`batch_updates.update_batch`; none without
    `signal`); the state after them and their row entries."""
    programs = parts.programs
    state, per_update, extra, skipped = batch_updates.update_batch(
        programs.update, state, batch, self.update_config, keys=programs.objective.keys,
        reference=programs.reference, policy_logprobs=programs.old_logprobs,
        signal=signal)
    if skipped:
      run_log.note("RL step %d: %s; update skipped", step + 1, skipped)
    for update in per_update:
      parts.guard.update(update["skipped_nonfinite"])
    return state, {**batch_updates.summarize(per_update, self.update_config.num_iterations),
                   **extra}

  # ---- the job ---------------------------------------------------------------------

  def train(self) -> None:
    """SFT (unless finished), post-SFT evaluation (once), then RL; resumes."""
    self.open()
    self._watch = faults.PreemptionWatch()
    ckpt = self.checkpoints
    try:
      self.tasks.rl()  # RL prompts that cannot fit are refused before any work
      if self.job.eval.enabled and not self.tasks.is_controlled:
        self.tasks.dev()  # so is a dev task file that cannot be read
      # RL whose checkpoints are all torn starts over from the SFT result.
      restored = ckpt.restore_latest(ckpt.rl, start_over=True)
      if restored is not None:
        state, position, rl_step = restored
        rl_step //= self.update_config.updates_per_batch
        run_log.note("resuming RL at step %d (%s)", rl_step, position)
        self.metrics.truncate("rl", rl_step)
      else:
        self.metrics.truncate("rl", 0)
        restored = ckpt.restore_latest(ckpt.sft)
        sft_seed = None  # an SFT run here, or saved before checkpoints named their seed
        if restored is not None:
          state, position, sft_step = restored
          sft_seed = position.get("seed")
          run_log.note("resuming SFT at step %d (%s)", sft_step, position)
        else:
          sft_step = 0
          state = self.programs.fresh_state(self.job.sft.optimizer)
        self.metrics.truncate("sft", sft_step)
        state = self.sft_loop.run(state, self._preempted)
        done = int(jax.device_get(state.step))
        self.dev.after_sft(state, done)  # the post-SFT evaluation, once
        state = self.rl_state_from(state, sft_seed)
        self.dev.keep_post_sft(state)  # RL step 0 as the first best
        if self._preempted(done, notice=False):
          raise faults.Preempted("preempted: stopped after SFT and its dev evaluation; "
                                 "run the same command to resume")
      self.run_rl(state)
      self.dev.report_outcome()
    finally:
      self._watch.close()
      self._watch = None
      self.close()

  def evaluate_checkpoint(self, tasks_path: Optional[str] = None,
                          out_name: Optional[str] = None,
                          checkpoint: str = "latest") -> dict[str, Any]:
    """`DevEvaluation.evaluate_checkpoint` of `checkpoint` (`Checkpoints.state_for`:
    "latest", "rl", "sft", "best" or "base")."""
    self.open()
    try:
      name, state = self.checkpoints.state_for(checkpoint, self.programs.fresh_state)
      return self.dev.evaluate_checkpoint(state, name, tasks_path, out_name)
    finally:
      self.close()
