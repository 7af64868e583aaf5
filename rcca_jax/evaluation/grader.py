"""The `Grader` interface between the trainer and whatever grades responses.

The trainer and the evaluation loop only call `run`, read `stats` and `close`.
`EvalPool` (browser workers in processes, a deadline per response) implements it; a
remote pool (Ray, a grading service) fits by implementing the same three members.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from rcca_jax.evaluation.pool import Job


@runtime_checkable
class Grader(Protocol):
  """Grades (task, response) jobs into CONTRACTS §4 records."""

  stats: Mapping[str, int]  # at least "timeouts": responses that ran out of time

  def run(self, jobs: Iterable[Job], progress: bool | None = None
          ) -> Iterator[dict[str, Any]]:
    """One record per job, in input order, each within a bounded time."""

  def close(self) -> None:
    """Frees workers; a later `run` starts them again."""
