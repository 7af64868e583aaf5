"""Browser pages shared by concurrent gradings: one page session per worker, started
when first needed and rebuilt after a crash."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import BrowserGone, PageCrashed, PageSession


class Worker:
  """One browser page session, started when first needed."""

  def __init__(self, config: EvalConfig):
    self.config = config
    self._session: PageSession | None = None

  async def session(self) -> PageSession:
    if self._session is None:
      self._session = PageSession(self.config)
      await self._session.start()
    return self._session

  async def reset(self) -> None:
    if self._session is not None:
      await self._session.reset()

  async def close(self) -> None:
    if self._session is not None:
      await self._session.close()
      self._session = None


class Pages:
  """`size` workers shared by concurrent gradings: a grading holds a page only while it
  uses the browser (not while it waits for the judge)."""

  def __init__(self, config: EvalConfig, size: int):
    self._workers = [Worker(config) for _ in range(max(1, size))]
    self._free: asyncio.Queue = asyncio.Queue()
    for worker in self._workers:
      self._free.put_nowait(worker)

  @contextlib.asynccontextmanager
  async def page(self) -> AsyncIterator[PageSession]:
    """A started page session; after a crash its context is rebuilt (and the error
    passed on)."""
    worker = await self._free.get()
    try:
      yield await worker.session()
    except (PageCrashed, BrowserGone):
      await worker.reset()
      raise
    finally:
      self._free.put_nowait(worker)

  async def close(self) -> None:
    for worker in self._workers:
      await worker.close()
