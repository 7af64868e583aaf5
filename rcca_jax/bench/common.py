"""Shared parts of the benchmark runners: inputs, browser workers, screenshots, the judge
client with its limits, resumable ordered output and summaries.

A run reads a task file (the benchmark's own file, converted by `data/artifactsbench.py`
or `data/miniappbench.py`, or a task file of docs/contracts.md#1-task-file) and a
responses file (docs/contracts.md#3-responses-file; without one, the answers embedded in
the benchmark file). Every response becomes one record of `DIR/results.jsonl`, in input
order. Each finished record is also appended to
`DIR/progress.jsonl` as soon as it exists, so a re-run (same DIR) skips what was graded:
the key is the task id, the sample id and a hash of the response text.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

from rcca_jax.data import artifactsbench as artifactsbench_data
from rcca_jax.data import bench_common
from rcca_jax.data import jsonl
from rcca_jax.data import miniappbench as miniappbench_data
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import (BrowserGone, CallTimeout, JsError, PageCrashed,
                                              PageSession)

LOADERS = {"artifactsbench": artifactsbench_data.load, "miniappbench": miniappbench_data.load}
MIN_VIEWPORT = (1024, 768)
# Records with these statuses are final; others (judge unreachable, budget spent, a
# runner error) are graded again by a re-run.
FINAL = ("scored", "no_app", "unparseable", "bad_input")
PROGRESS = "progress.jsonl"


class InputError(ValueError):
  """A task file that cannot be used; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Item:
  """One response line to grade; `error` is set for a line that cannot be graded."""

  index: int
  task_id: str
  sample_id: int
  response: str
  task: tasks_lib.Task | None
  error: str | None = None

  @property
  def key(self) -> str:
    digest = hashlib.sha1(self.response.encode("utf-8", "replace")).hexdigest()[:16]
    return f"{self.task_id}\t{self.sample_id}\t{digest}"

  def base_record(self) -> dict[str, Any]:
    """The fields every record of this item starts with."""
    task = self.task
    return {"task_id": self.task_id, "sample_id": self.sample_id,
            "category": task.category if task else None,
            "difficulty": task.difficulty if task else None, "key": self.key}


def load_tasks(path: str, benchmark: str) -> tuple[list[tasks_lib.Task], dict[str, str],
                                                   list[str]]:
  """Tasks, embedded answers and warnings of a benchmark file or a project task file.

  A project task file (docs/contracts.md#1-task-file; first record has `request` and
  `rubrics`) must validate as a whole (TaskFileError otherwise); a benchmark file keeps
  every item it can read and lists what it could not as `FILE:LINE: what` warnings.
  """
  first = next(iter(bench_common.read_records(path)), None)
  if first is None:
    raise InputError(f"{path}: no tasks in the file")
  _, obj, _ = first
  if isinstance(obj, dict) and "request" in obj and "rubrics" in obj:
    return tasks_lib.load_tasks(path), {}, []
  loaded = LOADERS[benchmark](path)
  if not loaded.tasks:
    raise InputError("\n".join(loaded.problems + [f"{path}: no usable {benchmark} task"]))
  return loaded.tasks, loaded.answers, loaded.problems


def load_items(tasks: Sequence[tasks_lib.Task], responses_path: str | None,
               answers: Mapping[str, str]) -> list[Item]:
  """One item per response line (or per embedded answer when there is no file)."""
  by_id = {t.id: t for t in tasks}
  if responses_path is None:
    return [Item(i, t.id, 0, answers[t.id], t)
            for i, t in enumerate(t for t in tasks if t.id in answers)]
  items = []
  for i, line in enumerate(responses_lib.load_responses(responses_path)):
    if isinstance(line, responses_lib.BadResponseLine):
      items.append(Item(i, line.task_id or "", line.sample_id if line.sample_id is not None
                        else -1, "", by_id.get(line.task_id or ""), line.error))
    elif line.task_id not in by_id:
      items.append(Item(i, line.task_id, line.sample_id, line.response, None,
                        f"{responses_path}:{line.line}: unknown task id {line.task_id!r}"))
    else:
      items.append(Item(i, line.task_id, line.sample_id, line.response, by_id[line.task_id]))
  return items


def error_record(item: Item, error: str, status: str) -> dict[str, Any]:
  return {**item.base_record(), "score": None, "status": status, "error": error}


# -- the judge ------------------------------------------------------------------------
class JudgeError(RuntimeError):
  """No usable reply: the server failed after the retries, or the budget is spent."""


class BudgetSpent(JudgeError):
  """The run's judge request budget is used up."""


@dataclasses.dataclass
class ChatJudge:
  """An OpenAI-compatible chat endpoint with bounded retries and a request budget.

  `retries`: extra tries after a transport failure (HTTP error, timeout, bad body),
  with exponential back-off; `max_requests`: requests for the whole run (0 = no limit);
  when spent, the remaining responses stay ungraded (a re-run grades them).
  """

  base_url: str
  model: str
  timeout: float = 120.0
  retries: int = 2
  max_requests: int = 0
  max_tokens: int = 2048
  temperature: float = 0.0
  api_key: str | None = None
  requests: int = 0               # sent so far in this run

  @property
  def url(self) -> str:
    return judge_lib.chat_url(self.base_url)

  def payload(self, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens, **extra}

  async def complete(self, payload: dict[str, Any], usage: collections.Counter
                     ) -> dict[str, Any]:
    """The reply message; counts requests and tokens into `usage`; raises BudgetSpent,
    or JudgeError after the last retry."""
    error = ""
    for attempt in range(self.retries + 1):
      if self.max_requests and self.requests >= self.max_requests:
        raise BudgetSpent(f"judge request budget of {self.max_requests} spent")
      self.requests += 1
      usage["requests"] += 1
      try:
        body = await asyncio.to_thread(judge_lib.post_chat, self.url, payload,
                                       timeout=self.timeout, api_key=self.api_key)
        message = body["choices"][0]["message"]
        if not isinstance(message, dict):
          raise TypeError("the reply's message is not an object")
      except judge_lib.TRANSPORT_ERRORS as e:
        error = f"{type(e).__name__}: {e}"
        if attempt < self.retries:
          await asyncio.sleep(min(0.5 * 2 ** attempt, 8.0))
        continue
      for name in ("prompt_tokens", "completion_tokens"):
        value = (body.get("usage") or {}).get(name)
        if isinstance(value, int):
          usage[name] += value
      return message
    raise JudgeError(f"judge unavailable after {self.retries + 1} tries: {error}"[:500])


def image_part(png_b64: str) -> dict[str, Any]:
  """An OpenAI-style image content part holding a PNG."""
  return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64}"}}


# -- browser workers and screenshots --------------------------------------------------
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


def file_stem(item: Item) -> str:
  """A file-name-safe stem for an item's screenshots."""
  safe = re.sub(r"[^A-Za-z0-9._-]+", "_", item.task_id)[:80] or "task"
  return f"{safe}_s{item.sample_id}_{item.key[-8:]}"


@dataclasses.dataclass
class Shots:
  paths: list[str]                 # relative to the output folder
  png_b64: list[str]
  load_error: str | None = None
  errors: list[str] = dataclasses.field(default_factory=list)


async def screenshot(session: PageSession) -> str:
  """One full-viewport PNG of the page (base64), with the session's step deadline."""
  shot = await session.call(session.cdp.send("Page.captureScreenshot", {"format": "png"}),
                            "screenshot")
  return shot["data"]


def write_png(out_dir: str, rel: str, png_b64: str) -> None:
  """Writes a base64 PNG to OUT_DIR/REL (the folder is created when missing)."""
  path = os.path.join(out_dir, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(base64.b64decode(png_b64))


async def take_screenshots(session: PageSession, html: str, *, count: int, interval: float,
                           out_dir: str, stem: str) -> Shots:
  """Loads `html` on a fresh origin and takes `count` screenshots `interval` s apart,
  the first once the page has loaded and settled; files go to OUT_DIR/screenshots/."""
  await session.begin_app()
  load = await session.load(html)
  shots = Shots([], [], None if load.ok else load.reason)
  start = time.monotonic()
  for k in range(count):
    delay = start + k * interval - time.monotonic()
    if delay > 0:
      await asyncio.sleep(delay)
    try:
      data = await screenshot(session)
    except (CallTimeout, JsError) as e:
      shots.errors.append(f"screenshot {k + 1}: {e}")
      continue
    rel = f"screenshots/{stem}_{k + 1}.png"
    write_png(out_dir, rel, data)
    shots.paths.append(rel)
    shots.png_b64.append(data)
  return shots


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


# -- summaries ----------------------------------------------------------------------
def mean(values: Sequence[float]) -> float | None:
  return sum(values) / len(values) if values else None


def grouped(records: Sequence[Mapping[str, Any]], field: str,
            value: Callable[[Mapping[str, Any]], dict[str, float]]) -> dict[str, dict[str, Any]]:
  """Per value of `field` (unset -> "unknown"): `n` and the mean of each metric."""
  groups: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
  for r in records:
    groups[str(r.get(field) or "unknown")].append(value(r))
  return {name: {"n": len(rows), **{k: mean([row[k] for row in rows]) for k in rows[0]}}
          for name, rows in sorted(groups.items())}


def counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  c = collections.Counter(r["status"] for r in records)
  return {"responses": len(records), **dict(sorted(c.items()))}


def usage_total(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  total: collections.Counter = collections.Counter()
  for r in records:
    total.update(r.get("usage") or {})
  return dict(total)


def _fmt(value: Any) -> str:
  if isinstance(value, float):
    return f"{value:.2f}"
  return "–" if value is None else str(value)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
  return "\n".join(lines)


def summary_markdown(title: str, summary: Mapping[str, Any], metrics: Sequence[str]) -> str:
  """`summary.md`: the overall numbers, then one table per grouping, then the counts."""
  parts = [f"# {title}", "",
           markdown_table(["metric", "value"],
                          [(k, summary[k]) for k in metrics if k in summary])]
  for key, label in (("by_category", "category"), ("by_difficulty", "difficulty")):
    groups = summary.get(key) or {}
    if groups:
      cols = list(next(iter(groups.values())))
      parts += ["", f"## By {label}", "",
                markdown_table([label, *cols], [(g, *(v[c] for c in cols))
                                                for g, v in groups.items()])]
  for key in ("rubrics",):
    if summary.get(key):
      parts += ["", "## RCCA rubric evaluator (same tasks)", "",
                markdown_table(["group", "n", "reward_mean", "pass_rate"],
                               [(g, v["n"], v["reward_mean"], v["pass_rate"])
                                for g, v in summary[key].items()])]
  parts += ["", "## Counts", "", markdown_table(["status", "n"], summary["counts"].items())]
  if summary.get("usage"):
    parts += ["", "## Judge usage", "", markdown_table(["", "n"], summary["usage"].items())]
  return "\n".join(parts) + "\n"


def write_summary(out_dir: str, summary: Mapping[str, Any], title: str,
                  metrics: Sequence[str]) -> None:
  with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1, ensure_ascii=False)
  with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
    f.write(summary_markdown(title, summary, metrics))


def warn(lines: Iterable[str]) -> None:
  for line in lines:
    print(f"warning: {line}", file=sys.stderr)
