"""Apps/s of the evaluator vs a naive harness, measured in the same run on the same apps.

  .venv/bin/python benchmarks/evaluator_throughput.py [--apps 20] [--workers 2] [--rounds 3]
  .venv/bin/python benchmarks/evaluator_throughput.py --profile
  .venv/bin/python benchmarks/evaluator_throughput.py --hang-locators none debugger [--rounds 3]
  .venv/bin/python benchmarks/evaluator_throughput.py --backend ray [--workers 2] [--rounds 3]
  .venv/bin/python benchmarks/evaluator_throughput.py --load-alternatives

Apps: the reference apps of data/examples (5 rubrics each), repeated to `--apps`.
- evaluator: `EvalPool` with N workers (warm: workers started before timing; the cold
  number includes start-up).
- naive: what public harnesses do: N processes, a fresh browser launch per app, a new
  page per rubric loaded with `set_content`, steps through Playwright's locator API
  (actionability checks), pass/fail only.
- floor: N processes, each loading an empty document on one reused page (the evaluator's
  own load), as many loads per app as the evaluator's plan has: the cost no evaluator can
  go under.
- least work: N processes, each doing on one reused page only the browser work the
  evaluator's verdicts need, with nothing of the evaluator (`least_work.py`): the most
  an evaluator with these semantics can reach on this machine.
The default run interleaves `--rounds` rounds (each: the floor, the evaluator and least
work at 1 and N workers, then the naive harness at N) and prints each round's ratios at
N workers, the medians of apps/s and of the ratios: evaluator / naive (target >= 10x on
2 cores), evaluator / floor (target >= 1/1.5), least work / naive and / floor, and
evaluator / least work; then the click cost and the profile below (`--profile` alone
prints only that). `--hang-locators none debugger` instead compares the warm evaluator's
apps/s under each `EvalConfig.hang_locator` (these apps do not hang: the cost of being
ready to locate a hang). `--backend ray` instead compares the warm apps/s of the process
pool and of Ray actors (`RayPool`, on a local Ray instance) at the same number of workers
(target: Ray within 15% of the pool). `--load-alternatives` instead prices the ways to
put an app in a fresh document (CPU per load, and what each keeps of the app before).
`--profile` runs in this process one evaluator, then the floor, the apps' own loads and
least work, and prints for each, per app, the DevTools commands sent and events received
(each crosses Python and Chromium) and the CPU time of each process kind (Linux /proc;
processes that exit meanwhile are missed).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import multiprocessing
import os
import pathlib
import re
import statistics
import time
from typing import Callable

from playwright.async_api import async_playwright

from rcca_jax.base.dsl import parse_check
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import browser
from rcca_jax.evaluation import cdp
from rcca_jax.evaluation import extract as extract_lib
from rcca_jax.evaluation import grader as grader_lib
from rcca_jax.evaluation.config import HANG_LOCATORS, EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator, plan_loads
from rcca_jax.evaluation.page_session import PageSession
from rcca_jax.evaluation.pool import Job, descendants
from rcca_jax.evaluation.rubric_runner import RubricRunner

import least_work  # benchmarks/ (this script's folder is on sys.path)

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "examples"
EMPTY_DOCUMENT = "<!DOCTYPE html><html></html>"


def _apps(n: int):
  tasks = [t for t in tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl") if t.reference]
  return [tasks[i % len(tasks)] for i in range(n)]


def _loads_per_app(task) -> int:
  """Page loads the evaluator needs (its plan, `evaluator.plan_loads`)."""
  return len(plan_loads(task, EvalConfig()))


# -- naive harness ---------------------------------------------------------------------
async def _naive_step(page, step) -> bool:
  sel = step.selector
  if step.verb == "click":
    await page.click(sel, timeout=5000)
  elif step.verb == "dblclick":
    await page.dblclick(sel, timeout=5000)
  elif step.verb == "hover":
    await page.hover(sel, timeout=5000)
  elif step.verb == "fill":
    await page.fill(sel, step.value, timeout=5000)
  elif step.verb == "select":
    await page.select_option(sel, step.value, timeout=5000)
  elif step.verb in ("check", "uncheck"):
    await (page.check if step.verb == "check" else page.uncheck)(sel, timeout=5000)
  elif step.verb == "press":
    if sel:
      await page.press(sel, step.value, timeout=5000)
    else:
      await page.keyboard.press(step.value)
  elif step.verb == "wait":
    await page.wait_for_timeout(step.value)
  else:
    return await _naive_expect(page, step)
  return True


async def _naive_expect(page, step) -> bool:
  loc = page.locator(step.selector).first if step.selector else None
  kind = step.expect
  if kind == "exists":
    return await page.locator(step.selector).count() > 0
  if kind == "visible":
    return await loc.is_visible()
  if kind == "hidden":
    return await loc.is_hidden()
  if kind == "count":
    n = await page.locator(step.selector).count()
    return eval(f"{n} {step.op} {step.value}")  # noqa: S307 - CMP from the DSL grammar
  if kind == "js":
    return bool(await page.evaluate(step.value))
  if kind == "no_errors":
    return True
  if kind == "text":
    observed = " ".join((await loc.inner_text(timeout=5000)).split())
  elif kind == "value":
    observed = await loc.input_value(timeout=5000)
  elif kind == "attr":
    observed = await loc.get_attribute(step.name, timeout=5000) or ""
  elif kind == "style":
    observed = await loc.evaluate("(e, p) => getComputedStyle(e).getPropertyValue(p)", step.name)
    expected = await page.evaluate("""([p, v]) => { const d = document.createElement('div');
        d.style.setProperty(p, v); document.body.appendChild(d);
        const c = getComputedStyle(d).getPropertyValue(p); d.remove(); return c; }""",
                                   [step.name, step.value])
    return observed in (step.value, expected)
  elif kind == "number":
    m = re.search(r"-?\d+(\.\d+)?", await loc.inner_text(timeout=5000))
    return bool(m) and eval(f"{float(m.group(0))} {step.op} {step.value}")  # noqa: S307
  else:
    return False
  if step.op == "==":
    return observed == step.value
  if step.op == "contains":
    return step.value in observed
  if step.op == "matches":
    return re.search(step.value, observed) is not None
  return observed != step.value


async def _naive_app(pw, task) -> int:
  """Fresh browser per app, new page per rubric; returns the number of passed rubrics."""
  b = await pw.chromium.launch(executable_path=browser.find_chromium(),
                               args=browser.launch_args(256))
  passed = 0
  try:
    for rubric in task.rubrics:
      if not rubric.steps:
        continue
      page = await b.new_page()
      await page.route("**/*", lambda route: route.abort())
      await page.set_content(task.reference, timeout=10000)
      ok = True
      for step in rubric.steps:
        try:
          ok = await _naive_step(page, step)
        except Exception:  # pylint: disable=broad-except
          ok = False
        if not ok:
          break
      passed += ok
      await page.close()
  finally:
    await b.close()
  return passed


def _naive_worker(task_ids: list[str]) -> list[int]:
  tasks = {t.id: t for t in tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl")}

  async def go():
    async with async_playwright() as pw:
      return [await _naive_app(pw, tasks[tid]) for tid in task_ids]
  return asyncio.run(go())


def naive(apps, workers: int) -> tuple[float, list[int]]:
  ctx = multiprocessing.get_context("spawn")
  chunks = [[t.id for t in apps[i::workers]] for i in range(workers)]
  with ctx.Pool(workers) as pool:
    pool.map(_naive_worker, [[apps[0].id]] * workers)  # warm imports, as for the evaluator
    start = time.monotonic()
    results = pool.map(_naive_worker, chunks)
    seconds = time.monotonic() - start
  return seconds, [n for r in results for n in r]


# -- this evaluator ----------------------------------------------------------------------
def evaluator(apps, workers: int, config: EvalConfig | None = None, backend: str = "pool"
              ) -> tuple[float, float, list[dict]]:
  cold_start = time.monotonic()
  pool = grader_lib.make_grader(config or EvalConfig(), workers=workers, backend=backend)
  try:
    list(pool.run([Job(t, f"```html\n{t.reference}\n```", 0) for t in apps[:workers]]))
    cold = time.monotonic() - cold_start
    start = time.monotonic()
    records = list(pool.run([Job(t, f"```html\n{t.reference}\n```", i)
                             for i, t in enumerate(apps)]))
    seconds = time.monotonic() - start
  finally:
    pool.close()
  return seconds, cold + seconds, records


def backend_cost(apps, workers: int, rounds: int) -> None:
  """Warm apps/s of the process pool and of Ray actors, rounds interleaved (one local
  Ray instance for all rounds), and the ratio Ray / pool."""
  import ray  # pylint: disable=import-outside-toplevel
  ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
  rates: dict[str, list[float]] = {"pool": [], "ray": []}
  try:
    for _ in range(rounds):
      for backend in rates:
        seconds, cold, _ = evaluator(apps, workers, backend=backend)
        rates[backend].append(len(apps) / seconds)
        print(f"{backend:<4}: {len(apps) / seconds:6.2f} apps/s warm "
              f"({cold - seconds:.1f}s start-up)", flush=True)
  finally:
    ray.shutdown()
  pool, remote = (statistics.median(rates[k]) for k in ("pool", "ray"))
  print(f"median of {rounds}: pool {pool:.2f} apps/s, ray {remote:.2f} apps/s, "
        f"ray / pool {remote / pool:.3f} (target >= 0.85)")


def _floor_worker(n: int, barrier, out) -> None:
  async def go():
    s = PageSession(EvalConfig())
    await s.start()
    try:
      await s.load(EMPTY_DOCUMENT)
      barrier.wait()
      start = time.monotonic()
      for _ in range(n):
        await s.load(EMPTY_DOCUMENT)
      return start, time.monotonic()
    finally:
      await s.close()
  out.put(asyncio.run(go()))


def _all_at_once(target, args: list[tuple]) -> float:
  """Runs `target(*a, barrier, out)` in one process per `a`, all released together by the
  barrier; each puts the (start, end) of its timed part. Seconds from the first start to
  the last end (CLOCK_MONOTONIC is system-wide)."""
  ctx = multiprocessing.get_context("spawn")
  barrier, out = ctx.Barrier(len(args)), ctx.Queue()
  procs = [ctx.Process(target=target, args=(*a, barrier, out)) for a in args]
  for p in procs:
    p.start()
  spans = [out.get(timeout=300) for _ in procs]
  for p in procs:
    p.join()
  return max(e for _, e in spans) - min(s for s, _ in spans)


def empty_page_floor(workers: int, n: int = 40) -> float:
  """Empty-document loads per second of `workers` processes, each loading on one reused
  page, all at once."""
  return workers * n / _all_at_once(_floor_worker, [(n,)] * workers)


def least_work_rate(apps, workers: int) -> float:
  """Apps/s of `least_work` (the browser work the evaluator's verdicts need, nothing else)
  in `workers` processes, each with one reused page and its share of the apps, all at
  once."""
  examples = str(EXAMPLES / "tasks.jsonl")
  return len(apps) / _all_at_once(least_work.worker, [
      ([t.id for t in apps[i::workers]], examples) for i in range(workers)])


def click_cost(n: int = 20) -> tuple[float, float]:
  """Seconds per click on a freshly loaded page: Playwright's `page.click` (actionability
  checks; its own browser, the app served on a fresh origin per load) vs the evaluator's
  one DOM read + trusted mouse event."""
  app = ('<button id="b">go</button><p id="o">0</p><script>document.getElementById("b")'
         '.onclick = () => { document.getElementById("o").textContent = "1"; };</script>')

  async def playwright_clicks() -> float:
    async with async_playwright() as pw:
      b = await pw.chromium.launch(executable_path=browser.find_chromium(),
                                   args=browser.launch_args(EvalConfig().js_heap_mb))
      try:
        page = await b.new_page()
        await page.route("**/*", lambda route: route.fulfill(
            status=200, content_type="text/html", body=app))
        total = 0.0
        for k in range(n):
          await page.goto(f"http://app-{k}.rcca.invalid/")
          start = time.monotonic()
          await page.click("#b")
          total += time.monotonic() - start
        return total / n
      finally:
        await b.close()

  async def evaluator_clicks() -> float:
    s = PageSession(EvalConfig())
    await s.start()
    runner = RubricRunner(s)
    steps = parse_check('click "#b"')
    try:
      total = 0.0
      for _ in range(n):
        await s.load(app)
        start = time.monotonic()
        await runner.run(steps, "core")
        total += time.monotonic() - start
      return total / n
    finally:
      await s.close()
  return asyncio.run(playwright_clicks()), asyncio.run(evaluator_clicks())


def hang_locator_cost(apps, workers: int, kinds, rounds: int) -> None:
  """Warm evaluator apps/s (these apps do not hang) per `hang_locator`, rounds interleaved;
  ratios to the first setting."""
  rates = {k: [] for k in kinds}
  for _ in range(rounds):
    for kind in kinds:
      seconds, _, _ = evaluator(apps, workers, EvalConfig(hang_locator=kind))
      rates[kind].append(len(apps) / seconds)
  base = statistics.median(rates[kinds[0]])
  for kind in kinds:
    rate = statistics.median(rates[kind])
    print(f"hang_locator={kind:<9}: {rate:6.2f} apps/s (median of {rounds}: "
          f"{', '.join(f'{r:.2f}' for r in rates[kind])}), {rate / base:.3f}x {kinds[0]}")


# -- profile -----------------------------------------------------------------------------
def _cpu_seconds_by_process() -> collections.Counter:
  """CPU seconds so far of this process and of each kind of descendant process."""
  out: collections.Counter = collections.Counter({"python": time.process_time()})
  tick = os.sysconf("SC_CLK_TCK")
  for pid in descendants(os.getpid()):
    try:
      with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
      with open(f"/proc/{pid}/cmdline", encoding="utf-8", errors="replace") as f:
        command = f.read().replace("\0", " ")  # Chromium rewrites its children's titles
    except OSError:
      continue
    kind_arg = re.search(r"--type=(\S+)", command)
    kind = ("playwright driver" if os.path.basename(command.split(" ")[0]).startswith("node")
            else f"chromium {kind_arg.group(1) if kind_arg else 'browser'}")
    out[kind] += (int(fields[11]) + int(fields[12])) / tick
  return out


@contextlib.contextmanager
def _counting_cdp_messages():
  """Counts the DevTools commands sent and events received (in this process) meanwhile;
  each crosses Python and Chromium."""
  calls: collections.Counter = collections.Counter()
  events: collections.Counter = collections.Counter()
  send, handle = cdp.Connection.send, cdp.Connection._handle  # pylint: disable=protected-access

  def counting_send(self, method, params, session_id):
    calls[method] += 1
    return send(self, method, params, session_id)

  def counting_handle(self, message):
    if "id" not in message:
      events[message.get("method", "")] += 1
    return handle(self, message)

  cdp.Connection.send, cdp.Connection._handle = counting_send, counting_handle
  try:
    yield calls, events
  finally:
    cdp.Connection.send, cdp.Connection._handle = send, handle


def _measured(run: Callable[[], None], n: int, what: str) -> None:
  """Runs `run` (n apps) and prints, per app: time, CDP commands and events, CPU by process."""
  with _counting_cdp_messages() as (calls, events):
    cpu_before, start = _cpu_seconds_by_process(), time.monotonic()
    run()
    seconds, cpu = time.monotonic() - start, _cpu_seconds_by_process()
  cpu.subtract(cpu_before)
  print(f"{what}: {seconds / n * 1000:.0f} ms per app, {sum(calls.values()) / n:.1f} CDP "
        f"commands and {sum(events.values()) / n:.1f} CDP events per app")
  print("  calls per app : " + ", ".join(f"{k} {v / n:.2f}" for k, v in calls.most_common()))
  print("  events per app: " + ", ".join(f"{k} {v / n:.2f}" for k, v in events.most_common()))
  print(f"  CPU ms per app: {sum(cpu.values()) / n * 1000:.0f} = " + ", ".join(
      f"{k} {v / n * 1000:.0f}" for k, v in cpu.most_common() if v > 0))


def profile(apps) -> None:
  """In this process, one evaluator, then the floor (as many empty loads per app as the
  evaluator's plan has), as many loads of the apps themselves, and least work: CDP
  commands, CDP events and CPU, all per app."""
  jobs = [(t, f"```html\n{t.reference}\n```") for t in apps]
  # One context throughout: recycling it replaces the renderer, whose CPU /proc then misses.
  ev = Evaluator(EvalConfig(recycle_context_after=len(apps) + 2))
  try:
    for task, response in jobs[:2]:  # warm: browser, first loads
      ev.evaluate(task, response, 0)
    _measured(lambda: [ev.evaluate(t, r, i) for i, (t, r) in enumerate(jobs)], len(apps),
              "profile, one in-process evaluator")
  finally:
    ev.close()
  loads = sum(_loads_per_app(t) for t in apps)
  loop, session = asyncio.new_event_loop(), PageSession(EvalConfig())
  try:
    loop.run_until_complete(session.start())
    loop.run_until_complete(session.load(EMPTY_DOCUMENT))  # warm
    _measured(lambda: [loop.run_until_complete(session.load(EMPTY_DOCUMENT))
                       for _ in range(loads)], len(apps),
              f"profile, floor ({loads / len(apps):.1f} empty loads per app)")
    # Between the two: what loading the apps themselves costs, with no rubric run.
    html = [extract_lib.extract_app(response).html for _, response in jobs]
    _measured(lambda: [loop.run_until_complete(session.load(h)) for t, h in zip(apps, html)
                       for _ in range(_loads_per_app(t))], len(apps),
              "profile, the apps' own loads (as many, no rubric run)")
    _measured(lambda: [loop.run_until_complete(least_work.run_app(session, t, h))
                       for t, h in zip(apps, html)], len(apps),
              "profile, least work (the browser work the verdicts need, nothing else)")
  finally:
    loop.run_until_complete(session.close())
    loop.close()


# -- ways to put an app in a fresh document ---------------------------------------------
# What each keeps from the app before (checked on each load: a global, localStorage).
_LEAK_PROBE = """(() => { let storage;
  try { storage = localStorage.getItem('k'); localStorage.setItem('k', 'x'); }
  catch (e) { storage = 'throws'; }
  const global = window.__leak || null; window.__leak = 'x';
  return JSON.stringify({global, storage}); })()"""


async def _wait_event(session, event: str, start) -> None:
  """Awaits `start()`, then the page's next `event`."""
  done = asyncio.get_running_loop().create_future()

  def on(_):
    if not done.done():
      done.set_result(None)
  session.cdp.on(event, on)
  try:
    await start()
    await asyncio.wait_for(done, 5)
  finally:
    session.cdp.remove_listener(event, on)


async def _load_alternatives(n: int) -> None:
  """CPU per load (all processes, /proc) and wall time of each way to put the app in a
  fresh document, each followed by the same settle (one frame and a timer turn), and
  what the document still sees of the one before. The CPU of processes that exit
  meanwhile (the renderers of closed contexts) is missed: the last way's is a lower bound."""
  task = next(t for t in tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl") if t.reference)
  html = task.reference
  session = PageSession(EvalConfig())
  await session.start()
  data_url = "data:text/html;base64," + base64.b64encode(html.encode()).decode()

  async def served():      # the evaluator's load: a new fake origin served through Fetch
    await session.load(html)

  async def data_document():
    await _wait_event(session, "Page.loadEventFired", lambda: session.cdp.send(
        "Page.navigate", {"url": data_url, "frameId": session.frame_id}))
    await session.js("() => 0", settle_first=True)

  async def set_content():  # replaces the document of the current window
    await session.cdp.send("Page.setDocumentContent", {
        "frameId": session.frame_id, "html": html})
    await session.js("() => 0", settle_first=True)

  async def new_page():     # a new context and page, then the evaluator's load
    await session.reset()
    await session.load(html)

  ways = {"served by Fetch (the evaluator's)": served, "data: URL": data_document,
          "Page.setDocumentContent": set_content, "new context + page": new_page}
  try:
    for name, load in ways.items():
      await served()
      await load()
      leaks = []
      cpu_before, start = _cpu_seconds_by_process(), time.monotonic()
      for _ in range(n):
        await load()
        res = await session.cdp.send("Runtime.evaluate", {"expression": _LEAK_PROBE,
                                                          "returnByValue": True})
        leaks.append(res["result"]["value"])
      seconds, cpu = time.monotonic() - start, _cpu_seconds_by_process()
      cpu.subtract(cpu_before)
      print(f"{name:<34}: {seconds / n * 1000:6.1f} ms, CPU {sum(cpu.values()) / n * 1000:5.1f}"
            f" ms per load; the document before left: {collections.Counter(leaks[1:]).most_common(1)[0][0]}")
  finally:
    await session.close()


def compare(apps, workers: int, rounds: int) -> None:
  """The default run: `rounds` rounds, each measuring one after another the floor, the
  evaluator and least work at 1 and `workers` workers, then the naive harness at
  `workers`; a line per round, then the medians, the ratios' medians and the click cost.
  A round takes about half a minute: on a noisy machine one short run says little."""
  rubrics = sum(len(t.rubrics) for t in apps) / len(apps)
  loads = sum(_loads_per_app(t) for t in apps) / len(apps)
  checked = sum(sum(1 for r in t.rubrics if r.steps) for t in apps)
  print(f"{len(apps)} apps, {rubrics:.1f} rubrics per app, {loads:.1f} loads per app, "
        f"{workers} workers, {multiprocessing.cpu_count()} CPUs, {browser.find_chromium()}")
  counts = sorted({1, workers})
  rates: dict[tuple[str, int], list[float]] = collections.defaultdict(list)  # apps/s
  ratios: dict[str, list[float]] = collections.defaultdict(list)
  for r in range(rounds):
    for w in counts:
      rates["floor", w].append(empty_page_floor(w) / loads)  # at the evaluator's loads
      seconds, cold, records = evaluator(apps, w)
      rates["evaluator", w].append(len(apps) / seconds)
      rates["evaluator, cold", w].append(len(apps) / cold)
      rates["least work", w].append(least_work_rate(apps, w))
    nv_s, nv_passed = naive(apps, workers)
    rates["naive", workers].append(len(apps) / nv_s)
    now = {k: v[-1] for k, v in rates.items()}
    for name, a, b in (("evaluator / naive", "evaluator", "naive"),
                       ("evaluator / floor", "evaluator", "floor"),
                       ("least work / naive", "least work", "naive"),
                       ("least work / floor", "least work", "floor"),
                       ("evaluator / least work", "evaluator", "least work")):
      ratios[name].append(now[a, workers] / now[b, workers])
    print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in ratios.items())
          + f" (apps/s at {workers} workers: " + ", ".join(
              f"{k} {now[k, workers]:.2f}" for k in ("floor", "evaluator", "least work", "naive"))
          + ")", flush=True)
  ev_passed = sum(sum(x["passed"] is True for x in rec["rubrics"]) for rec in records)
  print(f"rubrics passed in the last round: evaluator {ev_passed}/{checked}, naive "
        f"{sum(nv_passed)}/{checked}")
  for (what, w), v in rates.items():
    print(f"{what:<16} {w} worker(s): {statistics.median(v):6.2f} apps/s (median of "
          f"{', '.join(f'{x:.2f}' for x in v)})")
  print("floor: empty-document loads per second / the evaluator's loads per app; least "
        "work: the browser work these verdicts need, nothing else (least_work.py)")
  med = {k: statistics.median(v) for k, v in ratios.items()}
  print(f"medians over {rounds} rounds at {workers} workers: evaluator / naive "
        f"{med['evaluator / naive']:.1f}x (target >= 10x), evaluator / floor "
        f"{med['evaluator / floor']:.2f} (target >= 0.67); the most any evaluator with these "
        f"verdicts reaches here (least work): {med['least work / naive']:.1f}x naive, "
        f"{med['least work / floor']:.2f} of the floor; evaluator / least work "
        f"{med['evaluator / least work']:.2f}")
  pw_click, ev_click = click_cost()
  print(f"click on a fresh page: Playwright page.click {pw_click * 1000:.1f} ms, evaluator "
        f"{ev_click * 1000:.1f} ms (incl. a settle frame)")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--apps", type=int, default=20)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--profile", action="store_true",
                      help="profile one in-process evaluator instead of comparing")
  parser.add_argument("--hang-locators", nargs="+", choices=HANG_LOCATORS,
                      help="instead, compare the evaluator's apps/s under these settings "
                           "(the first is the baseline)")
  parser.add_argument("--rounds", type=int, default=3,
                      help="rounds, interleaved; medians are reported")
  parser.add_argument("--load-alternatives", action="store_true",
                      help="instead, price the ways to put an app in a fresh document")
  parser.add_argument("--backend", choices=["ray"],
                      help="instead, compare the process pool with this backend")
  args = parser.parse_args()
  apps = _apps(args.apps)
  if args.profile:
    profile(apps)
    return
  if args.hang_locators:
    hang_locator_cost(apps, args.workers, args.hang_locators, args.rounds)
    return
  if args.load_alternatives:
    asyncio.run(_load_alternatives(40))
    return
  if args.backend:
    backend_cost(apps, args.workers, args.rounds)
    return
  compare(apps, args.workers, args.rounds)
  profile(apps)


if __name__ == "__main__":
  main()
