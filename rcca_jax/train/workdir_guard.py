"""One job per work directory, resumed with the config it started with.

`WorkdirLock` holds `DIR/.lock` (an exclusive `flock`) while a job runs: a second job on
the same directory is refused, naming the holder's pid. The kernel drops the lock when
its holder dies, so a lock left by a killed job is simply taken over. The file stays
after release (removing it could let two jobs lock two different files); its text names
the last holder.

`check_saved_config` writes `DIR/job_config.json` on the first run and, on a resume,
refuses a config that differs from it, naming every changed field, unless each change
is allowed: by the caller's `allow` patterns, or as a longer `sft.num_steps` /
`rl.num_steps` (an extended run). Fields in `IGNORED_FIELDS` never count.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import fcntl
import fnmatch
import json
import os
import socket
from typing import Any, Iterator, Mapping, Sequence

from rcca_jax.data import jsonl
from rcca_jax.train import run_log
from rcca_jax.train import sections

LOCK_FILE = ".lock"
CONFIG_FILE = "job_config.json"
# How the job is run, not what it computes: grading processes and backend, caches,
# reports, logging and checkpoint cadence, and the mesh (checkpoints restore on any
# mesh). A resume may change them freely.
IGNORED_FIELDS = (
    "eval.workers", "eval.backend", "eval.ray_address", "eval.grading_cache",
    "eval.num_reports", "eval.collapse_margin", "sft.log_every", "sft.checkpoint_every",
    "rl.checkpoint_every", "checkpoint.async_save", "checkpoint.max_to_keep",
    "checkpoint.every_seconds", "mesh.*",
    # The ablation / sweep runners' own sections (their arm lists and settings), which
    # the job does not read: a study that adds an arm resumes its finished SFT runs.
    "arms.*", "ablation.*", "sweep.*", "settings.*")
# Allowed on every resume when they grow: the run is extended.
EXTENDABLE_FIELDS = ("sft.num_steps", "rl.num_steps")
_ABSENT = "<absent>"


class WorkdirLocked(RuntimeError):
  """Another live job holds the work directory."""


class ConfigChanged(ValueError):
  """The config differs from the saved one in fields that are not allowed to change;
  `changes` are `FIELD: OLD -> NEW` lines of every changed field (the allowed ones end
  with ` (allowed)`)."""

  def __init__(self, path: str, changes: list[str]):
    self.changes = changes
    super().__init__(
        f"{path}: the config differs from the one this work directory was started with:"
        "\n  " + "\n  ".join(changes) + "\nresume with the same config, allow the "
        "changed fields, or use another work directory")


class WorkdirLock:
  """`with WorkdirLock(dir):` holds `DIR/.lock` for the block; WorkdirLocked when
  another holder (this process included) has it."""

  def __init__(self, workdir: str):
    self.path = os.path.join(workdir, LOCK_FILE)
    self._fd: int | None = None

  def acquire(self) -> None:
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      os.close(fd)
      if e.errno not in (errno.EAGAIN, errno.EACCES):
        raise
      raise WorkdirLocked(f"{os.path.dirname(self.path)} is in use by {holder(self.path)} "
                          f"(lock {self.path}); one job per work directory") from None
    stamp = {"pid": os.getpid(), "host": socket.gethostname(),
             "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(stamp) + "\n").encode(), 0)
    self._fd = fd

  def release(self) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None

  def __del__(self) -> None:  # a holder dropped without `release` (e.g. an error)
    self.release()

  def __enter__(self) -> "WorkdirLock":
    self.acquire()
    return self

  def __exit__(self, *exc) -> None:
    self.release()


def holder(lock_path: str) -> str:
  """Who holds a lock, from its file: "pid N on HOST since TIME" (or what is known)."""
  try:
    with open(lock_path, encoding="utf-8") as f:
      stamp = json.loads(f.read() or "{}")
  except (OSError, ValueError):
    stamp = {}
  if not isinstance(stamp, dict) or "pid" not in stamp:
    return "another job (pid not recorded yet)"
  return f"pid {stamp['pid']} on {stamp.get('host', '?')} since {stamp.get('time', '?')}"


def _leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
  """(dotted name, value) of each non-mapping value of a nested mapping."""
  if isinstance(tree, Mapping) and tree:
    for key, value in tree.items():
      yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
  else:
    yield prefix, tree


def _matches(name: str, patterns: Sequence[str]) -> bool:
  return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _value(leaves: Mapping[str, Any], name: str) -> Any:
  """A field's value, its section default when absent (a config written before the
  field had it), else `<absent>`."""
  if name in leaves:
    return leaves[name]
  try:
    found = sections.default(name)
  except KeyError:
    return _ABSENT
  return _ABSENT if found is dataclasses.MISSING else _normalized({"v": found})["v"]


def config_changes(saved: Mapping[str, Any], config: Mapping[str, Any]
                   ) -> list[tuple[str, Any, Any]]:
  """(dotted field, saved value, new value) of every field that differs, sorted; a
  field on one side only is compared with its default (`<absent>` without one);
  IGNORED_FIELDS are left out."""
  old, new = dict(_leaves(saved)), dict(_leaves(config))
  changes = [(name, _value(old, name), _value(new, name))
             for name in sorted(old.keys() | new.keys())
             if not _matches(name, IGNORED_FIELDS)]
  return [change for change in changes if change[1] != change[2]]


def _allowed(change: tuple[str, Any, Any], allow: Sequence[str]) -> bool:
  name, old, new = change
  grows = (name in EXTENDABLE_FIELDS and isinstance(old, int) and isinstance(new, int)
           and new > old)
  return grows or _matches(name, allow)


def _show(value: Any) -> str:
  return value if value is _ABSENT else json.dumps(value)


def _normalized(config: Mapping[str, Any]) -> dict[str, Any]:
  """The config as JSON reads it back (tuples as lists; other types as their repr)."""
  return json.loads(json.dumps(config, default=repr, sort_keys=True))


def check_saved_config(workdir: str, config: Mapping[str, Any],
                       allow: Sequence[str] = ()) -> list[str]:
  """Saves `config` (a nested mapping, e.g. `ConfigDict.to_dict()`) as
  `DIR/job_config.json` on the first run; on a resume compares it with the saved one.
  Changes outside IGNORED_FIELDS raise ConfigChanged unless each is allowed (`allow`:
  dotted names, `fnmatch` wildcards; or a growing EXTENDABLE_FIELDS entry); allowed
  changes update the saved config, are noted and returned as `FIELD: OLD -> NEW`."""
  path = os.path.join(workdir, CONFIG_FILE)
  config = _normalized(config)
  if not os.path.exists(path):
    _save(path, config)
    return []
  with open(path, encoding="utf-8") as f:
    saved = json.load(f)
  changes = config_changes(saved, config)
  lines = [f"{name}: {_show(old)} -> {_show(new)}" for name, old, new in changes]
  allowed = [_allowed(change, allow) for change in changes]
  if not all(allowed):
    raise ConfigChanged(path, [line + " (allowed)" * ok for line, ok in zip(lines, allowed)])
  if changes:
    _save(path, config)
    run_log.note("%s: config changes allowed on resume: %s", path, "; ".join(lines))
  return lines


def _save(path: str, config: Mapping[str, Any]) -> None:
  with jsonl.atomic_writer(path) as f:
    json.dump(config, f, indent=1, sort_keys=True)
    f.write("\n")


def claim(workdir: str, config: Mapping[str, Any], *, check_config: bool,
          allow: Sequence[str] = ()) -> WorkdirLock:
  """The work directory's lock, taken (WorkdirLocked while another job holds it), and,
  with `check_config`, `config` checked against the saved one (ConfigChanged, the lock
  released)."""
  lock = WorkdirLock(workdir)
  lock.acquire()
  if check_config:
    try:
      check_saved_config(workdir, config, allow=allow)
    except ConfigChanged:
      lock.release()
      raise
  return lock
