"""Line-by-line JSON Lines reading that turns every problem into a `FILE:LINE:` message."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Any, Iterator


class _DuplicateKey(ValueError):
  pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for k, v in pairs:
    if k in out:
      raise _DuplicateKey(k)
    out[k] = v
  return out


@dataclasses.dataclass(frozen=True)
class Line:
  """One non-blank line: its 1-based number, and either the object or what is wrong."""

  number: int
  where: str                    # "FILE:LINE"
  obj: dict[str, Any] | None
  error: str | None             # "FILE:LINE: what is wrong" when obj is None


def read_lines(path: str | os.PathLike) -> Iterator[Line]:
  """Each non-blank line of a JSON Lines file, parsed as a JSON object when possible."""
  path = os.fspath(path)
  with open(path, "rb") as f:
    for number, raw in enumerate(f, start=1):
      where = f"{path}:{number}"
      try:
        text = raw.decode("utf-8").rstrip("\r\n")
      except UnicodeDecodeError as e:
        yield Line(number, where, None, f"{where}: not valid UTF-8 at byte {e.start + 1}")
        continue
      if not text.strip():
        continue
      try:
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys)
      except _DuplicateKey as e:
        yield Line(number, where, None, f"{where}: duplicate key {e.args[0]!r}")
        continue
      except json.JSONDecodeError as e:
        yield Line(number, where, None, f"{where}: invalid JSON at column {e.colno}: {e.msg}")
        continue
      if not isinstance(obj, dict):
        yield Line(number, where, None,
                   f"{where}: expected a JSON object, got {json_type(obj)}")
        continue
      yield Line(number, where, obj, None)


def json_type(value: Any) -> str:
  """The JSON name of a value's type, for error messages."""
  if value is None:
    return "null"
  if isinstance(value, bool):
    return "boolean"
  if isinstance(value, (int, float)):
    return "number"
  if isinstance(value, str):
    return "string"
  if isinstance(value, list):
    return "array"
  return "object"


def write_lines(path: str | os.PathLike, objects) -> None:
  """Writes objects as UTF-8 JSON Lines, atomically (temp file + rename)."""
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".jsonl")
  try:
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
      for obj in objects:
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise
