"""The `Grader` interface between the trainer and whatever grades responses.

The trainer and the evaluation loop only call `run`, read `stats` and `close`.
`EvalPool` (browser workers in processes, a deadline per response) and `RayPool`
(the same workers as Ray actors, on a cluster) implement it; `make_grader` builds either
by backend name, optionally behind the on-disk grading cache (`grading_cache`), with
the post-process its workers run on each record (the trainer passes
`credit.localize.localize_record`). A grading service fits by implementing the same
three members.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.grading_cache import CachedGrader
from rcca_jax.evaluation.pool import EvalPool, Job, PostProcess

BACKENDS = ("pool", "ray")


@runtime_checkable
class Grader(Protocol):
  """Grades (task, response) jobs into records of docs/contracts.md#4-evaluation."""

  stats: Mapping[str, int]  # at least "timeouts": responses that ran out of time

  def run(self, jobs: Iterable[Job], progress: bool | None = None
          ) -> Iterator[dict[str, Any]]:
    """One record per job, in input order, each within a bounded time."""

  def close(self) -> None:
    """Frees workers; a later `run` starts them again."""


def make_grader(config: EvalConfig, *, workers: int = 1,
                post_process: PostProcess | None = None, backend: str = "pool",
                ray_address: str | None = None, cache_dir: str = "") -> Grader:
  """A process pool (`backend="pool"`) or Ray actors (`"ray"`, on `ray_address` or a
  local Ray instance) of `workers` browsers, whose workers pass each record through
  `post_process` (a module-level function, `pool.check_post_process`); behind the
  on-disk grading cache in `cache_dir` when one is given (`grading_cache.CachedGrader`)."""
  if backend == "pool":
    grader: Grader = EvalPool(config, workers=workers, post_process=post_process)
  elif backend == "ray":
    from rcca_jax.evaluation import ray_pool  # pylint: disable=import-outside-toplevel
    grader = ray_pool.RayPool(config, workers=workers, post_process=post_process,
                              address=ray_address or None)
  else:
    raise ValueError(f"grading backend must be one of {BACKENDS}, not {backend!r}")
  if cache_dir:
    grader = CachedGrader(grader, cache_dir, config=config, post_process=post_process)
  return grader
