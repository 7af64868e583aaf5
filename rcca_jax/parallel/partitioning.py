"""Logical-axis partitioning (t5x style).

Model code names each parameter and activation dimension with a logical axis
("embed", "vocab", "heads", "expert", "batch", ...). A rule table maps logical axes to
mesh axes (data, fsdp, expert, tensor). On one device, or outside a mesh, every rule is
trivial and constraints are no-ops.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

MeshAxes = str | tuple[str, ...] | None
Rules = Mapping[str, MeshAxes]

# Logical axis -> mesh axis (or axes). Axes missing from the mesh are dropped.
DEFAULT_RULES: dict[str, MeshAxes] = {
  # Activations.
  "batch": ("data", "fsdp", "expert"),
  "length": None,
  "act_embed": None,
  "act_heads": "tensor",
  "act_mlp": "tensor",
  "act_vocab": "tensor",
  "act_expert": "expert",
  # Parameters.
  "layers": None,
  "vocab": "tensor",
  "embed": "fsdp",
  "heads": "tensor",
  "head_dim": None,
  "q_lora": None,
  "kv_lora": None,
  "mlp": "tensor",
  "expert": "expert",
  "expert_embed": "fsdp",
  "expert_mlp": "tensor",
  "norm": None,
  "conv": None,
}

_RULES: contextvars.ContextVar[Rules] = contextvars.ContextVar("rules", default=DEFAULT_RULES)

LOGICAL_AXES = "logical_axes"  # Variable metadata key holding the logical axis names.


def param(value: jax.Array, axes: Sequence[str | None]) -> nnx.Param:
  """An nnx.Param carrying its logical axis names."""
  if len(axes) != value.ndim:
    raise ValueError(f"logical axes {axes} do not match shape {value.shape}")
  return nnx.Param(value, **{LOGICAL_AXES: tuple(axes)})


@contextlib.contextmanager
def use_rules(rules: Rules) -> Iterator[None]:
  """Sets the logical->mesh rules used by `constrain` inside this context."""
  token = _RULES.set(rules)
  try:
    yield
  finally:
    _RULES.reset(token)


def current_rules() -> Rules:
  return _RULES.get()


def logical_to_spec(axes: Sequence[str | None], mesh_axis_names: Sequence[str],
                    mesh_shape: Mapping[str, int] | None = None,
                    rules: Rules | None = None) -> PartitionSpec:
  """Maps logical axis names to a PartitionSpec over the named mesh axes.

  Mesh axes that do not exist (or have size 1) are dropped, and a mesh axis is used
  at most once per spec (first come, first served).
  """
  rules = current_rules() if rules is None else rules
  used: set[str] = set()
  out: list[MeshAxes] = []
  for name in axes:
    target = rules.get(name) if name is not None else None
    if target is None:
      out.append(None)
      continue
    targets = (target,) if isinstance(target, str) else tuple(target)
    kept = tuple(t for t in targets if t in mesh_axis_names and t not in used
                 and (mesh_shape is None or mesh_shape[t] > 1))
    used.update(kept)
    out.append(kept[0] if len(kept) == 1 else (kept or None))
  return PartitionSpec(*out)


def batch_partition_spec(mesh: jax.sharding.Mesh) -> PartitionSpec:
  """Leading (batch) dimension over the mesh's data-parallel axes."""
  return logical_to_spec(("batch",), mesh.axis_names, dict(mesh.shape))


def _names(entry: MeshAxes) -> tuple[str, ...]:
  """The mesh axis names of one PartitionSpec entry."""
  return (entry,) if isinstance(entry, str) else tuple(entry or ())


def shard_count(axis: str) -> int:
  """How many ways logical `axis` is split on the current mesh (1 without a mesh)."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return 1
  entry = logical_to_spec((axis,), mesh.axis_names, dict(mesh.shape))[0]
  return math.prod(mesh.shape[n] for n in _names(entry))


def constrain(x: jax.Array, axes: Sequence[str | None]) -> jax.Array:
  """Sharding constraint on an activation, by logical axes; no-op without a mesh."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return x
  spec = logical_to_spec(axes, mesh.axis_names, dict(mesh.shape))
  return jax.lax.with_sharding_constraint(x, spec)


def batch_local(fn: Callable[..., Any], in_axes: Sequence[Sequence[str | None] | None],
                out_axes: Sequence[str | None]) -> Callable[..., Any]:
  """Runs a per-row `fn` on each device's own rows (shard_map over the batch axes).

  For computations that are independent across the leading (token/batch) dimension
  but that the SPMD partitioner would gather onto every device (XLA's TopK custom call
  does). `in_axes` gives each argument's logical axes (None: replicated, e.g. small
  weights); every output leaf is laid out by `out_axes`. Without a mesh, or when the
  leading dimension does not divide evenly, `fn` runs as it is.
  """

  def run(*args):
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
      return fn(*args)
    shape = dict(mesh.shape)
    specs = [PartitionSpec() if axes is None else
             logical_to_spec(axes, mesh.axis_names, shape) for axes in in_axes]
    out_spec = logical_to_spec(out_axes, mesh.axis_names, shape)
    for arg, spec in zip(args, specs):
      for dim, entry in zip(arg.shape, spec):
        if dim % math.prod(shape[n] for n in _names(entry)):
          return fn(*args)
    return jax.shard_map(fn, in_specs=tuple(specs), out_specs=out_spec)(*args)

  return run


def variable_spec(var: nnx.Variable, mesh: jax.sharding.Mesh | jax.sharding.AbstractMesh,
                  rules: Rules | None = None) -> PartitionSpec:
  """PartitionSpec of one variable on `mesh` (undivisible dimensions stay whole)."""
  axes = var.get_metadata(LOGICAL_AXES, None)
  value = var.get_value() if hasattr(var, "get_value") else var[...]
  if axes is None:
    return PartitionSpec(*([None] * len(value.shape)))
  spec = logical_to_spec(axes, mesh.axis_names, dict(mesh.shape), rules)
  # Do not shard a dimension the mesh axes do not divide.
  fixed = []
  for dim, entry in zip(value.shape, tuple(spec) + (None,) * (len(value.shape) - len(spec))):
    size = math.prod(mesh.shape[n] for n in _names(entry))
    fixed.append(entry if size > 1 and dim % size == 0 else None)
  return PartitionSpec(*fixed)


def state_shardings(state: Any, mesh: jax.sharding.Mesh, rules: Rules | None = None) -> Any:
  """NamedShardings for an nnx.State (or module) from its logical-axis metadata."""
  if isinstance(state, nnx.Module):
    state = nnx.state(state)

  def to_sharding(var):
    return NamedSharding(mesh, variable_spec(var, mesh, rules))

  return jax.tree.map(to_sharding, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def state_specs(state: Any, mesh: jax.sharding.Mesh, rules: Rules | None = None) -> Any:
  """Like `state_shardings` but returns PartitionSpecs."""
  return jax.tree.map(lambda s: s.spec, state_shardings(state, mesh, rules))


def shard_module(module: nnx.Module, mesh: jax.sharding.Mesh,
                 rules: Rules | None = None) -> nnx.Module:
  """Places a module's variables on `mesh` according to their logical axes (in place)."""
  graphdef, state = nnx.split(module)
  shardings = state_shardings(state, mesh, rules)
  state = jax.device_put(state, shardings)
  nnx.update(module, state)
  del graphdef
  return module
