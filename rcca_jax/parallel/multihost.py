"""The main job over several JAX processes: start-up, each process's share, global arrays.

One process per host (or several on one machine), all running the same program. The
global mesh spans every process's devices; the batch axis (data, fsdp) splits a step's
rows over them, and the rows a process's devices hold are its share: a contiguous block
of whole prompt groups. Each process samples the prompts of its block on its own
devices, grades those rollouts in its own grader, computes their group advantages (a
prompt's G samples never leave their process, so the advantages are exact) and
contributes its rows to the global batch with `jax.make_array_from_process_local_data`.
Everything that is not a row of the batch (the prompt order, the PRNG key, the step) is
computed identically by every process. Metrics rows are gathered from every process
(`gather_shares`), combined by `train.row_reduce` and written by process 0 only
(`train.run_log`).

Sampling uses a copy of the weights on the process's own devices (`local_copy`: the
replicated leaves as they are, the sharded ones all-gathered), on a mesh of those
devices along the data axis (`sampling_mesh`): each process holds the whole policy
while it samples. A model too large for one host samples through an external engine
(the `Sampler` seam) instead.

CPU collectives: on CPU, JAX 0.10 makes the cross-process collectives of the CPU
client from `jax_cpu_collectives_implementation`, default "gloo" (TCP, rendezvous
through the coordinator's key-value store; "mpi" needs an MPI library, "megascale" is
TPU-only). The CPU client takes them only when `jax.distributed.initialize` has run
before the client is created, i.e. before anything touches `jax.devices()` or runs a
computation: `initialize` below must be the first JAX call of the program. Without
collectives every cross-process computation fails ("Multiprocess computations aren't
implemented on the CPU backend"). `XLA_FLAGS=--xla_force_host_platform_device_count=N`
gives each process N CPU devices.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding

from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.parallel import partitioning

# Set by cluster launchers; jax.distributed.initialize() then needs no arguments.
_AUTO_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS",
             "MEGASCALE_COORDINATOR_ADDRESS")


def auto_detected() -> bool:
  """Whether the environment describes a multi-process job (TPU pod, Slurm, launcher)."""
  if any(os.environ.get(name) for name in _AUTO_ENV):
    return True
  hosts = os.environ.get("TPU_WORKER_HOSTNAMES", "")
  return "," in hosts or int(os.environ.get("SLURM_NTASKS", "1")) > 1


def initialize(coordinator_address: Optional[str] = None,
               num_processes: Optional[int] = None,
               process_id: Optional[int] = None) -> None:
  """Joins the job: with `coordinator_address` as given (all three needed), else by
  JAX's automatic detection when the environment describes a cluster, else nothing
  (a single process). Must run before any other JAX call."""
  if coordinator_address:
    if num_processes is None or process_id is None:
      raise ValueError("--coordinator_address needs --num_processes and --process_id")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id)
  elif auto_detected():
    jax.distributed.initialize()


def is_multi_process() -> bool:
  return jax.process_count() > 1


def _batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, partitioning.batch_partition_spec(mesh))


def process_rows(mesh: Optional[Mesh], rows: int) -> slice:
  """The block of a `rows`-row batch that this process's devices hold (all rows in a
  single process); raises ValueError unless the processes' blocks are disjoint."""
  if mesh is None or not is_multi_process():
    return slice(0, rows)
  indices = _batch_sharding(mesh).addressable_devices_indices_map((rows,)).values()
  starts = [ix[0].start or 0 for ix in indices]
  stops = [rows if ix[0].stop is None else ix[0].stop for ix in indices]
  block = slice(min(starts), max(stops))
  if (block.stop - block.start) * jax.process_count() != rows:
    raise ValueError(f"mesh {dict(mesh.shape)}: the batch axes must split the batch "
                     f"over the {jax.process_count()} processes, but process "
                     f"{jax.process_index()} holds rows {block.start}-{block.stop} of "
                     f"{rows}")
  return block


def prompt_share(mesh: Optional[Mesh], prompts: Sequence[Any], group_size: int) -> list:
  """The prompts whose G samples are this process's rows (all in a single process)."""
  block = process_rows(mesh, len(prompts) * group_size)
  if block.start % group_size or block.stop % group_size:
    raise ValueError(f"process {jax.process_index()}'s rows {block.start}-{block.stop} "
                     f"split a group of {group_size} samples")
  return list(prompts[block.start // group_size:block.stop // group_size])


def local_share(batch: Mapping[str, np.ndarray], mesh: Optional[Mesh]
                ) -> Mapping[str, np.ndarray]:
  """This process's rows of a batch every process built whole (e.g. SFT's)."""
  if mesh is None or not is_multi_process():
    return batch
  block = process_rows(mesh, len(next(iter(batch.values()))))
  return {k: v[block] for k, v in batch.items()}


def global_batch(batch: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Global arrays, split over the batch axes, from each process's rows."""
  sharding = _batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in batch.items()}


def local_rows(x: jax.Array) -> np.ndarray:
  """This process's rows of a global array split over the batch axes (replicas once)."""
  shards: dict[int, Any] = {}
  for shard in x.addressable_shards:
    shards.setdefault(shard.index[0].start or 0, shard.data)
  return np.concatenate([np.asarray(shards[k]) for k in sorted(shards)])


def feed_global(fn: Callable, mesh: Optional[Mesh]) -> Callable:
  """`fn(state, batch)` given process-local host rows: passes it the global batch
  (unchanged in a single process)."""
  if mesh is None or not is_multi_process():
    return fn
  return lambda state, batch: fn(state, global_batch(batch, mesh))


def local_logprobs(fn: Callable, mesh: Optional[Mesh]) -> Callable:
  """`fn(params, model_state, batch)` -> [B, L] (or a tuple of them) on this
  process's rows in and out (unchanged in a single process)."""
  if mesh is None or not is_multi_process():
    return fn
  return lambda params, model_state, batch: jax.tree.map(
      local_rows, fn(params, model_state, global_batch(batch, mesh)))


def sampling_mesh(mesh: Optional[Mesh]) -> Optional[Mesh]:
  """The mesh to sample on: `mesh` in a single process, else this process's devices
  along the data axis."""
  if mesh is None or not is_multi_process():
    return mesh
  return mesh_lib.make_mesh({"data": -1}, devices=jax.local_devices())


def local_copy(tree: Any, shardings: Any) -> Any:
  """`tree`'s global arrays laid out as `shardings` (on this process's devices):
  replicated leaves are copied from a local replica, sharded ones all-gathered (a
  collective: every process calls this at the same point)."""
  def one(x, sharding):
    if x.is_fully_replicated:
      return jax.device_put(x.addressable_data(0), sharding)
    return jax.device_put(multihost_utils.process_allgather(x, tiled=True), sharding)
  return jax.tree.map(one, tree, shardings)


def allgather_json(value: Any) -> list[Any]:
  """Every process's JSON-able `value`, in process order (a collective)."""
  data = np.frombuffer(json.dumps(value).encode(), np.uint8)
  sizes = np.asarray(multihost_utils.process_allgather(np.asarray([len(data)], np.int32)))
  padded = np.zeros(int(sizes.max()), np.uint8)
  padded[:len(data)] = data
  rows = np.asarray(multihost_utils.process_allgather(padded))
  return [json.loads(bytes(rows[i, :int(sizes[i, 0])])) for i in range(len(rows))]


def gather_shares(row: Mapping[str, Any], count: int) -> list[tuple[dict[str, Any], int]]:
  """Every process's `(row, count)` in process order (a collective; no communication
  in a single process). `train.row_reduce.combine` makes the job's row of them."""
  if not is_multi_process():
    return [(dict(row), count)]
  row = {k: v.item() if isinstance(v, np.generic) else v for k, v in row.items()}
  return [(r["row"], r["count"]) for r in allgather_json({"row": row, "count": count})]


def barrier(name: str) -> None:
  """Waits until every process reaches the barrier `name` (no-op in one process)."""
  if is_multi_process():
    multihost_utils.sync_global_devices(name)


def any_process(flag: bool) -> bool:
  """Whether `flag` is true in any process (a collective)."""
  return any(allgather_json(bool(flag)))


def reached_preemption(step: int) -> bool:
  """JAX's preemption notice (a cluster's SIGTERM to the job, seen by its coordination
  service) at `step`: every process answers alike and must ask at the same steps."""
  try:
    return bool(multihost_utils.reached_preemption_sync_point(step))
  except RuntimeError:  # no preemption sync manager (jax.distributed not initialized)
    return False
