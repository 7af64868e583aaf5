"""Device meshes with the project's named axes (data, fsdp, expert, tensor)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import jax
from jax.sharding import AxisType

AXES = ("data", "fsdp", "expert", "tensor")


def parse_mesh_spec(spec: str | Mapping[str, int]) -> dict[str, int]:
  """'data:1,fsdp:64,expert:8,tensor:1' (or a mapping) -> ordered {axis: size}."""
  if isinstance(spec, str):
    pairs = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
      name, sep, size = item.partition(":")
      if not sep or not size.strip().lstrip("-").isdigit():
        raise ValueError(f"mesh spec item {item!r}: expected NAME:SIZE")
      pairs[name.strip()] = int(size)
    spec = pairs
  unknown = set(spec) - set(AXES)
  if unknown:
    raise ValueError(f"unknown mesh axes {sorted(unknown)}; known: {AXES}")
  return {name: int(spec.get(name, 1)) for name in AXES}


def resolve_sizes(sizes: Mapping[str, int], num_devices: int) -> dict[str, int]:
  """Fills one axis given as -1 with the remaining devices and checks the product."""
  sizes = dict(sizes)
  free = [n for n, s in sizes.items() if s == -1]
  if len(free) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got {free}")
  fixed = math.prod(s for s in sizes.values() if s != -1)
  if free:
    if num_devices % fixed:
      raise ValueError(f"{num_devices} devices not divisible by fixed axes product {fixed}")
    sizes[free[0]] = num_devices // fixed
  if math.prod(sizes.values()) != num_devices:
    raise ValueError(f"mesh {sizes} needs {math.prod(sizes.values())} devices, "
                     f"have {num_devices}")
  return sizes


def make_mesh(spec: str | Mapping[str, int], *, explicit: bool = False,
              devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
  """A mesh over all (or the given) devices with axes (data, fsdp, expert, tensor).

  Axis types are Auto (GSPMD propagation from the logical-axis constraints) unless
  `explicit`.
  """
  devices = list(devices) if devices is not None else jax.devices()
  sizes = resolve_sizes(parse_mesh_spec(spec), len(devices))
  kind = AxisType.Explicit if explicit else AxisType.Auto
  return jax.make_mesh(tuple(sizes.values()), tuple(sizes), axis_types=(kind,) * len(sizes),
                       devices=devices)


def abstract_mesh(spec: str | Mapping[str, int]) -> jax.sharding.AbstractMesh:
  """A device-less mesh of the given shape (for sizing shardings without devices)."""
  sizes = parse_mesh_spec(spec)
  if any(s < 1 for s in sizes.values()):
    raise ValueError(f"abstract mesh sizes must be positive: {sizes}")
  return jax.sharding.AbstractMesh(tuple(sizes.values()), tuple(sizes),
                                   axis_types=(AxisType.Auto,) * len(sizes))
