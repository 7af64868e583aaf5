"""`FIELD=VALUE;...` overrides of a config: the syntax of ablation arms and sweep settings.

A value is parsed by the type of the field it replaces (bool, int, float, text); an
unset field (None) takes a number, none or text; a tuple or list field takes a
comma-separated list, each item parsed by the type of the field's first item (a number
or text when it is empty): `data.controlled.rates=0.8` is `(0.8,)`.
"""

from __future__ import annotations

from typing import Any

import ml_collections


def parse_overrides(text: str) -> list[tuple[str, str]]:
  """`"a.b=1;c=x"` -> [("a.b", "1"), ("c", "x")]."""
  out = []
  for item in filter(None, (part.strip() for part in text.split(";"))):
    if "=" not in item:
      raise ValueError(f"arm override {item!r} is not FIELD=VALUE")
    name, value = item.split("=", 1)
    out.append((name.strip(), value.strip()))
  return out


def set_field(config: ml_collections.ConfigDict, dotted: str, text: str) -> None:
  *parents, leaf = dotted.split(".")
  node = config
  for name in parents:
    if name not in node:
      raise ValueError(f"arm override: no config field {dotted!r}")
    node = node[name]
  if leaf not in node:
    raise ValueError(f"arm override: no config field {dotted!r}")
  old = node[leaf]
  if isinstance(old, (tuple, list)):
    items = [item.strip() for item in text.split(",") if item.strip()]
    if old:
      values = []
      for item in items:
        probe = ml_collections.ConfigDict({"x": old[0]})
        set_field(probe, "x", item)
        values.append(probe.x)
    else:
      values = [_untyped(item) for item in items]
    node[leaf] = type(old)(values)
    return
  if isinstance(old, bool):
    if text.lower() not in _BOOLS:
      raise ValueError(f"arm override {dotted}={text!r}: expected one of {sorted(_BOOLS)}")
    value: Any = _BOOLS[text.lower()]
  elif isinstance(old, int):
    value = int(text)
  elif isinstance(old, float):
    value = float(text)
  elif old is None:  # an unset field (e.g. max_grad_norm=None): a number, none or text
    value = _untyped(text)
  else:
    value = text
  node[leaf] = value


_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _untyped(text: str) -> Any:
  if text.lower() in ("none", "null"):
    return None
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text
