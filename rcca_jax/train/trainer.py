"""The training job: SFT on reference apps, then RL (RCCA or GRPO), resumable.

Stages and checkpoints (orbax, under `DIR/checkpoints/`):
  sft/  TrainState of the SFT stage; its step counts SFT updates (the data position
        is the number of batches consumed).
  rl/   TrainState of the RL stage (fresh optimizer, params from the finished SFT
        stage); its step counts optimizer updates, `rl.num_iterations` x
        `rl.mini_batches` per RL step (data position: prompt batches consumed).
  best/ (`checkpoint.keep_best`, default on) the RL TrainState of the best dev reward
        so far, the post-SFT evaluation (RL step 0) included; its data position also
        holds `dev_reward` and `rl_step`. `--mode=eval --checkpoint=best` reads it.
After each RL dev evaluation a watched metric (`outcome.WATCHED`: reward, gate rates)
more than `eval.collapse_margin` below the post-SFT evaluation prints one warning line.
At the end of `train` the run's before/after table, `DIR/curves.png` and the report
paths are printed (`outcome`).
With `rl.loss.kl_beta > 0` the KL reference is the latest sft/ checkpoint (or the one
`rl.reference` names), so a resumed run uses the same reference.
Re-running on the same directory restores the latest checkpoint of the furthest stage
(model, optimizer, step, PRNG key, data position); a finished SFT stage is not
repeated, and metrics rows logged after the restored step are dropped before they
are written again, so no step appears twice in `metrics.jsonl`.

Sampling seeds derive from the checkpointed PRNG key and the step, and prompt order
from the seed and the data position, so a resumed run continues the same sequence.
Several processes run one job through the hooks of `parallel.multihost` (each samples
and grades its share of the prompts); `rl.overlap_steps=1` samples a step ahead while
grading (`train.overlap`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import time
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from rcca_jax.credit import controlled as controlled_lib
from rcca_jax.data import batching
from rcca_jax.data import chat
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.batching import batch_indices
from rcca_jax.data.selection import load_task_file, resolve_path, select_tasks
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.grader import Grader, make_grader
from rcca_jax.evaluation.pool import Job
from rcca_jax.evaluation.record import UNSCORABLE
from rcca_jax.models import families
from rcca_jax.models import gguf_checkpoint
from rcca_jax.models import hf_checkpoint
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.parallel import multihost
from rcca_jax.rl import checkpoint as checkpoint_lib
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import optim
from rcca_jax.rl.batching import NonFiniteBatch
from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step
from rcca_jax.rl import updates as updates_lib
from rcca_jax.sampling import JaxSampler, Sampler
from rcca_jax.train import config_check
from rcca_jax.train import eval_loop
from rcca_jax.train import faults
from rcca_jax.train import outcome as outcome_lib
from rcca_jax.train import overlap as overlap_lib
from rcca_jax.train import prompts as prompts_lib
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import row_reduce
from rcca_jax.train import run_log
from rcca_jax.train import site_metrics
from rcca_jax.train import workdir_guard
from rcca_jax.train import sections
from rcca_jax.train.configs import (load_tokenizer, loss_config, model_config,
                                    optimizer_config, update_config)

LOCALIZE = "rcca_jax.credit.localize:localize_record"


def all_finite(tree: Any) -> bool:
  """Whether every floating-point leaf of `tree` is finite (one device reduction)."""
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(x.dtype, jnp.floating)]
  return bool(jax.device_get(jnp.all(jnp.stack(leaves)))) if leaves else True


def step_seed(rng: jax.Array, step: int) -> int:
  """A sampling seed from the run's PRNG key and the step."""
  key = jax.random.fold_in(jnp.asarray(rng), step)
  return int(jax.random.randint(key, (), 0, 2**31 - 1))


@dataclasses.dataclass
class _Stage:
  name: str
  checkpointer: checkpoint_lib.Checkpointer
  opt_config: optim.OptimizerConfig
  num_steps: int


class Trainer:
  """Builds everything from a config and runs the job; see the module docstring."""

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
    self._lock = workdir_guard.WorkdirLock(workdir) if jax.process_index() == 0 else None
    self._take_lock()
    if mode == "train" and self._lock is not None:
      try:
        workdir_guard.check_saved_config(workdir, config.to_dict(), allow=allow_changes)
      except workdir_guard.ConfigChanged:
        self._lock.release()
        raise
    tokenizer_path = job.data.tokenizer or job.pretrained_source
    if not tokenizer_path:
      raise ValueError("config.data.tokenizer is empty (and there is no init_from_hf or "
                       "init_from_gguf checkpoint to take the tokenizer from)")
    self.tokenizer = load_tokenizer(tokenizer_path)
    self.model_cfg = model_config(job, self.tokenizer)
    self.pad_id = chat.pad_id(self.tokenizer)
    self.mesh = (mesh_lib.make_mesh(dict(job.mesh)) if jax.device_count() > 1
                 else None)
    self.sample_mesh = multihost.sampling_mesh(self.mesh)  # this process's devices
    init_from = job.pretrained_source
    if init_from:  # a pretrained checkpoint (Ling `bailing_hybrid`, llama, qwen2, ...)
      model = self._load_hf(init_from)
      self.model_cfg = model.config
    else:
      model = families.build(self.model_cfg, nnx.Rngs(job.seed))
    self.fmodel = train_step.FunctionalModel(model)
    self.sft = _Stage("sft", self._checkpointer("sft"),
        optimizer_config(job.sft.optimizer, job.sft.num_steps), job.sft.num_steps)
    # The RL TrainState counts optimizer updates: `updates_per_batch` per RL step.
    self.updates = update_config(job.rl)
    self.rl = _Stage("rl", self._checkpointer("rl"),
        optimizer_config(job.rl.optimizer, job.rl.num_steps * self.updates.updates_per_batch),
        job.rl.num_steps)
    self.loss = loss_config(job)
    self.keep_best = bool(job.checkpoint.keep_best)
    self.best = self._checkpointer("best", max_to_keep=1) if self.keep_best else None
    self.metrics = run_log.MetricsLogger(workdir)
    self._closed = False
    self._pool: Optional[Grader] = grader
    self._sampler_obj: Optional[Sampler] = sampler
    self._dev_tasks: Optional[list] = None
    self._controlled: Optional[list] = None
    self.credit = job.credit  # RL blame; dev evaluation keeps the evaluator's
    self.credit_weights = self.credit.weights()  # credit.diagnostic_weights keywords
    self._rl_tasks: Optional[list] = None
    self._logprobs: Optional[Any] = None
    self.skipped_prompts = 0
    self._watch: Optional[faults.PreemptionWatch] = None

  # ---- shared pieces ------------------------------------------------------------

  def _load_hf(self, path: str) -> nnx.Module:
    """A Hugging Face checkpoint directory's model (the class its model_type names) or
    a GGUF file's: the checkpoint gives the architecture, `config.model` how JAX
    computes it."""
    path = resolve_path(path)
    gguf = path.endswith(".gguf")
    family = ("llama" if gguf else
              families.family_of(hf_checkpoint.read_config(path), path))
    runtime = families.runtime_overrides(family, self.job.model,
                                         exclude=("dtype", "param_dtype"))
    dtype = jnp.dtype(self.job.model.get("param_dtype", "float32"))
    if gguf:
      return gguf_checkpoint.load(path, dtype=dtype, **runtime)
    return families.from_hf(path, dtype=dtype, **runtime)

  def pool(self) -> Grader:
    if self._pool is None:
      e = self.job.eval
      self._pool = make_grader(EvalConfig.from_dict(dict(e.evaluator)),
                               workers=e.workers, post_process=LOCALIZE,
                               backend=e.backend, ray_address=e.ray_address,
                               cache_dir=e.grading_cache)
    return self._pool

  def _cache_counts(self) -> dict[str, int]:
    """The grading cache's cumulative hits and misses (empty without a cache)."""
    stats = self.pool().stats
    return {k: stats[k] for k in ("cache_hits", "cache_misses", "cache_write_errors")
            if k in stats}

  def _cache_row(self, before: dict[str, int]) -> dict[str, float]:
    """`cache_hits` and `cache_hit_rate` since `before` (`_cache_counts`); {} without
    a cache."""
    if not before:
      return {}
    now = self._cache_counts()
    hits = now["cache_hits"] - before["cache_hits"]
    jobs = hits + now["cache_misses"] - before["cache_misses"]
    return {"cache_hits": float(hits), "cache_hit_rate": hits / jobs if jobs else 0.0,
            "cache_write_errors": float(now["cache_write_errors"]
                                        - before["cache_write_errors"])}

  def _checkpointer(self, stage: str, max_to_keep: Optional[int] = None
                    ) -> checkpoint_lib.Checkpointer:
    c = self.job.checkpoint
    return checkpoint_lib.Checkpointer(
        os.path.join(self.workdir, "checkpoints", stage),
        max_to_keep=max_to_keep or c.max_to_keep, async_save=c.async_save)

  def _take_lock(self) -> None:
    if self._lock is not None:
      self._lock.acquire()

  def open(self) -> "Trainer":
    """Reopens checkpoints and metrics after `close` (a Trainer can run again)."""
    if self._closed:
      self._take_lock()
      for stage in (self.sft, self.rl):
        stage.checkpointer = self._checkpointer(stage.name)
      if self.keep_best:
        self.best = self._checkpointer("best", max_to_keep=1)
      self.metrics = run_log.MetricsLogger(self.workdir)
      self._closed = False
    return self

  def close(self) -> None:
    """Waits for checkpoints and closes files and workers; `open` (or the next
    `train`/`evaluate_checkpoint`) reopens them."""
    if self._closed:
      return
    for stage in (self.sft, self.rl):
      stage.checkpointer.close()
    if self.best is not None:
      self.best.close()
    if self._pool is not None:
      self._pool.close()  # reusable: a later run starts its workers again
    self.metrics.close()
    if self._lock is not None:
      self._lock.release()
    self._closed = True

  def __enter__(self) -> "Trainer":
    return self.open()

  def __exit__(self, *exc) -> None:
    self.close()

  def _shardings(self, opt_config):
    if self.mesh is None:
      return None
    return train_step.state_shardings(self.fmodel, opt_config, self.mesh)

  def _fresh_state(self, opt_config) -> train_step.TrainState:
    return train_step.init_state(self.fmodel, opt_config, self.job.seed,
                                 self._shardings(opt_config))

  def _target(self, stage: _Stage) -> train_step.TrainState:
    return train_step.abstract_state(self.fmodel, stage.opt_config,
                                     self._shardings(stage.opt_config))

  def _restore(self, stage: _Stage, step: Optional[int] = None):
    return stage.checkpointer.restore(self._target(stage), step)

  def _restore_latest(self, stage: _Stage) -> Optional[tuple[Any, dict, int]]:
    """(state, data position, step) of `stage`'s newest checkpoint that restores (a
    broken newer one is set aside with a warning); None without any."""
    if stage.checkpointer.latest_step() is None:
      return None
    return stage.checkpointer.restore_latest_good(self._target(stage))

  def _save(self, stage: _Stage, state, position: dict, force: bool = False,
            done: Optional[int] = None) -> bool:
    """Saves every `checkpoint_every` steps (`done`: steps done, default the state's);
    whether it saved. A state with a non-finite leaf is never saved: RunStopped."""
    step = int(jax.device_get(state.step)) if done is None else done
    if force or step % getattr(self.job, stage.name).checkpoint_every == 0:
      if not all_finite((state.params, state.opt_state, state.model_state)):
        raise faults.RunStopped(
            f"{stage.name} step {step}: non-finite parameters or optimizer state, not "
            f"saved; last checkpoint: step {stage.checkpointer.latest_step()}")
      stage.checkpointer.save(state, position, force=True)
      return True
    return False

  def _preempted(self, step: int, notice: bool = True) -> bool:
    """Whether SIGTERM (or, with `notice`, a preemption notice) asks the run to stop
    after `step`."""
    return self._watch is not None and self._watch.requested(step, notice)

  def _sampler(self, state) -> Sampler:
    """The run's sampler (built once), given `state`'s weights."""
    weights = (state.params, state.model_state)
    if self.sample_mesh is not self.mesh:  # several processes: a copy on this one's devices
      weights = multihost.local_copy(weights, self.fmodel.shardings(self.sample_mesh))
    model = self.fmodel.merge(*weights)
    if self._sampler_obj is None:
      self._sampler_obj = JaxSampler(model, mesh=self.sample_mesh, pad_id=self.pad_id)
    else:
      self._sampler_obj.update_weights(model)
    return self._sampler_obj

  def _step_config(self) -> train_step.StepConfig:
    return train_step.StepConfig(micro_batches=self.job.micro_batches,
                                 logits_chunk=self.job.logits_chunk)

  def _compile(self, objective, stage: _Stage):
    step, _ = train_step.build_step(self.fmodel, objective, stage.opt_config,
                                    self._step_config(), self.mesh)
    return multihost.feed_global(step, self.mesh)  # batches: this process's rows

  @property
  def is_controlled(self) -> bool:
    return self.job.data.setting == "controlled"

  def controlled_tasks(self) -> list:
    """The controlled setting's task set (credit/controlled.py), built once into
    `data.controlled.path` (default DIR/controlled_tasks.jsonl), by process 0, and read
    back after."""
    if self._controlled is None:
      data = self.job.data
      path = (data.controlled.get("path")
              or os.path.join(self.workdir, "controlled_tasks.jsonl"))
      if jax.process_index() == 0 and not os.path.exists(path):
        spec = data.controlled_spec
        built = controlled_lib.build(load_task_file(data.train_tasks), spec,
                                     self._score)
        tmp = path + ".tmp"
        tasks_lib.write_tasks(tmp, built)
        os.replace(tmp, path)
        run_log.note("controlled setting: %d tasks written to %s", len(built), path)
      multihost.barrier("controlled tasks")
      self._controlled = tasks_lib.load_tasks(path)
    return self._controlled

  def _score(self, pairs) -> list[dict]:
    """Evaluation records of (task, response) pairs (the controlled set's scorer)."""
    jobs = [Job(task=t, response=text, sample_id=i) for i, (t, text) in enumerate(pairs)]
    return list(self.pool().run(jobs, progress=False))

  def _logprob_fn(self):
    """Log-probs of a whole rollout batch, in slices as large as the step's (built
    once: RL and the site metrics share its compiled program)."""
    if self._logprobs is None:
      micro = self.job.micro_batches * self.updates.mini_batches
      self._logprobs = multihost.local_logprobs(logprobs_lib.compile_logprob_fn(
          self.fmodel, self._step_config(), micro, self.mesh), self.mesh)
    return self._logprobs

  def site_metrics(self, state, tasks: list) -> dict[str, Any]:
    """The exact site metrics of `tasks` under `state` (`train.site_metrics`; {} when
    no task has sites), scored in RL-step-shaped batches ([prompts_per_step x
    group_size, max_prompt_len + max_new_tokens]). Every process calls it (the batch
    is split over the processes like an RL batch)."""
    r = self.job.rl

    def score(batch):
      block = multihost.process_rows(self.mesh, len(batch["input_ids"]))
      local = {k: v[block] for k, v in batch.items()}
      logp = self._logprob_fn()(state.params, state.model_state, local)
      sums = np.asarray(logp, np.float64).sum(-1)
      if not multihost.is_multi_process():
        return sums
      parts = multihost.allgather_json([block.start, sums.tolist()])
      return np.concatenate([np.asarray(x) for _, x in sorted(parts)])

    t0 = time.time()
    out = site_metrics.evaluate_sites(
        score, self.tokenizer, tasks, rows=r.prompts_per_step * r.group_size,
        max_len=r.max_prompt_len + r.max_new_tokens, pad_id=self.pad_id)
    if out.get("sites_skipped"):
      run_log.note("site metrics: %d sites left out (sequence longer than %d tokens)",
                       out["sites_skipped"], r.max_prompt_len + r.max_new_tokens)
    return {**out, "sites_s": time.time() - t0} if out else out

  def reference(self, logprob_fn) -> logprobs_lib.Reference:
    """The frozen KL reference: the checkpoint `rl.reference` names (a checkpoint
    directory of this project, e.g. OTHER/checkpoints/sft, or a Hugging Face model
    directory), else this run's final SFT parameters (the initial ones without SFT)."""
    path = self.job.rl.reference
    if path and (path.endswith(".gguf") or
                 os.path.exists(os.path.join(resolve_path(path), "config.json"))):
      ref = train_step.FunctionalModel(self._load_hf(path))
      params, model_state = ref.params, ref.model_state
      if self.mesh is not None:
        params, model_state = jax.device_put((params, model_state),
                                             self.fmodel.shardings(self.mesh))
    elif path or self.sft.checkpointer.latest_step() is not None:
      stage = self.sft
      if path:
        stage = dataclasses.replace(stage, checkpointer=checkpoint_lib.Checkpointer(
            resolve_path(path), async_save=False))
      saved, _ = self._restore(stage)
      params, model_state = saved.params, saved.model_state
    else:
      fresh = self._fresh_state(self.rl.opt_config)
      params, model_state = fresh.params, fresh.model_state
    return logprobs_lib.Reference(params, model_state, logprob_fn)

  def dev_tasks(self) -> list:
    if self._dev_tasks is None and self.is_controlled:
      self._dev_tasks = self.controlled_tasks()  # the same requests, greedy
    if self._dev_tasks is None:
      e = self.job.eval
      self._dev_tasks = select_tasks(e.tasks, families=tuple(self.job.data.families),
                                     per_family=e.per_family, limit=e.num_tasks)
    return self._dev_tasks

  def _run_eval(self, state, tasks: list, name: str, title: str, stage: str,
                step: int) -> dict[str, Any]:
    """The one evaluation path (dev evaluation and `--mode=eval`): the site metrics of
    `tasks` (those with known sites), then samples them with the `eval` settings
    (greedy, and `eval.samples_per_request` samples each at `rl.temperature`, seeded
    by the run's seed, `stage` and `step`), grades them and writes DIR/eval/NAME/.
    With several processes, process 0 evaluates alone; the others wait and return {}."""
    e, rl = self.job.eval, self.job.rl
    sites = self.site_metrics(state, tasks)  # on every process (a collective)
    sampler = self._sampler(state)  # on every process: copying weights is a collective
    if jax.process_index():
      multihost.barrier(f"eval {name}")
      return {}
    summary = eval_loop.run_eval(
        sampler, self.tokenizer, tasks, self.pool(),
        out_dir=os.path.join(self.workdir, "eval", name),
        max_new_tokens=e.max_new_tokens, temperature=e.temperature,
        samples_per_task=e.samples_per_task, seed=self.job.seed,
        num_reports=e.num_reports, title=title, weights=self.credit_weights,
        samples_per_request=e.samples_per_request, sample_temperature=rl.temperature,
        sample_seed=eval_loop.sample_seed(self.job.seed, stage, step),
        prompts_per_call=rl.prompts_per_step, extra=sites)
    multihost.barrier(f"eval {name}")
    return summary

  def evaluate(self, state, after: str, step: int) -> dict[str, Any]:
    """Dev evaluation; logs an `eval` row and writes DIR/eval/AFTER_STEP/ ({} on the
    processes other than 0)."""
    t0 = time.time()
    cached = self._cache_counts()
    summary = self._run_eval(state, self.dev_tasks(), f"{after}_{step:06d}",
                             f"after {after} step {step}", after, step)
    if not summary:
      return summary
    row = eval_loop.flat_metrics(summary)
    row.update(after=after, eval_s=time.time() - t0, **self._cache_row(cached))
    self.metrics.write("eval", step, row)
    run_log.note("eval after %s step %d: reward %.3f gates %.2f pass %.2f%s%s",
                     after, step, summary["reward_mean"], summary["gates_pass"],
                     summary["pass_rate"],
                     f" pass@1 {summary['pass_at_1']:.2f}" if "pass_at_1" in summary else "",
                     f" p_bug {summary['bug_prob_mean']:.3f}"
                     if summary.get("bug_prob_mean") is not None else "")
    return summary

  def keep_if_best(self, state, reward: Optional[float], rl_step: int) -> bool:
    """Saves the RL `state` as `best` when its dev `reward` (process 0's) beats the
    saved best (or none is saved); whether it did. A collective: every process calls."""
    if self.best is None:
      return False
    if multihost.is_multi_process():
      reward = multihost.allgather_json(reward)[0]
    if reward is None:
      return False
    saved = self.best.data_position()
    if saved is not None and saved["rl_step"] >= rl_step:  # a resumed run redid it
      self.best.delete_from(int(jax.device_get(state.step)))
      saved = self.best.data_position()
    if saved is not None and reward <= saved["dev_reward"]:
      return False
    self.best.save(state, {"prompt_batches": rl_step, "rl_step": rl_step,
                           "dev_reward": float(reward)}, force=True)
    self.best.wait()
    run_log.note("best dev reward so far (%.3f, RL step %d): saved as %s", reward,
                     rl_step, self.best.directory)
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
    lines = ["", outcome_lib.table(before, after), "",
             f"credit reports: {ev}/sft_{before['step']:06d}/report.html, "
             f"{ev}/rl_{after['step']:06d}/report.html",
             f"learning curves: {plot}",
             f"TensorBoard: tensorboard --logdir {os.path.join(self.workdir, 'tb')}"]
    saved = self.best.data_position() if self.best is not None else None
    if saved is not None:
      lines.append(f"best dev reward {saved['dev_reward']:.3f} at RL step "
                   f"{saved['rl_step']}: {self.best.directory} (--mode=eval "
                   "--checkpoint=best)")
    text = "\n".join(lines)
    print(text, flush=True)
    return text

  def _logged_eval(self, after: str, step: int) -> bool:
    return any(r.get("stage") == "eval" and r.get("after") == after
               and r.get("step") == step for r in self.metrics.rows())

  # ---- SFT -----------------------------------------------------------------------

  def sft_examples(self) -> list[tuple[list[int], list[int]]]:
    d, s = self.job.data, self.job.sft
    if self.is_controlled:
      pairs = controlled_lib.sft_targets(self.controlled_tasks(),
                                           d.controlled_spec.draws)
    else:
      tasks = select_tasks(d.train_tasks, families=tuple(d.families), need_reference=True,
                           per_family=s.per_family)
      pairs = [(task, chat.format_response(task.reference)) for task in tasks]
    examples, skipped = [], 0
    for task, answer in pairs:
      ids, mask = chat.format_sft_example(self.tokenizer, task.request, answer)
      if len(ids) > s.max_len:
        skipped += 1
        continue
      examples.append((ids, mask))
    if not examples:
      raise ValueError(f"no SFT example fits sft.max_len={s.max_len}")
    run_log.note("SFT: %d examples (%d longer than %d skipped)", len(examples),
                   skipped, s.max_len)
    return examples

  def run_sft(self, state) -> train_step.TrainState:
    stage = self.sft
    start = int(jax.device_get(state.step))
    if start >= stage.num_steps:
      return state
    examples = self.sft_examples()
    step_fn = self._compile(sft_lib.NextTokenObjective(), stage)
    bar = run_log.Progress("sft", stage.num_steps, start)
    log_every = self.job.sft.log_every
    guard = faults.NonFiniteGuard("SFT", self.job.max_nonfinite_in_row)
    every_s, saved_at = self.job.checkpoint.every_seconds, time.time()
    try:
      while start < stage.num_steps:
        t0 = time.time()
        idx = batch_indices(len(examples), self.job.sft.batch_size, start, self.job.seed)
        batch = multihost.local_share(batching.sft_batch(
            [examples[i] for i in idx], max_len=self.job.sft.max_len, pad_id=self.pad_id),
            self.mesh)
        state, m = step_fn(state, batch)
        start += 1
        m = jax.device_get(m)
        guard.update(m["skipped_nonfinite"])
        preempted = self._preempted(start)
        timed = 0 < every_s <= time.time() - saved_at
        if self._save(stage, state, {"batches": start},
                      force=start == stage.num_steps or preempted or timed):
          saved_at = time.time()
        if start % log_every == 0 or start == stage.num_steps or preempted:
          self.metrics.write("sft", start, {
              "loss": m["loss"], "nll": m["nll"], "grad_norm": m["grad_norm"],
              "clipped": m["clipped"], "skipped_nonfinite": guard.total,
              "learning_rate": m["learning_rate"], "tokens": m["response_tokens"],
              "step_s": time.time() - t0})
        bar.update(loss=float(m["loss"]))
        guard.check(start, stage.checkpointer.latest_step)
        if preempted:
          stage.checkpointer.wait()
          raise faults.Preempted(f"preempted: SFT stopped after step {start}, "
                                 "checkpointed; run the same command to resume")
    finally:
      bar.close()
    stage.checkpointer.wait()
    return state

  # ---- RL ------------------------------------------------------------------------

  def rl_tasks(self) -> list:
    """The RL tasks whose prompts fit `rl.max_prompt_len` (`train.prompts`)."""
    if self._rl_tasks is None:
      d, r = self.job.data, self.job.rl
      tasks = (self.controlled_tasks() if self.is_controlled else
               select_tasks(d.train_tasks, families=tuple(d.families),
                            per_family=r.per_family))
      self._rl_tasks, self.skipped_prompts = prompts_lib.fit_prompts(
          self.tokenizer, tasks, r.max_prompt_len, r.long_prompts)
      if self.skipped_prompts:
        run_log.note("RL: %d tasks with prompts over %d tokens skipped",
                         self.skipped_prompts, r.max_prompt_len)
    return self._rl_tasks

  def rl_state_from(self, sft_state) -> train_step.TrainState:
    """Step 0 of the RL stage: the SFT parameters with a fresh RL optimizer."""
    fresh = self._fresh_state(self.rl.opt_config)
    return fresh.replace(params=sft_state.params, model_state=sft_state.model_state,
                         rng=sft_state.rng)

  def _sample_rl(self, tasks: list, state, step: int) -> list:
    """RL step `step`'s rollouts of this process's prompts, sampled with `state`."""
    r = self.job.rl
    picked = [tasks[i] for i in batch_indices(len(tasks), r.prompts_per_step, step,
                                              self.job.seed + 1)]
    return rollouts_lib.sample(
        self._sampler(state), self.tokenizer,
        multihost.prompt_share(self.mesh, picked, r.group_size), n=r.group_size,
        max_new_tokens=r.max_new_tokens, temperature=r.temperature,
        seed=(step_seed(state.rng, step) + 7919 * jax.process_index()) % (2**31 - 1))

  def _dev_eval_due(self, step: int) -> bool:
    return self.job.eval.enabled and (step % self.job.eval.every_rl_steps == 0
                                      or step == self.rl.num_steps)

  def _dev_eval_rl(self, state, step: int) -> None:
    """RL step `step`'s dev evaluation, collapse warning and keep-best decision."""
    summary = self.evaluate(state, "rl", step)
    self.warn_on_collapse(summary, f"after RL step {step}")
    self.keep_if_best(state, summary.get("reward_mean"), step)

  def _settle_unscorable(self, rollouts: list, step: int) -> int:
    """Grades the unscorable rollouts again while their share of the step (over every
    process) exceeds `rl.max_unscorable`, at most `rl.unscorable_retries` times; how
    many times. Still over: RunStopped, the step not applied."""
    r = self.job.rl
    for attempt in range(r.unscorable_retries + 1):
      rows = rollouts_lib.unscorable_rows(rollouts)
      counts = [(len(rows), len(rollouts))]
      if multihost.is_multi_process():
        counts = multihost.allgather_json(counts[0])
      bad, total = (sum(c[i] for c in counts) for i in (0, 1))
      if bad <= r.max_unscorable * total:
        return attempt
      if attempt < r.unscorable_retries:
        run_log.note("RL step %d: %d of %d responses unscorable (rl.max_unscorable=%g): "
                     "grading them again", step, bad, total, r.max_unscorable)
        rollouts_lib.evaluate(self.pool(), rollouts, weights=self.credit_weights,
                              blame=self.credit.blame, only=rows)
    first = rollouts[rows[0]].record[UNSCORABLE] if rows else "in another process"
    saved = self.rl.checkpointer.latest_step()
    raise faults.RunStopped(
        f"RL step {step}: {bad} of {total} responses unscorable after "
        f"{r.unscorable_retries} more gradings (rl.max_unscorable={r.max_unscorable:g}; "
        f"first: {first}); the step was not applied, last checkpoint: "
        + ("none in rl/ (the SFT result)" if saved is None
           else f"rl/{saved} (after RL step {saved // self.updates.updates_per_batch})"))

  def run_rl(self, state) -> train_step.TrainState:
    stage, r = self.rl, self.job.rl
    # RL steps (rollout batches) done; the state counts optimizer updates.
    start = int(jax.device_get(state.step)) // self.updates.updates_per_batch
    if start and self._dev_eval_due(start) and not self._logged_eval("rl", start):
      run_log.note("RL step %d's dev evaluation was not logged: done now", start)
      self._dev_eval_rl(state, start)  # a kill between the checkpoint and its evaluation
    if start >= stage.num_steps:
      return state
    tasks = self.rl_tasks()
    objective = train_step.PolicyObjective(self.loss, r.group_size)
    step_fn = self._compile(objective, stage)
    logprob_fn = (self._logprob_fn() if self.loss.kl_beta > 0
                  or self.updates.recompute_old_logprobs else None)
    # No reference is held without a KL term.
    reference = self.reference(logprob_fn) if self.loss.kl_beta > 0 else None
    max_len = r.max_prompt_len + r.max_new_tokens
    source = overlap_lib.RolloutSource(
        functools.partial(self._sample_rl, tasks),
        functools.partial(rollouts_lib.evaluate, self.pool(), weights=self.credit_weights,
                          blame=self.credit.blame),
        overlap_steps=r.overlap_steps, num_steps=stage.num_steps,
        ahead_dir=os.path.join(self.workdir, "checkpoints", "rl_ahead"))
    bar = run_log.Progress("rl", stage.num_steps, start)
    guard = faults.NonFiniteGuard("RL", self.job.max_nonfinite_in_row)
    try:
      while start < stage.num_steps:
        t0 = time.time()
        cached, deaths = self._cache_counts(), self.pool().stats.get("worker_deaths", 0)
        rollouts, times = source.get(state, start)
        regraded = self._settle_unscorable(rollouts, start + 1)
        cache_row = self._cache_row(cached)
        t2 = time.time()
        batch, _ = rollouts_lib.rl_batch(
            rollouts, group_size=r.group_size, max_len=max_len, pad_id=self.pad_id,
            scale_by_std=self.loss.scale_advantages_by_std)
        batch, extra = updates_lib.with_logprobs(
            batch, state, reference=reference,
            policy_logprobs=logprob_fn if self.updates.recompute_old_logprobs else None)
        try:
          batch = train_step.numpy_batch(batch, objective.keys)
        except NonFiniteBatch as e:  # the policy's own log-probs: no update, step counted
          run_log.note("RL step %d: %s; update skipped", start + 1, e)
          state = state.replace(step=state.step + self.updates.updates_per_batch)
          per_update = [{"skipped_nonfinite": 1.0, "loss": float("nan")}]
        else:
          state, per_update = updates_lib.run_updates(step_fn, state, batch, self.updates)
        start += 1
        for update in per_update:
          guard.update(update["skipped_nonfinite"])
        m = {**updates_lib.summarize(per_update, self.updates.num_iterations), **extra}
        t3 = time.time()
        preempted = self._preempted(start)
        if self._save(stage, state, {"prompt_batches": start},
                      force=start == stage.num_steps or preempted, done=start):
          source.save(start)
        row = rollouts_lib.record_stats([x.record for x in rollouts])
        row.update(rollouts_lib.weight_shares(rollouts))
        row.update(rollouts_lib.blame_stats(rollouts, self.credit.blame))
        if self.is_controlled:
          row.update(rollouts_lib.bug_stats(rollouts))
        row.update(m)
        stats = self.pool().stats
        row.update(response_len=float(np.mean([len(x.tokens) for x in rollouts])),
                   skipped_long_prompts=self.skipped_prompts,
                   timeouts=stats.get("timeouts", 0), regraded=regraded,
                   worker_deaths=stats.get("worker_deaths", 0) - deaths,
                   **times, **cache_row, train_s=t3 - t2, step_s=time.time() - t0)
        row = row_reduce.combine(multihost.gather_shares(row, len(rollouts)))
        self.metrics.write("rl", start, row)
        bar.update(reward=row["reward_mean"], passed=row["pass_rate"], loss=row["loss"])
        guard.check(start, stage.checkpointer.latest_step)
        if preempted:  # its dev evaluation, if due, is done on resume
          stage.checkpointer.wait()
          raise faults.Preempted(f"preempted: RL stopped after step {start}, "
                                 "checkpointed; run the same command to resume")
        if self._dev_eval_due(start):
          self._dev_eval_rl(state, start)
        if self._preempted(start, notice=False):
          stage.checkpointer.wait()
          raise faults.Preempted(f"preempted: RL stopped after step {start} and its dev "
                                 "evaluation; run the same command to resume")
    finally:
      bar.close()
    stage.checkpointer.wait()
    return state

  # ---- the job ---------------------------------------------------------------------

  def train(self) -> None:
    """SFT (unless finished), post-SFT evaluation (once), then RL; resumes."""
    self.open()
    self._watch = faults.PreemptionWatch()
    try:
      self.rl_tasks()  # RL prompts that cannot fit are refused before any work
      if self.job.eval.enabled and not self.is_controlled:
        self.dev_tasks()  # so is a dev task file that cannot be read
      restored = self._restore_latest(self.rl)
      if restored is not None:
        state, position, rl_step = restored
        rl_step //= self.updates.updates_per_batch
        run_log.note("resuming RL at step %d (%s)", rl_step, position)
        self.metrics.truncate("rl", rl_step)
      else:
        self.metrics.truncate("rl", 0)
        restored = self._restore_latest(self.sft)
        if restored is not None:
          state, position, sft_step = restored
          run_log.note("resuming SFT at step %d (%s)", sft_step, position)
        else:
          sft_step = 0
          state = self._fresh_state(self.sft.opt_config)
        self.metrics.truncate("sft", sft_step)
        state = self.run_sft(state)
        done = int(jax.device_get(state.step))
        if (self.job.eval.enabled and self.job.eval.after_sft
            and not self._logged_eval("sft", done)):
          self.evaluate(state, "sft", done)
        state = self.rl_state_from(state)
        post_sft = outcome_lib.eval_rows(self.metrics.rows(), "sft")
        self.keep_if_best(state, post_sft[-1]["reward_mean"] if post_sft else None, 0)
        if self._preempted(done, notice=False):
          raise faults.Preempted("preempted: stopped after SFT and its dev evaluation; "
                                 "run the same command to resume")
      self.run_rl(state)
      self.report_outcome()
    finally:
      self._watch.close()
      self._watch = None
      self.close()

  def _eval_state(self, which: str) -> tuple[str, train_step.TrainState]:
    """(stage name, state) to evaluate: "latest" (RL if any, else SFT), "rl", "sft",
    "best" (the RL state of the best dev reward) or "base" (no checkpoint: the initial,
    `init_from_hf` or `init_from_gguf` parameters)."""
    if which == "base":
      return "base", self._fresh_state(self.sft.opt_config)
    if which == "best":
      if self.best is None or self.best.latest_step() is None:
        raise FileNotFoundError(
            f"no best checkpoint under {self.workdir}/checkpoints/best (a run with "
            "checkpoint.keep_best=True saves one after its dev evaluations)")
      return "best", self._restore(dataclasses.replace(self.rl, checkpointer=self.best))[0]
    stages = {"latest": (self.rl, self.sft), "rl": (self.rl,), "sft": (self.sft,)}[which]
    for stage in stages:
      if stage.checkpointer.latest_step() is not None:
        return stage.name, self._restore(stage)[0]
    what = "" if which == "latest" else f"{which} "
    raise FileNotFoundError(f"no {what}checkpoint under {self.workdir}/checkpoints")

  def evaluate_checkpoint(self, tasks_path: Optional[str] = None,
                          out_name: Optional[str] = None,
                          checkpoint: str = "latest") -> dict[str, Any]:
    """Evaluates `checkpoint` (see `_eval_state`; "base" gives the base-model row) on a
    task file; writes responses, evaluations, report and summary under
    DIR/eval/OUT_NAME/ (process 0 does; see `_run_eval`)."""
    self.open()
    try:
      stage_name, state = self._eval_state(checkpoint)
      e = self.job.eval
      tasks = (select_tasks(tasks_path, limit=e.num_tasks) if tasks_path
               else self.dev_tasks())
      step = int(jax.device_get(state.step))
      name = out_name or f"{stage_name}_{step:06d}_{pathlib.Path(tasks_path or e.tasks).stem}"
      summary = self._run_eval(state, tasks, name, f"{stage_name} step {step}",
                               stage_name, step)
      if summary:  # process 0 (the others waited for it)
        print(json.dumps(eval_loop.headline(summary)))
      return summary
    finally:
      self.close()
