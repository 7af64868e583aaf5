"""Config dataclasses from plain mappings or ConfigDicts, strictly."""

from __future__ import annotations

import dataclasses
import difflib
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


def unknown_path(values: Mapping[str, Any], path: str) -> str | None:
  """For a dotted `path` into nested mappings: None when every part exists, else one
  line naming the first unknown part and, if one is close, the known name it might be
  (`rl.gruop_size: unknown field (did you mean rl.group_size?)`)."""
  node: Any = values
  parts = path.split(".")
  for i, part in enumerate(parts):
    if not isinstance(node, Mapping):
      return f"{path}: {'.'.join(parts[:i])} is a value, not a section"
    if part not in node:
      prefix = "".join(f"{p}." for p in parts[:i])
      close = difflib.get_close_matches(part, [str(k) for k in node], n=1)
      hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
      return f"{prefix}{part}: unknown field{hint}"
    node = node[part]
  return None
