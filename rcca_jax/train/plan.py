"""`--mode=plan`: will this config fit its mesh? Answered without an accelerator.

    python -m rcca_jax.main --mode=plan --config=experiments/moe_124b.py

Validates the config, builds its mesh from fake CPU devices (`main` sets
`--xla_force_host_platform_device_count` before JAX starts), builds the model from
abstract shapes (nothing allocated), and compiles ahead of time the SFT step, the RL
step (one mini-batch) and, when the run needs it, the log-prob function of the KL
reference / old log-prob recomputation, each with the trainer's shardings. Prints the
per-device memory of each program from XLA's memory analysis, and as the last line one
JSON object: `devices`, `mesh`, `state_gb_per_device` (what the RL stage keeps
resident: parameters, model state, optimizer state and the reference),
`peak_gb_per_device` (the largest program peak, plus what stays resident beside it),
and the parts.

XLA:CPU's buffer assignment stands in for a GPU/TPU compile; its concurrency-optimised
scheduler keeps every rematerialised layer alive, so the plan uses the
memory-minimising one (as accelerator compilers schedule under a memory limit).
Read the numbers as an estimate, with ~10% headroom on the device.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
from jax.sharding import NamedSharding

from rcca_jax.data.selection import resolve_path
from rcca_jax.models import families
from rcca_jax.models import gguf_checkpoint
from rcca_jax.models import safetensors_io
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import sft as sft_lib
from rcca_jax.rl import train_step
from rcca_jax.train import config_check
from rcca_jax.train import sections

GB = 1e9


def model_config(job: sections.JobConfig) -> families.ModelConfig:
  """The architecture: the init_from_hf / init_from_gguf checkpoint's (of the family
  its model_type names), else `job.model` (a vocab size of 0 takes the tokenizer's)."""
  fields = dict(job.model)
  init_from = job.pretrained_source
  if init_from:
    hf = (gguf_checkpoint.read_config(resolve_path(init_from)) if init_from.endswith(".gguf")
          else safetensors_io.read_config(resolve_path(init_from)))
    return families.config_from_hf(
        hf, **families.runtime_overrides(families.family_of(hf, init_from), fields))
  if not fields.get("vocab_size"):
    return sections.model_config(job, sections.load_tokenizer(job.data.tokenizer))
  return families.config_from_fields(fields)


def _bytes_per_device(tree: Any) -> int:
  return sum(math.prod(x.sharding.shard_shape(x.shape)) * x.dtype.itemsize
             for x in jax.tree.leaves(tree))


def _batch(mesh, keys, rows: int, length: int) -> dict[str, jax.ShapeDtypeStruct]:
  sharding = NamedSharding(mesh, train_step.batch_partition_spec(mesh))
  out = {}
  for name in keys:
    shape = (rows,) if name == "advantages" else (rows, length)
    dtype = jnp.int32 if name == "input_ids" else jnp.float32
    out[name] = jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
  return out


def _compile(jitted: Callable, mesh, *args) -> dict[str, float]:
  """Compiles `jitted` on `args`; its per-device memory in GB and the timings."""
  start = time.perf_counter()
  with jax.set_mesh(mesh):
    lowered = jitted.lower(*args)
  lowered_s = time.perf_counter() - start
  compiled = lowered.compile()
  mem = compiled.memory_analysis()
  out = {"argument_gb": mem.argument_size_in_bytes / GB,
         "output_gb": mem.output_size_in_bytes / GB,
         "alias_gb": mem.alias_size_in_bytes / GB,
         "temp_gb": mem.temp_size_in_bytes / GB}
  out["peak_gb"] = (out["argument_gb"] + out["output_gb"] - out["alias_gb"]
                    + out["temp_gb"])
  out.update(lower_s=round(lowered_s, 1),
             compile_s=round(time.perf_counter() - start - lowered_s, 1))
  return out


def plan(config: ml_collections.ConfigDict, *,
         log: Callable[[str], None] = print) -> dict[str, Any]:
  """The plan of `config` on the current (fake) devices; see the module docstring."""
  config_check.check(config, num_devices=jax.device_count(), mode="plan")
  job = sections.job_config(config)
  mesh = mesh_lib.make_mesh(job.mesh.sizes)
  cfg = model_config(job)
  fmodel = train_step.FunctionalModel(
      families.abstract(cfg))
  step_config = train_step.StepConfig(micro_batches=job.micro_batches,
                                      logits_chunk=job.logits_chunk)
  r, s = job.rl, job.sft
  update_config = sections.update_config(r)
  loss = r.loss
  rl_rows = r.prompts_per_step * r.group_size
  rl_len = r.max_prompt_len + r.max_new_tokens
  programs: dict[str, dict[str, float]] = {}

  sft_opt = s.optimizer
  step, shardings = train_step.build_step(fmodel, sft_lib.NextTokenObjective(), sft_opt,
                                          step_config, mesh)
  state = train_step.abstract_state(fmodel, sft_opt, shardings)
  log(f"compiling the SFT step: {s.batch_size} x {s.max_len} tokens ...")
  programs["sft_step"] = _compile(step.jitted, mesh, state,
                                  _batch(mesh, sft_lib.SFT_KEYS, s.batch_size, s.max_len))

  rl_opt = r.optimizer
  objective = train_step.PolicyObjective(loss, r.group_size)
  step_config = dataclasses.replace(step_config, temperature=r.temperature)
  step, shardings = train_step.build_step(fmodel, objective, rl_opt, step_config, mesh)
  state = train_step.abstract_state(fmodel, rl_opt, shardings)
  rows = rl_rows // update_config.mini_batches
  log(f"compiling the RL step: {rows} x {rl_len} tokens ...")
  programs["rl_step"] = _compile(step.jitted, mesh, state,
                                 _batch(mesh, objective.keys, rows, rl_len))

  params_gb = _bytes_per_device(state.params) / GB
  model_state_gb = _bytes_per_device(state.model_state) / GB
  opt_gb = _bytes_per_device(state.opt_state) / GB
  train_state_gb = _bytes_per_device(state) / GB
  reference_gb = params_gb + model_state_gb if loss.kl_beta > 0 else 0.0
  peaks = {"sft_step": programs["sft_step"]["peak_gb"],
           "rl_step": programs["rl_step"]["peak_gb"] + reference_gb}
  if loss.kl_beta > 0 or update_config.recompute_old_logprobs:
    fn = logprobs_lib.compile_logprob_fn(
        fmodel, step_config, step_config.micro_batches * update_config.mini_batches, mesh)
    log(f"compiling the log-prob function: {rl_rows} x {rl_len} tokens ...")
    programs["logprobs"] = _compile(
        fn.jitted, mesh, state.params, state.model_state,
        _batch(mesh, logprobs_lib.LOGPROB_KEYS, rl_rows, rl_len))
    # Its arguments hold one set of parameters; the train state stays resident too.
    peaks["logprobs"] = programs["logprobs"]["peak_gb"] + train_state_gb

  for name, prog in programs.items():
    log(f"{name}: arguments {prog['argument_gb']:.2f} GB, outputs "
        f"{prog['output_gb']:.2f} GB (aliased {prog['alias_gb']:.2f}), temporaries "
        f"{prog['temp_gb']:.2f} GB, program peak {prog['peak_gb']:.2f} GB, with what "
        f"stays resident {peaks[name]:.2f} GB per device (compile {prog['compile_s']} s)")
  n_params = sum(math.prod(x.shape) for x in jax.tree.leaves(state.params))
  report = {
      "devices": jax.device_count(), "mesh": dict(mesh.shape),
      "params_b": n_params / 1e9,
      "params_gb_per_device": params_gb, "model_state_gb_per_device": model_state_gb,
      "optimizer_gb_per_device": opt_gb, "reference_gb_per_device": reference_gb,
      "state_gb_per_device": train_state_gb + reference_gb,
      "temp_gb_per_device": max(p["temp_gb"] for p in programs.values()),
      "peak_gb_per_device": max(peaks.values()),
      "peaks_gb": peaks, "programs": programs,
  }
  log(f"state {report['state_gb_per_device']:.2f} GB per device (parameters "
      f"{params_gb:.2f}, optimizer {opt_gb:.2f}, reference {reference_gb:.2f}); "
      f"peak {report['peak_gb_per_device']:.2f} GB per device "
      f"({max(peaks, key=peaks.get)})")
  return report

