"""Ahead-of-time plan of the moe_124b RL train step on a large mesh.

  .venv/bin/python benchmarks/plan_124b.py [--devices 256] \\
      [--mesh data=1,fsdp=32,expert=8,tensor=1] [--seq-len 8192] [--batch 1024] \\
      [--micro-batches 4] [--layers 42] [--param-dtype float32]

Builds the Ling-3.0-Flash shaped model abstractly (nothing allocated), lowers and
compiles the full RCCA train step (forward, backward, gradient accumulation, AdamW,
router-bias update) with jax.jit in/out shardings on a mesh of fake CPU devices, and
prints the per-device memory that XLA's memory analysis reports for the compiled
program: arguments (params, optimizer state, batch), outputs, temporaries, and the
peak estimate. A layout fits an 80 GB device when the peak stays below ~72 GB
(10% headroom). The CPU compiler's buffer assignment is an estimate of what a GPU/TPU
compile would do, not a measurement on those devices.

What keeps the activations bounded (each a model or step option, set below):
per-layer rematerialisation (also inside the scanned layer groups), blockwise MLA
attention (`attention_block_size`), KDA chunks prepared 16 at a time
(`kda_chunks_per_step`), routed experts run 2048 positions of a row at a time
(`moe_token_chunk`), and the loss's logits made 1024 positions at a time
(`StepConfig.logits_chunk`).

XLA:CPU schedules for concurrency by default, which starts the recomputation of
every rematerialised layer early and so keeps them all alive; the plan uses its
memory-minimising scheduler instead (`--cpu-scheduler memory`), as GPU and TPU
compilers schedule under a memory limit.

Routed experts: the plan compiles the model's `moe_impl="grouped"` path (what
experiments/moe_124b.py trains with): dispatch inside each batch shard into expert slots
of fixed capacity (`--capacity-factor`, 2.0), an all-to-all from batch shards to
expert shards ([E, groups, C, D] x [E, D, I]) and back. `--moe-impl ragged` compiles the
dropless `ragged_dot` path instead, which XLA:CPU expands into a dense [experts, tokens,
dim] masked product and whose global sort SPMD replicates on every device: on this
compiler it does not fit.

`--devices` must be given on the command line: it sets XLA_FLAGS before JAX starts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--devices", type=int, default=256)
  parser.add_argument("--mesh", default="data=1,fsdp=32,expert=8,tensor=1",
                      help="sizes of the data, fsdp, expert and tensor axes")
  parser.add_argument("--seq-len", type=int, default=8192)
  parser.add_argument("--batch", type=int, default=1024, help="global sequences")
  parser.add_argument("--micro-batches", type=int, default=4)
  parser.add_argument("--logits-chunk", type=int, default=1024,
                      help="positions per logits chunk in the loss (0: whole sequence)")
  parser.add_argument("--attention-block", type=int, default=512,
                      help="MLA block size (0: dense [T, T] attention)")
  parser.add_argument("--kda-chunk", type=int, default=64, help="KDA chunk size")
  parser.add_argument("--kda-chunks-per-step", type=int, default=16,
                      help="KDA chunks prepared at a time (0: all)")
  parser.add_argument("--moe-chunk", type=int, default=2048,
                      help="positions per row through the routed experts at a time")
  parser.add_argument("--layers", type=int, default=None,
                      help="override num_hidden_layers (scaled-down trial runs)")
  parser.add_argument("--param-dtype", default="float32")
  parser.add_argument("--no-remat", action="store_true")
  parser.add_argument("--device-gb", type=float, default=80.0)
  parser.add_argument("--top-buffers", type=int, default=0,
                      help="also list the N largest per-device HLO values")
  parser.add_argument("--moe-impl", choices=("grouped", "ragged"), default="grouped",
                      help="routed-expert dispatch (see the module doc)")
  parser.add_argument("--capacity-factor", type=float, default=2.0,
                      help="expert slots per even share of tokens (grouped)")
  parser.add_argument("--cpu-scheduler", choices=("memory", "concurrency"),
                      default="memory",
                      help="XLA:CPU's instruction scheduler (see the module doc)")
  return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") +
    f" --xla_force_host_platform_device_count={ARGS.devices}"
    " --xla_cpu_enable_concurrency_optimized_scheduler="
    f"{'true' if ARGS.cpu_scheduler == 'concurrency' else 'false'}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# pylint: disable=wrong-import-position
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402

from rcca_jax.models.config import LingConfig  # noqa: E402
from rcca_jax.models.ling import LingForCausalLM  # noqa: E402
from rcca_jax.rl import losses  # noqa: E402
from rcca_jax.rl import optim  # noqa: E402
from rcca_jax.rl import train_step as ts  # noqa: E402

AXES = ("data", "fsdp", "expert", "tensor")
GB = 1e9


def parse_mesh(text: str) -> tuple[int, ...]:
  sizes = dict.fromkeys(AXES, 1)
  for part in text.split(","):
    name, _, value = part.partition("=")
    if name not in sizes or not value.isdigit():
      raise SystemExit(f"--mesh: bad entry {part!r}; use e.g. data=1,fsdp=32,"
                       f"expert=8,tensor=1")
    sizes[name] = int(value)
  return tuple(sizes[a] for a in AXES)


def main() -> None:
  shape = parse_mesh(ARGS.mesh)
  n_mesh = 1
  for size in shape:
    n_mesh *= size
  if n_mesh != ARGS.devices:
    raise SystemExit(f"mesh {ARGS.mesh} has {n_mesh} devices, --devices is "
                     f"{ARGS.devices}")
  overrides = dict(dtype="bfloat16", param_dtype=ARGS.param_dtype,
                   remat=not ARGS.no_remat, moe_impl=ARGS.moe_impl,
                   moe_capacity_factor=ARGS.capacity_factor,
                   attention_block_size=ARGS.attention_block,
                   kda_chunk_size=ARGS.kda_chunk, moe_token_chunk=ARGS.moe_chunk,
                   kda_chunks_per_step=ARGS.kda_chunks_per_step)
  if ARGS.layers:
    overrides["num_hidden_layers"] = ARGS.layers
  cfg = LingConfig(**overrides)
  mesh = jax.make_mesh(shape, AXES, axis_types=(AxisType.Auto,) * len(AXES))

  start = time.perf_counter()
  model = nnx.eval_shape(lambda: LingForCausalLM(cfg, rngs=nnx.Rngs(0)))
  fmodel = ts.FunctionalModel(model)
  opt = optim.OptimizerConfig(learning_rate=1e-6, total_steps=1000)
  objective = ts.PolicyObjective(losses.preset("rcca"), group_size=16)
  step, shardings = ts.build_step(fmodel, objective, opt,
                                  ts.StepConfig(micro_batches=ARGS.micro_batches,
                                                logits_chunk=ARGS.logits_chunk),
                                  mesh=mesh)
  state = ts.abstract_state(fmodel, opt, shardings)
  batch_sharding = NamedSharding(mesh, ts.batch_partition_spec(mesh))
  batch = {}
  for name in objective.keys:
    shape_ = (ARGS.batch,) if name == "advantages" else (ARGS.batch, ARGS.seq_len)
    dtype = jnp.int32 if name == "input_ids" else jnp.float32
    batch[name] = jax.ShapeDtypeStruct(shape_, dtype, sharding=batch_sharding)
  with jax.set_mesh(mesh):
    lowered = step.jitted.lower(state, batch)
  lower_s = time.perf_counter() - start
  start = time.perf_counter()
  compiled = lowered.compile()
  compile_s = time.perf_counter() - start

  mem = compiled.memory_analysis()
  n_params = sum(x.size for x in jax.tree.leaves(state.params))
  state_bytes = sum(math.prod(x.sharding.shard_shape(x.shape)) * x.dtype.itemsize
                    for x in jax.tree.leaves(state))
  report = {
      "mesh": dict(zip(AXES, shape)), "layers": cfg.num_hidden_layers,
      "params_b": n_params / 1e9, "param_dtype": cfg.param_dtype,
      "seq_len": ARGS.seq_len, "global_batch": ARGS.batch,
      "micro_batches": ARGS.micro_batches, "remat": cfg.remat,
      "logits_chunk": ARGS.logits_chunk, "attention_block": ARGS.attention_block,
      "kda_chunk": ARGS.kda_chunk, "kda_chunks_per_step": ARGS.kda_chunks_per_step,
      "moe_chunk": ARGS.moe_chunk,
      "state_gb_per_device": state_bytes / GB,
      "argument_gb": mem.argument_size_in_bytes / GB,
      "output_gb": mem.output_size_in_bytes / GB,
      "alias_gb": mem.alias_size_in_bytes / GB,
      "temp_gb": mem.temp_size_in_bytes / GB,
      "peak_gb": (mem.argument_size_in_bytes + mem.output_size_in_bytes -
                  mem.alias_size_in_bytes + mem.temp_size_in_bytes) / GB,
      "moe_impl": ARGS.moe_impl, "capacity_factor": ARGS.capacity_factor,
      "cpu_scheduler": ARGS.cpu_scheduler,
      "lower_s": round(lower_s, 1), "compile_s": round(compile_s, 1),
  }
  report["fits"] = report["peak_gb"] <= 0.9 * ARGS.device_gb
  if ARGS.top_buffers:
    for size, line in largest_values(compiled.as_text(), ARGS.top_buffers):
      print(f"{size / GB:8.3f} GB  {line}")
  print(json.dumps(report))


_VALUE = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\w+)\[([\d,]*)\]")
_BYTES = {"f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "pred": 1, "s8": 1,
          "u8": 1, "f64": 8, "s64": 8}


def largest_values(hlo: str, n: int) -> list[tuple[int, str]]:
  """The n largest array values of the partitioned HLO (per device), with op names."""
  found = {}
  for line in hlo.splitlines():
    match = _VALUE.match(line)
    if not match or match.group(2) not in _BYTES:
      continue
    dims = [int(d) for d in match.group(3).split(",") if d]
    size = math.prod(dims) * _BYTES[match.group(2)]
    op = re.search(r'op_name="([^"]+)"', line)
    key = f"{match.group(2)}[{match.group(3)}] {op.group(1)[-110:] if op else ''}"
    found[key] = max(found.get(key, 0), size)
  return sorted(((v, k) for k, v in found.items()), reverse=True)[:n]


if __name__ == "__main__":
  main()
