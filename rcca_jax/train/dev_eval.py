"""A job's dev evaluations and what follows them: the `eval` rows, keep-best, the
collapse warning and the before/after report (`train.outcome`).

After each RL dev evaluation a watched metric (`outcome.WATCHED`: reward, gate rates)
more than `eval.collapse_margin` below the post-SFT evaluation prints one warning line;
at the end of `train` the run's before/after table, `DIR/curves.png` and the report
paths are printed."""

from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any, Mapping, Optional

import jax

from rcca_jax.data.selection import select_tasks
from rcca_jax.parallel import multihost
from rcca_jax.train import eval_loop
from rcca_jax.train import outcome as outcome_lib
from rcca_jax.train import run_log
from rcca_jax.train import sections
from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.programs import Programs
from rcca_jax.train.task_sources import TaskSources


class DevEvaluation:
  """Evaluates states on the dev tasks (and any task file), logging to `metrics`."""

  def __init__(self, job: sections.JobConfig, workdir: str, programs: Programs,
               tasks: TaskSources, checkpoints: Checkpoints,
               metrics: run_log.MetricsLogger, credit_weights: Mapping[str, float]):
    self.job, self.workdir = job, workdir
    self.programs, self.tasks, self.checkpoints = programs, tasks, checkpoints
    self.metrics, self.credit_weights = metrics, credit_weights

  def run(self, state, tasks: list, name: str, title: str, stage: str,
          step: int, samples: Optional[int] = None) -> dict[str, Any]:
    """The one evaluation path (dev evaluation and `--mode=eval`): the site metrics of
    `tasks` (those with known sites) and the copy metrics (those of copying families),
    then samples them with the `eval` settings
    (greedy, and `samples` (default `eval.samples_per_request`) samples each at
    `rl.temperature`, seeded by the run's seed, `stage` and `step`), grades them and writes DIR/eval/NAME/.
    With several processes, process 0 evaluates alone; the others wait and return {}."""
    e, rl, p = self.job.eval, self.job.rl, self.programs
    # Teacher-forced metrics, on every process (collectives): the exact site metrics
    # and the copying families' copy metrics.
    extra = {**p.site_metrics(state, tasks), **p.copy_metrics(state, tasks)}
    sampler = p.sampler(state)  # on every process: copying weights is a collective
    if jax.process_index():
      multihost.barrier(f"eval {name}")
      return {}
    summary = eval_loop.run_eval(
        sampler, p.tokenizer, tasks, p.grader(),
        out_dir=os.path.join(self.workdir, "eval", name),
        max_new_tokens=e.max_new_tokens, temperature=e.temperature,
        samples_per_task=e.samples_per_task, seed=self.job.seed,
        num_reports=e.num_reports, title=title, weights=self.credit_weights,
        samples_per_request=e.samples_per_request if samples is None else samples,
        sample_temperature=rl.temperature,
        sample_seed=eval_loop.sample_seed(self.job.seed, stage, step),
        prompts_per_call=rl.prompts_per_step, extra=extra)
    multihost.barrier(f"eval {name}")
    return summary

  def evaluate_checkpoint(self, state, stage_name: str, tasks_path: Optional[str] = None,
                          out_name: Optional[str] = None) -> dict[str, Any]:
    """Evaluates a checkpoint's `state` on a task file (its first `eval.per_family` of
    each family, `eval.num_tasks` in all; default: the dev tasks); writes responses,
    evaluations, report and summary under DIR/eval/OUT_NAME/ (default
    STAGE_STEP_TASKFILE) and prints the headline (process 0 does; see `run`)."""
    e = self.job.eval
    tasks = (select_tasks(tasks_path, limit=e.num_tasks, per_family=e.per_family)
             if tasks_path
             else self.tasks.dev())
    step = int(jax.device_get(state.step))
    name = out_name or f"{stage_name}_{step:06d}_{pathlib.Path(tasks_path or e.tasks).stem}"
    summary = self.run(state, tasks, name, f"{stage_name} step {step}", stage_name, step)
    if summary:  # process 0 (the others waited for it)
      print(json.dumps(eval_loop.headline(summary)))
    return summary

  def evaluate(self, state, after: str, step: int) -> dict[str, Any]:
    """Dev evaluation; logs an `eval` row and writes DIR/eval/AFTER_STEP/ ({} on the
    processes other than 0). The post-SFT and the last RL evaluation sample
    `eval.end_samples_per_request` per request when it is set (pass@k at RL's start and
    end)."""
    t0 = time.time()
    cached = self.programs.cache_counts()
    e, job = self.job.eval, self.job
    end = step == (job.sft.num_steps if after == "sft" else job.rl.num_steps)
    samples = (e.end_samples_per_request if end and e.end_samples_per_request >= 0
               else e.samples_per_request)
    summary = self.run(state, self.tasks.dev(), f"{after}_{step:06d}",
                       f"after {after} step {step}", after, step, samples)
    if not summary:
      return summary
    row = eval_loop.flat_metrics(summary)
    row.update(after=after, eval_s=time.time() - t0, **self.programs.cache_row(cached))
    self.metrics.write("eval", step, row)
    run_log.note("eval after %s step %d: reward %.3f gates %.2f pass %.2f%s%s",
                 after, step, summary["reward_mean"], summary["gates_pass"],
                 summary["pass_rate"],
                 f" pass@1 {summary['pass_at_1']:.2f}" if "pass_at_1" in summary else "",
                 f" p_bug {summary['bug_prob_mean']:.3f}"
                 if summary.get("bug_prob_mean") is not None else "")
    return summary

  def logged(self, after: str, step: int) -> bool:
    """Whether the dev evaluation after `after` step `step` has its row."""
    return any(r.get("stage") == "eval" and r.get("after") == after
               and r.get("step") == step for r in self.metrics.rows())

  def due(self, rl_step: int) -> bool:
    return self.job.eval.enabled and (rl_step % self.job.eval.every_rl_steps == 0
                                      or rl_step == self.job.rl.num_steps)

  def catch_up(self, state, rl_step: int) -> None:
    """RL step `rl_step`'s dev evaluation when it was due and is not logged (a run
    killed between the step's checkpoint and its evaluation, resumed)."""
    if rl_step and self.due(rl_step) and not self.logged("rl", rl_step):
      run_log.note("RL step %d's dev evaluation was not logged: done now", rl_step)
      self.after_rl_step(state, rl_step)

  def after_rl_step(self, state, rl_step: int) -> None:
    """RL step `rl_step`'s dev evaluation, collapse warning and keep-best decision."""
    summary = self.evaluate(state, "rl", rl_step)
    self.warn_on_collapse(summary, f"after RL step {rl_step}")
    self.keep_if_best(state, summary.get("reward_mean"), rl_step)

  def during_sft(self, state, sft_step: int) -> None:
    """The dev evaluation every `eval.every_sft_steps` SFT steps (a learning curve of
    SFT; the last step's is `after_sft`'s), unless already logged."""
    e, last = self.job.eval, self.job.sft.num_steps
    if (e.enabled and e.every_sft_steps and sft_step % e.every_sft_steps == 0
        and sft_step < last and not self.logged("sft", sft_step)):
      self.evaluate(state, "sft", sft_step)

  def after_sft(self, state, sft_step: int) -> None:
    """The post-SFT evaluation, unless it is off or already logged."""
    if (self.job.eval.enabled and self.job.eval.after_sft
        and not self.logged("sft", sft_step)):
      self.evaluate(state, "sft", sft_step)

  def keep_post_sft(self, rl_state) -> None:
    """`rl_state` (RL step 0) as the first best, with the post-SFT dev reward."""
    post_sft = outcome_lib.eval_rows(self.metrics.rows(), "sft")
    self.keep_if_best(rl_state, post_sft[-1]["reward_mean"] if post_sft else None, 0)

  def keep_if_best(self, state, reward: Optional[float], rl_step: int) -> bool:
    """Saves the RL `state` as `best` when its dev `reward` (process 0's) beats the
    saved best (or none is saved); whether it did. A collective: every process calls."""
    best = self.checkpoints.best
    if best is None:
      return False
    if multihost.is_multi_process():
      reward = multihost.allgather_json(reward)[0]
    if reward is None:
      return False
    saved = best.data_position()
    if saved is not None and saved["rl_step"] >= rl_step:  # a resumed run redid it
      best.delete_from(int(jax.device_get(state.step)))
      saved = best.data_position()
    if saved is not None and reward <= saved["dev_reward"]:
      return False
    best.save(state, {"prompt_batches": rl_step, "rl_step": rl_step,
                      "dev_reward": float(reward)}, force=True)
    best.wait()
    run_log.note("best dev reward so far (%.3f, RL step %d): saved as %s", reward,
                 rl_step, best.directory)
    return True

  def warn_on_collapse(self, summary: dict[str, Any], where: str) -> Optional[str]:
    """The collapse warning line (`outcome.collapse_warning`) of a dev evaluation
    against the post-SFT one in `metrics.jsonl`, printed; None when nothing fell."""
    before = outcome_lib.eval_rows(self.metrics.rows(), "sft")
    if not summary or not before:
      return None
    line = outcome_lib.collapse_warning(before[-1], summary,
                                        self.job.eval.collapse_margin, where)
    if line:
      run_log.note("%s", line)
    return line

  def report_outcome(self) -> Optional[str]:
    """The before/after table (post-SFT and last RL dev evaluation), `DIR/curves.png`
    and the paths of the reports and TensorBoard, printed by process 0; the text."""
    rows = self.metrics.rows()
    before, after = (outcome_lib.eval_rows(rows, "sft"), outcome_lib.eval_rows(rows, "rl"))
    if jax.process_index() or not before or not after:
      return None
    before, after = before[-1], after[-1]
    plot = outcome_lib.plot_curves(rows, os.path.join(self.workdir, "curves.png"))
    ev = os.path.join(self.workdir, "eval")
    lines = ["", outcome_lib.table(before, after), "", outcome_lib.pass_curve(rows), "",
             f"credit reports: {ev}/sft_{before['step']:06d}/report.html, "
             f"{ev}/rl_{after['step']:06d}/report.html",
             f"learning curves: {plot}",
             f"TensorBoard: tensorboard --logdir {os.path.join(self.workdir, 'tb')}"]
    best = self.checkpoints.best
    saved = best.data_position() if best is not None else None
    if saved is not None:
      lines.append(f"best dev reward {saved['dev_reward']:.3f} at RL step "
                   f"{saved['rl_step']}: {best.directory} (--mode=eval "
                   "--checkpoint=best)")
    text = "\n".join(lines)
    print(text, flush=True)
    return text
