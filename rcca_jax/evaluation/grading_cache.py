"""An on-disk grading cache: identical (task, response, evaluator config) graded once.

`CachedGrader(grader, directory, config=..., post_process=...)` implements `Grader`.
A job's key is the SHA-256 of the canonical JSON of the task, the response text, the
evaluator config, the post-process's name (`post_process_name`: "module:function") and
`code_version(post_process)` (a hash of the grading code's source files, the
post-process's module and its imports included, and the Chromium binary), so a code
change never serves an old record. Records live one per key in `DIR/KEY[:2]/KEY.json`,
written to a temporary file and renamed (atomic), so several processes (a resumed run,
every arm of a seed) share one directory safely. A hit is the stored record with this
job's `sample_id`; its `timing` is that of the grading that produced it. Jobs of one
`run` with the same key are graded once.

What is never stored (`cacheable`): records of grading that did not finish (worker
death, the pool's response deadline, a lost Ray actor: `pool.GRADING_FAILED`), of an
evaluator or post-process exception, of a browser or tab crash (a dead browser is the
machine's state, not the app's), and of a judge that did not answer. Hangs: the page's
own deadlines (load, step, rubric) catch an endless loop, but under machine load a slow
app can run past them too, and one grading cannot tell the two apart. So a hang record
is stored only when a second grading of the same key (in this process or another) hangs
again: a reproducible hang is the app's; a one-off one is graded again next time.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import pathlib
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rcca_jax.evaluation import pool as pool_lib
from rcca_jax.evaluation.browser import find_chromium
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import Job, PostProcess
from rcca_jax.evaluation.record import UNSCORABLE

_PACKAGE = pathlib.Path(__file__).resolve().parents[1]  # rcca_jax/
_ROOTS = ("rcca_jax.evaluation.evaluator", "rcca_jax.evaluation.pool",
          "rcca_jax.evaluation.ray_pool")
COUNTERS = ("cache_hits", "cache_misses", "cache_stored", "cache_write_errors")


def _module_file(name: str) -> pathlib.Path | None:
  parts = name.split(".")
  if parts[0] != "rcca_jax":
    return None
  base = _PACKAGE.joinpath(*parts[1:])
  for path in (base.with_suffix(".py"), base / "__init__.py"):
    if path.is_file():
      return path
  return None


def _imports(path: pathlib.Path, name: str) -> set[str]:
  """Names of the rcca_jax modules and packages `path` (module `name`) imports."""
  import ast  # pylint: disable=import-outside-toplevel
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  out = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                        + ([node.module] if node.module else []))
      out.add(base)
      out.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
  return {n for n in out if n.startswith("rcca_jax")}


def post_process_name(post_process: PostProcess | None) -> str:
  """"module:function" of a post-process ("" for none): the name it is imported by."""
  if post_process is None:
    return ""
  return f"{post_process.__module__}:{post_process.__qualname__}"


def grading_files(post_process: PostProcess | None) -> list[pathlib.Path]:
  """The source files grading runs: every file of `rcca_jax/evaluation/`, and the
  rcca_jax modules the pool, the evaluator and the post-process's module import
  (transitively, with their packages' `__init__.py` and the data files beside them,
  e.g. grammars)."""
  todo = list(_ROOTS) + ([post_process.__module__] if post_process else [])
  seen: set[str] = set()
  files = {p for p in (_PACKAGE / "evaluation").iterdir() if p.is_file()}
  while todo:
    name = todo.pop()
    if name in seen:
      continue
    seen.add(name)
    parts = name.split(".")
    todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages
    path = _module_file(name)
    if path is None:
      continue
    files.add(path)
    files.update(p for p in path.parent.iterdir()
                 if p.is_file() and p.suffix not in (".py", ".pyc"))
    todo.extend(_imports(path, name))
  return sorted(files)


@functools.lru_cache(maxsize=None)
def code_version(post_process: PostProcess | None) -> str:
  """A hash of the grading code (`grading_files`) and the Chromium binary (path, size,
  mtime); computed once per process and post-process."""
  h = hashlib.sha256()
  for path in grading_files(post_process):
    h.update(str(path.relative_to(_PACKAGE.parent)).encode() + b"\0")
    h.update(path.read_bytes() + b"\0")
  chromium = find_chromium()
  if chromium:
    st = os.stat(os.path.realpath(chromium))
    h.update(f"{chromium}:{st.st_size}:{st.st_mtime_ns}".encode())
  return h.hexdigest()


def job_key(task: Any, response: str, config: EvalConfig,
            post_process: PostProcess | None, version: str) -> str:
  """The content hash that names a job's record."""
  payload = {"task": task.to_json(), "response": response, "config": config.to_dict(),
             "post_process": post_process_name(post_process), "version": version}
  text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_hang(record: Mapping[str, Any]) -> bool:
  """Whether one of the page's deadlines ran out (an issue with `hang` evidence)."""
  return any("hang" in (i.get("evidence") or {}) for i in record.get("issues") or [])


def cacheable(record: Mapping[str, Any], has_judge: bool) -> bool:
  """False for records of infrastructure or grading-code failures (module docstring);
  a hang is cacheable only once reproduced (`CachedGrader`)."""
  if (pool_lib.GRADING_FAILED in record or UNSCORABLE in record or "error" in record
      or "post_process_error" in record):
    return False
  if any("crash" in (i.get("evidence") or {}) for i in record.get("issues") or []):
    return False
  if has_judge and any(r.get("passed") is None
                       and str(r.get("detail", "")).startswith("ungraded:")
                       for r in record.get("rubrics") or []):
    return False  # the judge did not answer
  return True


class CachedGrader:
  """`grader` behind the on-disk cache in `directory` (see the module docstring);
  `stats` is the wrapped grader's plus `COUNTERS` (hits: jobs served without grading,
  misses: jobs graded, stored: records written)."""

  def __init__(self, grader: Any, directory: str | os.PathLike, *, config: EvalConfig,
               post_process: PostProcess | None):
    self.grader = grader
    self.directory = pathlib.Path(directory)
    self.config = config
    self.post_process = post_process
    self.version = code_version(post_process)
    self.counts = dict.fromkeys(COUNTERS, 0)
    self.directory.mkdir(parents=True, exist_ok=True)

  @property
  def stats(self) -> dict[str, int]:
    return {**self.grader.stats, **self.counts}

  def close(self) -> None:
    self.grader.close()

  def __enter__(self) -> "CachedGrader":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def path(self, key: str) -> pathlib.Path:
    return self.directory / key[:2] / f"{key}.json"

  def key(self, job: Job) -> str:
    return job_key(job.task, job.response, self.config, self.post_process, self.version)

  def _load(self, key: str) -> dict[str, Any] | None:
    try:
      with open(self.path(key), encoding="utf-8") as f:
        return json.load(f)["record"]
    except (OSError, ValueError, KeyError, TypeError):
      return None  # absent (or unreadable: graded again and rewritten)

  def _write(self, path: pathlib.Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False)
      os.replace(tmp, path)
    except BaseException:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise

  def _store(self, key: str, record: dict[str, Any]) -> bool:
    """Writes `record` if it may be cached (a first hang only leaves a marker, `.hang`
    beside the record's path); whether it was written. A write that fails (a full
    disk) is counted in `cache_write_errors`, never raised: the record is served."""
    if not cacheable(record, self.config.has_judge):
      return False
    try:
      if is_hang(record):
        marker = self.path(key).with_suffix(".hang")
        if not marker.exists():
          self._write(marker, {"task_id": record.get("task_id")})
          return False
      self._write(self.path(key), {"task_id": record.get("task_id"), "record": record})
    except OSError:
      self.counts["cache_write_errors"] += 1
      return False
    self.counts["cache_stored"] += 1
    return True

  def run(self, jobs: Iterable[Job | dict], progress: bool | None = None
          ) -> Iterator[dict[str, Any]]:
    """One record per job, in input order (a dict job is passed through, as by the
    pools); cached records are served, the rest graded by the wrapped grader."""
    jobs = list(jobs)
    keys = {i: self.key(j) for i, j in enumerate(jobs) if isinstance(j, Job)}
    found: dict[str, dict[str, Any]] = {}
    for key in set(keys.values()):
      record = self._load(key)
      if record is not None:
        found[key] = record
    results: dict[int, dict[str, Any]] = {}
    todo = [i for i in keys if keys[i] not in found]
    first: dict[str, int] = {}
    for i in todo:
      first.setdefault(keys[i], i)
    # Each key graded once; the copies of a key whose record was not stored are graded
    # too (together, after the first pass).
    for batch in (list(first.values()), None):
      if batch is None:
        batch = [i for i in todo if i not in results and keys[i] not in found]
      for i, record in zip(batch, self.grader.run([jobs[i] for i in batch], progress)
                           if batch else ()):
        self.counts["cache_misses"] += 1
        results[i] = record
        if keys[i] not in found and self._store(keys[i], record):
          found[keys[i]] = copy.deepcopy(record)  # the caller may change `record`
    for i, job in enumerate(jobs):
      if i in results:
        yield results[i]
      elif i in keys:
        self.counts["cache_hits"] += 1
        yield {**copy.deepcopy(found[keys[i]]), "sample_id": job.sample_id}
      else:
        yield job
