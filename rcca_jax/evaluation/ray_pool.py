"""Grading on a Ray cluster: the `Grader` interface with browsers spread over Ray actors.

Each actor (one CPU, placed with Ray's SPREAD strategy) owns an `EvalPool` of one
worker process, i.e. one browser, so grading on any node has the local pool's page
session, per-response deadline (an overrunning worker is killed and replaced),
recycling, hostile-app containment (own process group, Chromium killed by pid), network
policy and post-process (sent by reference: each actor imports its module). The driver
keeps one response in flight per actor and yields one record per job in input order. An
actor that dies (its node lost, its process killed) or does not answer within
`actor_timeout` is killed and replaced, and its response retried once; a second loss
records the response as failed (format/source computed in the driver, runtime failed
with the reason).

With `address=None` a Ray instance is started on this machine (or the one already
initialised in this process is used) and shut down by `close`; otherwise the driver
connects to `address` (e.g. "ray://head:10001" or "head:6379"), whose nodes must have
this package and a browser installed (`make install` on each). Needs `pip install .[ray]`.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Iterable, Iterator

from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import (EvalPool, Job, PostProcess, check_post_process,
                                      failed_record, in_input_order)

_POLL = 0.05
_COUNTERS = ("timeouts", "worker_deaths", "recycled")


class _GraderActor:
  """A Ray actor: one `EvalPool` worker (one browser) grading one job at a time."""

  def __init__(self, config: EvalConfig, post_process: PostProcess | None):
    self.pool = EvalPool(config, workers=1, post_process=post_process)

  def grade(self, job: Job) -> tuple[dict, dict[str, int]]:
    """The job's record and the pool counters it moved (timeouts, worker deaths...)."""
    before = dict(self.pool.stats)
    record = next(iter(self.pool.run([job], progress=False)))
    return record, {k: self.pool.stats[k] - before[k] for k in _COUNTERS}

  def close(self) -> None:
    self.pool.close()


class RayPool:
  """`workers` Ray actors grading jobs (see the module docstring); a context manager."""

  def __init__(self, config: EvalConfig | None = None, workers: int = 1,
               post_process: PostProcess | None = None, address: str | None = None,
               actor_timeout: float | None = None):
    """`actor_timeout` (default: twice the response deadline plus 60 s for a browser
    start) bounds one call of an actor before it counts as lost."""
    try:
      import ray  # pylint: disable=import-outside-toplevel  (an optional extra)
    except ImportError as e:
      raise ImportError("the ray grading backend needs Ray: pip install .[ray]") from e
    self._ray = ray
    self.config = config or EvalConfig()
    self.num_workers = max(1, int(workers))
    self.post_process = check_post_process(post_process)  # fail fast, in the driver
    self.address = address
    self.actor_timeout = (actor_timeout if actor_timeout is not None
                          else 2 * self.config.response_deadline + 60.0)
    self._actors: list[Any] = []
    self._owns_ray = False
    self.stats = {"timeouts": 0, "worker_deaths": 0, "recycled": 0, "actor_deaths": 0}

  def __enter__(self) -> "RayPool":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  @property
  def actors(self) -> list[Any]:
    """The live actor handles (for tests and monitoring)."""
    return list(self._actors)

  def _start(self) -> None:
    ray = self._ray
    if not ray.is_initialized():
      if self.address:
        ray.init(address=self.address, log_to_driver=False)
      else:
        ray.init(num_cpus=self.num_workers, include_dashboard=False, log_to_driver=False)
      self._owns_ray = True
    while len(self._actors) < self.num_workers:
      self._actors.append(self._new_actor())

  def _new_actor(self) -> Any:
    remote = self._ray.remote(num_cpus=1, max_restarts=0,
                              scheduling_strategy="SPREAD")(_GraderActor)
    return remote.remote(self.config, self.post_process)

  def close(self) -> None:
    """Stops the actors (and the Ray instance this pool started); `run` restarts."""
    ray = self._ray
    if self._actors:
      done = [a.close.remote() for a in self._actors]
      ray.wait(done, num_returns=len(done), timeout=15)
      for actor in self._actors:
        ray.kill(actor)
      self._actors = []
    if self._owns_ray:
      ray.shutdown()
      self._owns_ray = False

  def run(self, jobs: Iterable[Job | dict], progress: bool | None = None
          ) -> Iterator[dict]:
    """Yields one record dict per job, in input order. A dict job is passed through."""
    jobs = list(jobs)
    results: dict[int, dict] = {i: j for i, j in enumerate(jobs) if not isinstance(j, Job)}
    pending = collections.deque(i for i, j in enumerate(jobs) if isinstance(j, Job))
    if pending:
      self._start()
    losses: collections.Counter = collections.Counter()
    free = list(range(len(self._actors)))
    inflight: dict[Any, tuple[int, int, float]] = {}  # ref -> (slot, job index, start)

    def advance() -> int:
      while free and pending:
        slot, index = free.pop(), pending.popleft()
        inflight[self._actors[slot].grade.remote(jobs[index])] = (
            slot, index, time.monotonic())
      before = len(results)
      self._collect(jobs, inflight, free, pending, results, losses)
      return len(results) - before

    yield from in_input_order(len(jobs), results, advance, progress, "evaluating (ray)")

  def _collect(self, jobs: list, inflight: dict, free: list[int],
               pending: collections.deque, results: dict[int, dict],
               losses: collections.Counter) -> None:
    """Takes finished calls; a lost actor is replaced and its job retried or failed."""
    ray = self._ray
    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=_POLL)
    lost = []
    for ref in ready:
      slot, index, _ = inflight.pop(ref)
      try:
        record, counters = ray.get(ref)
      except ray.exceptions.RayActorError as e:
        lost.append((slot, index, f"the grading actor died ({type(e).__name__})"))
        continue
      results[index] = record
      for name, value in counters.items():
        self.stats[name] += value
      free.append(slot)
    now = time.monotonic()
    for ref, (slot, index, started) in list(inflight.items()):
      if now - started > self.actor_timeout:
        del inflight[ref]
        ray.kill(self._actors[slot])
        lost.append((slot, index, f"the grading actor did not answer within "
                                  f"{self.actor_timeout:g}s and was killed"))
    for slot, index, reason in lost:
      self.stats["actor_deaths"] += 1
      self._actors[slot] = self._new_actor()
      free.append(slot)
      losses[index] += 1
      if losses[index] < 2:
        pending.appendleft(index)  # retried once, first in line
      else:
        results[index] = failed_record(jobs[index], f"{reason}; retried once",
                                       self.config, self.post_process)
