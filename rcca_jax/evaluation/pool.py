"""A pool of evaluation worker processes, each with its own browser.

Workers are started with the `spawn` method, each in its own process group; Chromium,
which `cdp.launch` starts in a session and group of its own, is found through /proc and
killed by pid. A worker's start (process, browser, first context) has a deadline;
failed starts are retried with back-off, and `worker_start_retries` failures per worker
in a row end `run()` with one error naming the last. The parent enforces a wall-clock
deadline per response: a worker that overruns is killed (SIGTERM, then SIGKILL) and
replaced, and the response is graded again (`infra_retries`), then gets an unscorable
record (format/source computed in the parent, runtime failed with the reason). Workers
are recycled after a number of apps. A worker passes each record through the pool's
post-process, a module-level function that the spawn pickles by reference (the trainer's
is `credit.localize.localize_record`). Results come back exactly once per job, in input
order. Each worker and its browser keep their temporary files (profiles) under the
pool's own directory, removed by `close()` with any browser left in it, and run under
an OS memory limit (`worker_memory_mb`, RLIMIT_DATA).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Iterable, Iterator

from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.record import UNSCORABLE

_KILL_GRACE = 2.0
_POLL = 0.05
GRADING_FAILED = "grading_failed"  # record key: why grading of the response never finished
# A record's post-process, run in the workers: (record, response) -> record.
PostProcess = Callable[[dict, str], dict]


def check_post_process(fn: PostProcess | None) -> PostProcess | None:
  """`fn` if the workers can run it: None, or a module-level function, which pickles by
  reference so that each worker (a spawned process, a Ray actor) imports it by name.
  TypeError otherwise (a string, a lambda, a nested function)."""
  if fn is None:
    return None
  if not (callable(fn) and hasattr(fn, "__qualname__")):
    raise TypeError(f"post-process {fn!r}: expected a function such as "
                    "rcca_jax.credit.localize.localize_record")
  try:
    pickle.dumps(fn)
  except (pickle.PicklingError, AttributeError, TypeError) as e:
    raise TypeError(f"post-process {fn!r}: not a module-level function, so the workers "
                    f"cannot import it: {e}") from e
  return fn


def descendants(pid: int) -> list[int]:
  """Pids of all live descendants of `pid` (Linux /proc; empty elsewhere).

  Chromium runs in a process group of its own (`cdp.launch`), so killing the worker's
  group alone would leave the browser to notice its closed pipe; we kill it directly.
  """
  children: dict[int, list[int]] = {}
  try:
    entries = [e for e in os.listdir("/proc") if e.isdigit()]
  except OSError:
    return []
  for entry in entries:
    try:
      with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
      continue
    if fields[0] != "Z":
      children.setdefault(int(fields[1]), []).append(int(entry))
  out, stack = [], [pid]
  while stack:
    for child in children.get(stack.pop(), []):
      out.append(child)
      stack.append(child)
  return out


def kill_browsers_under(directory: str) -> int:
  """SIGKILLs the process group of every process whose command line names `directory`
  (a browser whose worker was killed outlives it in its own group); how many."""
  needle = directory.encode()
  killed = 0
  try:
    entries = [e for e in os.listdir("/proc") if e.isdigit()]
  except OSError:
    return 0
  for entry in entries:
    try:
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        if needle not in f.read():
          continue
      os.killpg(os.getpgid(int(entry)), signal.SIGKILL)
      killed += 1
    except (OSError, ProcessLookupError):
      continue
  return killed


def in_input_order(total: int, results: dict[int, dict], advance: Callable[[], int],
                   progress: bool | None, desc: str) -> Iterator[dict]:
  """Yields `results[0]`, ..., `results[total - 1]` as each arrives, calling `advance()`
  (which fills `results`, returning how many it added) while the next one is missing;
  a progress bar when asked (default: 50 jobs or more on a terminal)."""
  bar = None
  if progress or (progress is None and total >= 50 and sys.stderr.isatty()):
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel
    bar = tqdm(total=total, desc=desc, unit="app", file=sys.stderr)
    bar.update(len(results))
  next_out = 0
  try:
    while next_out < total:
      while next_out in results:
        yield results.pop(next_out)
        next_out += 1
      if next_out < total:
        done = advance()
        if bar is not None and done:
          bar.update(done)
  finally:
    if bar is not None:
      bar.close()


@dataclasses.dataclass(frozen=True)
class Job:
  """One response to evaluate; `task` is a tasks.Task."""

  task: Any
  response: str
  sample_id: int


def _apply_post_process(fn: PostProcess | None, record: dict, response: str) -> dict:
  if fn is None:
    return record
  try:
    return fn(record, response)
  except Exception as e:  # pylint: disable=broad-except
    record = dict(record)
    record["post_process_error"] = f"{type(e).__name__}: {e}"
    return record


def failed_record(job: Job, reason: str, config: EvalConfig,
                  post_process: PostProcess | None) -> dict:
  """The record of a response whose grading never finished: format/source computed
  here, runtime failed with `reason`, then the post-process; `GRADING_FAILED` and
  `UNSCORABLE` hold the reason and `reward` is None (such a record describes the
  grading, not the app: no verdict, never cached, never trained on)."""
  from rcca_jax.evaluation import evaluator as evaluator_lib  # pylint: disable=import-outside-toplevel
  record = evaluator_lib.static_record(job.task, job.response, job.sample_id, reason,
                                       config).to_json()
  record.update({GRADING_FAILED: reason, UNSCORABLE: reason, "reward": None})
  return _apply_post_process(post_process, record, job.response)


def _worker_main(conn, config: EvalConfig, post_process: PostProcess | None, max_jobs: int,
                 tmp_dir: str) -> None:
  """Worker loop: evaluate jobs until told to stop or `max_jobs` are done; `post_process`
  came pickled by reference (the spawn imported its module here)."""
  os.setsid()  # own process group: the parent can kill us with our browser
  os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  os.environ["TMPDIR"] = tempfile.tempdir = tmp_dir  # profiles: the pool removes them
  if config.worker_memory_mb:  # inherited by the browser's processes
    limit = config.worker_memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
  from rcca_jax.evaluation import evaluator as evaluator_lib  # pylint: disable=import-outside-toplevel
  done = 0
  ev = None
  try:
    ev = evaluator_lib.Evaluator(config)
    ev.start()
  except Exception as e:  # pylint: disable=broad-except
    conn.send(("failed", None, f"{type(e).__name__}: {e}"))
    if ev is not None:
      ev.close()
    return
  try:
    conn.send(("ready", None, None))
    while done < max_jobs:
      msg = conn.recv()
      if msg is None:
        break
      index, job = msg
      try:
        record = ev.evaluate(job.task, job.response, job.sample_id).to_json()
        record = _apply_post_process(post_process, record, job.response)
      except Exception as e:  # pylint: disable=broad-except
        rec = evaluator_lib.static_record(job.task, job.response, job.sample_id,
                                          f"evaluator error: {type(e).__name__}: {e}", config)
        record = rec.to_json()
        record["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[:1000]
      done += 1
      conn.send(("done", index, record))
  except (EOFError, KeyboardInterrupt, BrokenPipeError):
    pass
  finally:
    try:
      ev.close()
    except Exception:  # pylint: disable=broad-except
      pass
    try:
      conn.send(("bye", None, None))
    except Exception:  # pylint: disable=broad-except
      pass


class _Worker:
  def __init__(self, ctx, config: EvalConfig, post_process: PostProcess | None,
               tmp_dir: str):
    self.conn, child = ctx.Pipe()
    self.tmp_dir = tmp_dir
    os.makedirs(tmp_dir, exist_ok=True)
    self.proc = ctx.Process(target=_worker_main,
                            args=(child, config, post_process, config.recycle_worker_after,
                                  tmp_dir),
                            daemon=True)
    self.proc.start()
    child.close()
    self.ready = False
    self.spawned = time.monotonic()
    self.job: int | None = None
    self.started = 0.0
    self.jobs_done = 0
    self.max_jobs = config.recycle_worker_after

  def kill(self) -> None:
    """SIGTERM the worker's process group, then SIGKILL; its browser is killed too."""
    pid = self.proc.pid
    family = descendants(pid)
    for sig, wait in ((signal.SIGTERM, _KILL_GRACE), (signal.SIGKILL, _KILL_GRACE)):
      try:
        os.killpg(pid, sig)
      except (ProcessLookupError, PermissionError):
        pass
      self.proc.join(wait)
      if not self.proc.is_alive():
        break
    for member in [pid, *family]:  # leftovers: the group, and the browser's own group
      try:
        os.kill(member, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass
    try:
      os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
    self.conn.close()

  def reap(self) -> None:
    """Ends the worker whatever its state, its browser (found by its profile directory
    when the worker died first) and its temporary files."""
    if self.proc.is_alive():
      self.kill()
    else:
      try:
        os.killpg(self.proc.pid, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass
      self.conn.close()
    kill_browsers_under(self.tmp_dir)
    shutil.rmtree(self.tmp_dir, ignore_errors=True)


class EvalPool:
  """N worker processes evaluating jobs, each record passed through `post_process` in
  its worker (`check_post_process`); use as a context manager."""

  def __init__(self, config: EvalConfig | None = None, workers: int = 1,
               post_process: PostProcess | None = None):
    self.config = config or EvalConfig()
    self.num_workers = max(1, int(workers))
    self.post_process = check_post_process(post_process)  # fail fast, in the parent
    self._ctx = multiprocessing.get_context("spawn")
    self._workers: list[_Worker] = []
    # The workers' temporary files (browser profiles); `close` removes it.
    self.tmp_dir = tempfile.mkdtemp(prefix="rcca-pool-")
    self._spawned = 0
    self._respawn_at: list[float] = []  # when failed starts are tried again
    self._failed_starts = 0           # in a row, over the pool
    self._tries: dict[int, int] = {}  # job index -> infrastructure retries so far
    self.stats = {"timeouts": 0, "worker_deaths": 0, "recycled": 0, "retried": 0,
                  "start_failures": 0}

  def __enter__(self) -> "EvalPool":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def _spawn(self) -> _Worker:
    self._spawned += 1
    w = _Worker(self._ctx, self.config, self.post_process,
                os.path.join(self.tmp_dir, f"worker-{self._spawned}"))
    self._workers.append(w)
    return w

  def close(self) -> None:
    """Stops every worker and browser and removes their files; `run` starts again."""
    for w in self._workers:
      try:
        w.conn.send(None)
      except (OSError, BrokenPipeError):
        pass
    deadline = time.monotonic() + 10
    for w in self._workers:
      w.proc.join(max(0.1, deadline - time.monotonic()))
      w.reap()
    self._workers = []
    self._respawn_at = []
    kill_browsers_under(self.tmp_dir)
    shutil.rmtree(self.tmp_dir, ignore_errors=True)

  def _timeout_record(self, job: Job, reason: str) -> dict:
    return failed_record(job, reason, self.config, self.post_process)

  def run(self, jobs: Iterable[Job | dict], progress: bool | None = None) -> Iterator[dict]:
    """Yields one record dict per job, in input order. A dict job is passed through."""
    jobs = list(jobs)
    results: dict[int, dict] = {}
    pending = [i for i, j in enumerate(jobs) if isinstance(j, Job)]
    for i, j in enumerate(jobs):
      if not isinstance(j, Job):
        results[i] = j
    pending.reverse()  # pop() from the end = input order
    self._tries = {}
    self._failed_starts = 0
    while len(self._workers) < min(self.num_workers, len(pending)):
      self._spawn()

    def advance() -> int:
      self._respawn_due(pending)
      self._dispatch(jobs, pending)
      return self._collect(jobs, results, pending)

    yield from in_input_order(len(jobs), results, advance, progress, "evaluating")

  def _dispatch(self, jobs: list, pending: list[int]) -> None:
    for w in list(self._workers):
      if w.ready and w.job is None and pending and w.jobs_done < w.max_jobs:
        index = pending.pop()
        try:
          w.conn.send((index, jobs[index]))
        except (OSError, BrokenPipeError):
          pending.append(index)
          self._replace(w, respawn=True)
          continue
        w.job, w.started = index, time.monotonic()

  def _replace(self, w: _Worker, respawn: bool) -> None:
    if w in self._workers:
      self._workers.remove(w)
    w.reap()
    if respawn:
      self._spawn()

  def _respawn_due(self, pending: list[int]) -> None:
    """Starts the workers whose back-off after a failed start is over."""
    now = time.monotonic()
    due = [t for t in self._respawn_at if t <= now]
    self._respawn_at = [t for t in self._respawn_at if t > now]
    for _ in due:
      if pending and len(self._workers) < self.num_workers:
        self._spawn()

  def _start_failed(self, w: _Worker, reason: str) -> None:
    """A worker that did not become ready: tried again after a back-off, or, after
    `worker_start_retries` failures per worker in a row, RuntimeError."""
    self._replace(w, respawn=False)
    self.stats["start_failures"] += 1
    self._failed_starts += 1
    budget = (self.config.worker_start_retries + 1) * self.num_workers
    if self._failed_starts >= budget:
      self.close()
      raise RuntimeError(f"evaluation workers could not start: {self._failed_starts} "
                         f"failed starts in a row (worker_start_retries="
                         f"{self.config.worker_start_retries}); last: {reason}"[:2000])
    self._respawn_at.append(time.monotonic() + min(0.5 * 2 ** (self._failed_starts - 1),
                                                   8.0))

  def _lost(self, jobs: list, index: int, results: dict[int, dict],
            pending: list[int], reason: str) -> int:
    """A job whose worker died or overran: queued again (`infra_retries`), else its
    unscorable record; how many jobs finished (0 or 1)."""
    tries = self._tries.get(index, 0)
    if tries < self.config.infra_retries:
      self._tries[index] = tries + 1
      self.stats["retried"] += 1
      pending.append(index)  # next out
      return 0
    if tries:
      reason += f"; graded {tries + 1} times"
    results[index] = self._timeout_record(jobs[index], reason)
    return 1

  def _collect(self, jobs: list, results: dict[int, dict], pending: list[int]) -> int:
    """Receives finished jobs, handles deaths and overruns; returns how many finished."""
    finished = 0
    conns = [w.conn for w in self._workers]
    ready = multiprocessing.connection.wait(conns, timeout=_POLL)
    for w in list(self._workers):
      if w.conn in ready:
        try:
          kind, index, record = w.conn.recv()
        except (EOFError, OSError):
          kind, index, record = "dead", None, None
        if kind == "ready":
          w.ready = True
          self._failed_starts = 0
        elif kind == "failed":
          self._start_failed(w, str(record))
          continue
        elif kind == "done":
          results[index] = record
          w.job = None
          w.jobs_done += 1
          finished += 1
        elif not w.ready:  # died before it was ready
          w.proc.join(1.0)
          self._start_failed(w, f"the worker exited at start (exit code {w.proc.exitcode})")
          continue
        else:  # "bye" (recycled) or died
          if w.job is not None:
            self.stats["worker_deaths"] += 1
            w.proc.join(1.0)
            finished += self._lost(
                jobs, w.job, results, pending,
                f"the evaluation worker died (exit code {w.proc.exitcode})")
          else:
            self.stats["recycled"] += kind == "bye"
          w.job = None
          self._replace(w, respawn=bool(pending))
          continue
      now = time.monotonic()
      if not w.ready and now - w.spawned > self.config.worker_start_timeout:
        self._start_failed(w, f"not ready within worker_start_timeout="
                              f"{self.config.worker_start_timeout:g}s")
      elif w.job is not None and now - w.started > self.config.response_deadline:
        self.stats["timeouts"] += 1
        finished += self._lost(
            jobs, w.job, results, pending,
            f"response deadline of {self.config.response_deadline:g}s exceeded; the worker "
            "was killed")
        w.job = None
        self._replace(w, respawn=bool(pending))
    if pending and not self._workers and not self._respawn_at:
      self._spawn()  # every worker was lost: start one for the jobs left
    return finished
