"""Config dataclasses from plain mappings or ConfigDicts, strictly."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any


def strict_kwargs(cls: type, values: Mapping[str, Any], what: str,
                  *, ignore: Collection[str] = ()) -> dict[str, Any]:
  """The entries of `values` as keyword arguments for dataclass `cls`.

  A key that is not a field of `cls` (nor in `ignore`, which is dropped) is an error
  naming every such key and `what` the mapping is, e.g. "unknown loss config keys: x".
  """
  known = {f.name for f in dataclasses.fields(cls)}
  values = dict(values)
  unknown = sorted(set(values) - known - set(ignore))
  if unknown:
    raise ValueError(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
  return {k: v for k, v in values.items() if k in known}
