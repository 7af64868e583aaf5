"""What a job runs, built once from its config: the policy and its mesh, the sampler
(rollout role), the compiled train and log-prob programs (actor), the frozen KL
reference, and the grader (the browser pool behind the grading cache) — tunix's roles
in one object, the trainer's only way to the devices and the browsers."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.credit.localize import localize_record
from rcca_jax.data import batching
from rcca_jax.data import chat
from rcca_jax.data.selection import resolve_path
from rcca_jax.evaluation.grader import Grader, make_grader
from rcca_jax.evaluation.pool import Job
from rcca_jax.models import families
from rcca_jax.models import gguf_checkpoint
from rcca_jax.models import safetensors_io
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.parallel import multihost
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step
from rcca_jax.sampling import JaxSampler, Sampler
from rcca_jax.train import config_check
from rcca_jax.train import copy_metrics as copy_metrics_lib
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import run_log
from rcca_jax.train import sections
from rcca_jax.train import site_metrics as site_metrics_lib


def step_seed(rng: jax.Array, step: int) -> int:
  """A sampling seed from the run's PRNG key and the step."""
  key = jax.random.fold_in(jnp.asarray(rng), step)
  return int(jax.random.randint(key, (), 0, 2**31 - 1))


@dataclasses.dataclass
class RlPrograms:
  """What every RL step of a run computes with (`Programs.rl_programs`)."""
  objective: train_step.PolicyObjective
  update: Any  # the compiled train step
  old_logprobs: Optional[Any]  # the policy's log-prob program (recompute_old_logprobs)
  reference: Optional[logprobs_lib.Reference]  # with a KL term only


class Programs:
  """The tokenizer, the policy (`fmodel`, `model_cfg`), its meshes, sampler, compiled
  programs and grader. `sampler` and `grader` replace the in-process `JaxSampler` and the browser
  `EvalPool` (a grader given here is used as it is: its records are localized only if it
  does so itself)."""

  def __init__(self, job: sections.JobConfig, *, sampler: Optional[Sampler] = None,
               grader: Optional[Grader] = None):
    self.job = job
    tokenizer_path = job.data.tokenizer or job.pretrained_source
    if not tokenizer_path:
      raise ValueError("config.data.tokenizer is empty (and there is no init_from_hf or "
                       "init_from_gguf checkpoint to take the tokenizer from)")
    self.tokenizer = sections.load_tokenizer(tokenizer_path)
    self.model_cfg = sections.model_config(job, self.tokenizer)
    self.pad_id = chat.pad_id(self.tokenizer)
    self.mesh = mesh_lib.make_mesh(job.mesh.sizes) if jax.device_count() > 1 else None
    self.sample_mesh = multihost.sampling_mesh(self.mesh)  # this process's devices
    if job.pretrained_source:  # a pretrained checkpoint (Ling, llama, qwen2, ...)
      model = self.load_pretrained(job.pretrained_source)
      self.model_cfg = model.config
    else:
      model = families.build(self.model_cfg, nnx.Rngs(job.seed))
    self.fmodel = train_step.FunctionalModel(model)
    # An RL TrainState counts optimizer updates: `updates_per_batch` per RL step.
    self.update_config = sections.update_config(job.rl)
    self._grader, self._sampler = grader, sampler
    self._logprobs: Optional[Any] = None
    self._logprobs_entropy: Optional[Any] = None

  def load_pretrained(self, path: str) -> nnx.Module:
    """A Hugging Face checkpoint directory's model (the class its model_type names) or
    a GGUF file's: the checkpoint gives the architecture, `config.model` how JAX
    computes it."""
    path = resolve_path(path)
    gguf = path.endswith(".gguf")
    family = ("llama" if gguf else
              families.family_of(safetensors_io.read_config(path), path))
    runtime = families.runtime_overrides(family, self.job.model,
                                         exclude=("dtype", "param_dtype"))
    dtype = jnp.dtype(self.job.model.get("param_dtype", "float32"))
    if gguf:
      return gguf_checkpoint.load(path, dtype=dtype, **runtime)
    return families.from_hf(path, dtype=dtype, **runtime)

  # ---- grader ----------------------------------------------------------------------

  def grader(self) -> Grader:
    """The grader (started on first use): its workers localize every evaluator record
    with `credit.localize.localize_record`, the grader's post-process."""
    if self._grader is None:
      e = self.job.eval
      self._grader = make_grader(e.evaluator, workers=e.workers,
                                 post_process=localize_record, backend=e.backend,
                                 ray_address=e.ray_address, cache_dir=e.grading_cache)
    return self._grader

  def close_grader(self) -> None:
    if self._grader is not None:
      self._grader.close()  # reusable: a later run starts its workers again

  def grade_pairs(self, pairs) -> list[dict]:
    """Evaluation records of (task, response) pairs (the controlled set's scorer)."""
    jobs = [Job(task=t, response=text, sample_id=i) for i, (t, text) in enumerate(pairs)]
    return list(self.grader().run(jobs, progress=False))

  def cache_counts(self) -> dict[str, int]:
    """The grading cache's cumulative hits and misses (empty without a cache)."""
    stats = self.grader().stats
    return {k: stats[k] for k in ("cache_hits", "cache_misses", "cache_write_errors")
            if k in stats}

  def cache_row(self, before: dict[str, int]) -> dict[str, float]:
    """`cache_hits` and `cache_hit_rate` since `before` (`cache_counts`); {} without a
    cache."""
    if not before:
      return {}
    now = self.cache_counts()
    hits = now["cache_hits"] - before["cache_hits"]
    jobs = hits + now["cache_misses"] - before["cache_misses"]
    return {"cache_hits": float(hits), "cache_hit_rate": hits / jobs if jobs else 0.0,
            "cache_write_errors": float(now["cache_write_errors"]
                                        - before["cache_write_errors"])}

  # ---- states and programs -----------------------------------------------------------

  def _shardings(self, opt_config: optim.OptimizerConfig):
    if self.mesh is None:
      return None
    return train_step.state_shardings(self.fmodel, opt_config, self.mesh)

  def fresh_state(self, opt_config: optim.OptimizerConfig) -> train_step.TrainState:
    return train_step.init_state(self.fmodel, opt_config, self.job.seed,
                                 self._shardings(opt_config))

  def abstract_state(self, opt_config: optim.OptimizerConfig) -> train_step.TrainState:
    return train_step.abstract_state(self.fmodel, opt_config, self._shardings(opt_config))

  def sampler(self, state) -> Sampler:
    """The run's sampler (built once), given `state`'s weights."""
    weights = (state.params, state.model_state)
    if self.sample_mesh is not self.mesh:  # several processes: a copy on this one's devices
      weights = multihost.local_copy(weights, self.fmodel.shardings(self.sample_mesh))
    model = self.fmodel.merge(*weights)
    if self._sampler is None:
      self._sampler = JaxSampler(model, mesh=self.sample_mesh, pad_id=self.pad_id,
                                 rollout_dtype=self.job.rl.rollout_dtype)
    else:
      self._sampler.update_weights(model)
    return self._sampler

  def sample_rollouts(self, state, prompts: list, step: int, round_: int = 0) -> list:
    """RL step `step`'s rollouts of this process's share of `prompts`, sampled with
    `state` (`rl.group_size` each; the seed from the state's PRNG key, the step and
    the resampling round, `train.flat_groups`)."""
    r = self.job.rl
    return rollouts_lib.sample(
        self.sampler(state), self.tokenizer,
        multihost.prompt_share(self.mesh, prompts, r.group_size), n=r.group_size,
        max_new_tokens=r.max_new_tokens, temperature=r.temperature,
        seed=(step_seed(state.rng, step) + 7919 * jax.process_index()
              + 104729 * round_) % (2**31 - 1))

  def step_config(self, temperature: float = 1.0) -> train_step.StepConfig:
    return train_step.StepConfig(micro_batches=self.job.micro_batches,
                                 logits_chunk=self.job.logits_chunk,
                                 temperature=temperature)

  def compile(self, objective, opt_config: optim.OptimizerConfig,
              temperature: float = 1.0):
    """The jitted update of `objective` (batches: this process's rows), its loss on
    the policy softmax(logits / temperature) (RL: `rl.temperature`)."""
    step, _ = train_step.build_step(self.fmodel, objective, opt_config,
                                    self.step_config(temperature), self.mesh)
    return multihost.feed_global(step, self.mesh)

  def logprob_fn(self):
    """Log-probs of a whole rollout batch at `rl.temperature` (the RL policy's), in
    slices as large as the step's (built once: RL and the site metrics share its
    compiled program)."""
    if self._logprobs is None:
      micro = self.job.micro_batches * self.update_config.mini_batches
      self._logprobs = multihost.local_logprobs(logprobs_lib.compile_logprob_fn(
          self.fmodel, self.step_config(self.job.rl.temperature), micro, self.mesh),
          self.mesh)
    return self._logprobs

  def reference(self, saved: Optional[train_step.TrainState],
                opt_config: optim.OptimizerConfig) -> logprobs_lib.Reference:
    """The frozen KL reference: a pretrained model when `rl.reference` names one (a
    Hugging Face directory or a GGUF file: `names_pretrained_reference`), else `saved`
    (the checkpoint it names, or this run's final SFT state; None: the initial
    parameters, of a fresh state of `opt_config`)."""
    if self.names_pretrained_reference():
      path = self.job.rl.reference
      ref = train_step.FunctionalModel(self.load_pretrained(path))
      params, model_state = ref.params, ref.model_state
      if self.mesh is not None:
        params, model_state = jax.device_put((params, model_state),
                                             self.fmodel.shardings(self.mesh))
    else:
      if saved is None:
        saved = self.fresh_state(opt_config)
      params, model_state = saved.params, saved.model_state
    return logprobs_lib.Reference(params, model_state, self.logprob_fn())

  def rl_programs(self, loss: objective_lib.LossConfig, opt_config: optim.OptimizerConfig,
                  reference_state: Callable[[str], Optional[train_step.TrainState]]
                  ) -> RlPrograms:
    """The RL step's objective of `loss`, its compiled update, the log-prob program
    with `rl.recompute_old_logprobs` and, with a KL term, the reference (`reference`:
    a saved one is `reference_state(rl.reference)`, `Checkpoints.reference_state`)."""
    r = self.job.rl
    objective = train_step.PolicyObjective(loss, r.group_size, r.shared_prefix)
    reference = None  # no reference is held without a KL term
    if loss.kl_beta > 0:
      saved = None if self.names_pretrained_reference() else reference_state(r.reference)
      reference = self.reference(saved, opt_config)
    return RlPrograms(
        objective, self.compile(objective, opt_config, r.temperature),
        self.logprob_fn() if self.update_config.recompute_old_logprobs else None,
        reference)

  def names_pretrained_reference(self) -> bool:
    path = self.job.rl.reference
    return bool(path) and (path.endswith(".gguf") or os.path.exists(
        os.path.join(resolve_path(path), "config.json")))

  def _score_rows(self, fn, state, batch) -> Any:
    """`fn`'s per-token arrays [rows, L] (float64; a tuple of them where `fn` gives
    several) of an RL-step-shaped batch under `state`, the rows split over the
    processes and gathered back (every process calls it)."""
    block = multihost.process_rows(self.mesh, len(batch["input_ids"]))
    local = {k: v[block] for k, v in batch.items()}
    out = fn(state.params, state.model_state, local)
    several = isinstance(out, tuple)
    arrays = [np.asarray(x, np.float64) for x in (out if several else (out,))]
    if multihost.is_multi_process():
      parts = sorted(multihost.allgather_json([block.start, [a.tolist() for a in arrays]]),
                     key=lambda part: part[0])
      arrays = [np.concatenate([np.asarray(p[1][i]) for p in parts])
                for i in range(len(arrays))]
    return tuple(arrays) if several else arrays[0]

  def _row_multiple(self) -> int:
    """What a batch's rows must be a multiple of: the mesh's batch ways times
    `micro_batches`."""
    ways = (config_check.batch_axis(dict(self.mesh.shape))[0] if self.mesh is not None
            else 1)
    return ways * self.job.micro_batches

  def packed_rows(self, examples: list, sft: sections.SftSection) -> int:
    """Rows per SFT step with `sft.pack` (`batching.packed_rows`, a multiple of the
    mesh's batch axis times `micro_batches`); 0 without."""
    if not sft.pack:
      return 0
    rows = batching.packed_rows([len(ids) for ids, _ in examples], sft.batch_size,
                                sft.max_len, multiple=self._row_multiple(),
                                seed=self.job.seed)
    run_log.note("SFT packing: %d examples per step in %d rows of %d tokens (%d unpacked)",
                 sft.batch_size, rows, sft.max_len, sft.batch_size)
    return rows

  def sft_batch(self, examples: list, lengths: list[int], rows: int, step: int
                ) -> dict[str, np.ndarray]:
    """SFT step `step`'s batch, this process's share: the seed's
    `grouped_batch_indices` of `examples` (their `lengths`; `sft.length_grouped`) laid
    out by `batching.sft_rows` (`rows`: `packed_rows`; `sft.length_bucket`)."""
    s = self.job.sft
    idx = batching.grouped_batch_indices(lengths, s.batch_size, step, self.job.seed,
                                         s.length_grouped)
    batch = batching.sft_rows([examples[i] for i in idx], rows=rows, max_len=s.max_len,
                              pad_id=self.pad_id, bucket=s.length_bucket)
    if s.head_on_loss_positions:
      batch["loss_positions"] = batching.loss_positions(batch["loss_mask"],
                                                        s.length_bucket)
    return multihost.local_share(batch, self.mesh)

  def copy_metrics(self, state, tasks: list) -> dict[str, Any]:
    """The teacher-forced copy metrics of the copying families' `tasks`
    (`train.copy_metrics`; {} when there are none), in RL-step-shaped batches."""
    r = self.job.rl
    if self._logprobs_entropy is None:
      micro = self.job.micro_batches * self.update_config.mini_batches
      self._logprobs_entropy = multihost.local_logprobs(logprobs_lib.compile_logprob_fn(
          self.fmodel, self.step_config(r.temperature), micro, self.mesh,
          with_entropy=True), self.mesh)
    t0 = time.time()
    out = copy_metrics_lib.copy_metrics(
        lambda batch: self._score_rows(self._logprobs_entropy, state, batch),
        self.tokenizer, tasks,
        rows=r.prompts_per_step * r.group_size, max_len=r.max_prompt_len + r.max_new_tokens,
        pad_id=self.pad_id)
    return {**out, "copy_s": time.time() - t0} if out else out

  def site_metrics(self, state, tasks: list, *, kinds: Optional[Sequence[str]] = None,
                   length_bucket: int = 0, fit_rows: bool = False) -> dict[str, Any]:
    """The exact site metrics of `tasks` under `state` (`train.site_metrics`; {} when
    no task has sites), scored in RL-step-shaped batches ([prompts_per_step x
    group_size, max_prompt_len + max_new_tokens]; with `length_bucket` each batch's
    longest sequence rounded up to a multiple of it; with `fit_rows` a batch of fewer
    sequences has as few rows as hold them, a power of two rounded up to the mesh's
    batch ways times `micro_batches`); the sites of `kinds` only, when given. Every
    process calls it (the batch is split over the processes like an RL batch)."""
    r = self.job.rl

    def score(batch):
      return self._score_rows(self.logprob_fn(), state, batch).sum(-1)

    t0 = time.time()
    out = site_metrics_lib.evaluate_sites(
        score, self.tokenizer, tasks, rows=r.prompts_per_step * r.group_size,
        max_len=r.max_prompt_len + r.max_new_tokens, pad_id=self.pad_id, kinds=kinds,
        length_bucket=length_bucket,
        row_multiple=self._row_multiple() if fit_rows else 0)
    if out.get("sites_skipped"):
      run_log.note("site metrics: %d sites left out (sequence longer than %d tokens)",
                   out["sites_skipped"], r.max_prompt_len + r.max_new_tokens)
    return {**out, "sites_s": time.time() - t0} if out else out
