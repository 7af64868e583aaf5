"""The grading loop of the benchmark runners: concurrent, resumable, in input order.

Every item becomes one record of `DIR/results.jsonl`, in input order. Each finished
record is also appended to `DIR/progress.jsonl` as soon as it exists, so a re-run (same
DIR) skips what was graded: the key is the task id, the sample id and a hash of the
response text (`Item.key`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
from typing import Any, Awaitable, Callable, Iterable, Sequence

from rcca_jax.bench.inputs import Item, error_record
from rcca_jax.bench.pages import Pages
from rcca_jax.data import jsonl
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import BrowserGone, PageCrashed

# Records with these statuses are final; others (judge unreachable, budget spent, a
# runner error) are graded again by a re-run.
FINAL = ("scored", "no_app", "unparseable", "bad_input")
PROGRESS = "progress.jsonl"

Grade = Callable[[Pages, Item], Awaitable[dict[str, Any]]]


async def _grade_guarded(grade: Grade, pages: Pages, item: Item) -> dict[str, Any]:
  """`grade`, retried once (on a rebuilt context) after a crash; errors become records."""
  for attempt in range(2):
    try:
      return await grade(pages, item)
    except (PageCrashed, BrowserGone) as e:
      if attempt:
        return error_record(item, f"the page crashed twice: {e}", "error")
    except Exception as e:  # pylint: disable=broad-except  # one item never ends the run
      return error_record(item, f"{type(e).__name__}: {e}"[:1000], "error")
  raise AssertionError("unreachable")


def read_progress(out_dir: str) -> dict[str, dict[str, Any]]:
  """Final records of earlier runs into OUT_DIR, by item key."""
  done: dict[str, dict[str, Any]] = {}
  path = os.path.join(out_dir, PROGRESS)
  if not os.path.exists(path):
    return done
  for line in jsonl.read_lines(path):
    if line.obj is not None and line.obj.get("status") in FINAL and "key" in line.obj:
      done[line.obj["key"]] = line.obj
  return done


def run(items: Sequence[Item], grade: Grade, *, out_dir: str, config: EvalConfig,
        workers: int) -> list[dict[str, Any]]:
  """Grades every item not already graded in OUT_DIR; returns records in input order."""
  os.makedirs(os.path.join(out_dir, "screenshots"), exist_ok=True)
  done = read_progress(out_dir)
  records: dict[int, dict[str, Any]] = {}
  todo: list[Item] = []
  for item in items:
    if item.error is not None:
      records[item.index] = error_record(item, item.error, "bad_input")
    elif item.key in done:
      records[item.index] = done[item.key]
    else:
      todo.append(item)
  if todo:
    with open(os.path.join(out_dir, PROGRESS), "a", encoding="utf-8") as progress:
      for item, record in _run_async(todo, grade, config, max(1, workers)):
        records[item.index] = record
        progress.write(json.dumps(record, ensure_ascii=False) + "\n")
        progress.flush()
  ordered = [records[item.index] for item in items]
  jsonl.write_lines(os.path.join(out_dir, "results.jsonl"), ordered)
  return ordered


def _run_async(todo: Sequence[Item], grade: Grade, config: EvalConfig, workers: int
               ) -> Iterable[tuple[Item, dict[str, Any]]]:
  """Grades `todo` with `workers` pages and up to 4 x `workers` gradings in flight;
  yields (item, record) as they finish."""
  loop = asyncio.new_event_loop()
  # Judge requests run in threads; the default pool (cores + 4) would cap them.
  loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(4 * workers + 4))
  finished: list[tuple[Item, dict[str, Any]]] = []

  async def main() -> None:
    pages = Pages(config, workers)
    in_flight = asyncio.Semaphore(4 * workers)

    async def one(item: Item) -> None:
      async with in_flight:
        finished.append((item, await _grade_guarded(grade, pages, item)))

    try:
      await asyncio.gather(*(one(item) for item in todo))
    finally:
      await pages.close()

  task = loop.create_task(main())
  try:
    while not task.done():
      loop.run_until_complete(asyncio.wait([task], timeout=0.2))
      while finished:
        yield finished.pop(0)
    task.result()
    while finished:
      yield finished.pop(0)
  finally:
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()
