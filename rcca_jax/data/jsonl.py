"""Line-by-line JSON Lines reading that turns every problem into a `FILE:LINE:` message,
and atomic writing (temp file + rename, so a kill never leaves half a file)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import tempfile
from typing import IO, Any, BinaryIO, Iterator

# A longer line is a per-line error; it is skipped without being held in memory.
MAX_LINE_BYTES = 8 * 2**20
# A JSON escape of a UTF-16 surrogate: a lone one decodes to a str UTF-8 cannot encode.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# `atomic_writer`'s temp files (a killed writer leaves one behind).
TMP_PREFIX = ".tmp-"


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


def _raw_lines(f: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
  """(1-based number, bytes) of each line; None for a line over MAX_LINE_BYTES, whose
  rest is skipped in bounded chunks."""
  number = 0
  while raw := f.readline(MAX_LINE_BYTES + 1):
    number += 1
    if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
      yield number, raw
      continue
    while (rest := f.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
      pass
    yield number, None


def _lone_surrogate(value: Any, path: str = "") -> str | None:
  """Where the first lone UTF-16 surrogate in a parsed JSON value's strings or keys
  is, e.g. "U+D800 in 'rubrics[0].text' at character 4"; None when there is none."""
  if isinstance(value, str):
    found = _SURROGATE.search(value)
    return (f"U+{ord(found.group()):04X} in {path} at character {found.start()}"
            if found else None)
  if isinstance(value, dict):
    for key, item in value.items():
      inner = f"{path[1:-1]}.{key}" if path else key
      found = (_lone_surrogate(key, f"a key of {path or 'the object'}")
               or _lone_surrogate(item, repr(inner)))
      if found:
        return found
  if isinstance(value, list):
    for i, item in enumerate(value):
      if found := _lone_surrogate(item, repr(f"{path[1:-1]}[{i}]")):
        return found
  return None


def read_lines(path: str | os.PathLike) -> Iterator[Line]:
  """Each non-blank line of a JSON Lines file, parsed as a JSON object when possible.
  A line that is not valid UTF-8, not JSON, not an object, over MAX_LINE_BYTES or
  holding a lone surrogate escape (which no UTF-8 output could carry) is an error."""
  path = os.fspath(path)
  with open(path, "rb") as f:
    for number, raw in _raw_lines(f):
      where = f"{path}:{number}"
      if raw is None:
        yield Line(number, where, None,
                   f"{where}: line longer than {MAX_LINE_BYTES} bytes (skipped)")
        continue
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
      surrogate = _SURROGATE_ESCAPE.search(text) and _lone_surrogate(obj)
      if surrogate:
        yield Line(number, where, None,
                   f"{where}: lone UTF-16 surrogate {surrogate} (not encodable as UTF-8)")
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


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[IO[str]]:
  """A UTF-8 text file that replaces `path` (mode 644) only when the block completes:
  written to a temp file beside it, synced, then renamed over it. On an error the temp
  file is removed and `path` is left as it was."""
  path = os.fspath(path)
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                             prefix=TMP_PREFIX, suffix="-" + os.path.basename(path))
  try:
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise


def write_lines(path: str | os.PathLike, objects) -> None:
  """Writes objects as UTF-8 JSON Lines, atomically (`atomic_writer`)."""
  with atomic_writer(path) as f:
    for obj in objects:
      f.write(json.dumps(obj, ensure_ascii=False) + "\n")
