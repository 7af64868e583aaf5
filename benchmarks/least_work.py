"""The least browser work the evaluator's verdicts need: a yardstick between it and the floor.

`evaluator_throughput.py` compares the evaluator with an empty-page floor, which no
evaluator can reach: the apps must be loaded and acted on. This module runs, for each
app, only what the evaluator's rubric semantics make the browser do, with nothing of the
evaluator itself (no verdicts, evidence, records or bookkeeping):
- the same loads (`evaluator.plan_loads`), each the evaluator's own `PageSession.load`;
- per action one DOM call (the settle the previous action is owed and locating the
  target; fill, select and press do their DOM part in it too, or in a call of their own
  when a settle was owed, so that what happens in it stays theirs), then its input events;
- per run of expectations one DOM call (with the settle owed), with no element facts, and
  the style probe only where a computed value does not decide its comparison; a wait or
  key press without a target settles first, as the runner does.
Its apps/s is what an evaluator with these semantics could reach on this machine, so
evaluator / least work is how close the evaluator is, and least work / floor the most any
evaluator can be of the floor.
"""

# It runs the rubric runner's own page scripts, which are private to it.
# pylint: disable=protected-access
from __future__ import annotations

import asyncio
import time
from typing import Any, Sequence

from rcca_jax.evaluation import actions
from rcca_jax.evaluation import extract as extract_lib
from rcca_jax.evaluation import rubric_runner
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import plan_loads, shares_load
from rcca_jax.evaluation.page_session import PageSession

# Reads what a run of expectations compares, and nothing else.
_READS_JS = """(reads) => reads.map(([sel, kind, name]) => {
  const els = document.querySelectorAll(sel), el = els[0];
  if (kind === 'count') return els.length;
  if (!el) return null;
  const r = el.getBoundingClientRect(), st = getComputedStyle(el);
  const visible = r.width > 0 && r.height > 0 && st.visibility !== 'hidden' &&
      st.display !== 'none' && parseFloat(st.opacity || '1') > 0;
  if (kind === 'visible' || kind === 'hidden') return visible;
  if (kind === 'text' || kind === 'number') return el.innerText;
  if (kind === 'value') return String(el.value);
  if (kind === 'attr') return el.getAttribute(name);
  if (kind === 'style') return st.getPropertyValue(name);
  return true;
})"""


class _Run:
  """One app's steps on one session; `owed`: an action's settle is still to be done;
  `values`: what the expectations read, in order."""

  def __init__(self, session: PageSession):
    self.s, self.owed = session, False
    self.values: list[Any] = []

  async def _dom(self, fn: str, *args: Any) -> Any:
    owed, self.owed = self.owed, False
    return await self.s.js(fn, *args, settle_first=owed)

  async def _settle(self) -> None:
    if self.owed:
      await self._dom("() => null")

  async def _read(self, steps: Sequence[Any]) -> None:
    """One call for the run of expectations; a style value that does not decide its
    comparison is read again with the probe (`rubric_runner`)."""
    values = await self._dom(_READS_JS, [[s.selector, s.expect, s.name] for s in steps])
    for step, value in zip(steps, values):
      if rubric_runner._needs_probe(step, {"found": value is not None, "value": value}):
        await self.s.js(rubric_runner._READ_JS, *rubric_runner._read_args(step))
    self.values += values

  async def steps(self, steps: Sequence[Any]) -> None:
    reads: list[Any] = []
    for step in [*steps, None]:
      if step is not None and step.verb == "expect" and step.expect not in ("js", "no_errors"):
        reads.append(step)
        continue
      if reads:
        await self._read(reads)
        reads = []
      if step is None:
        break
      if step.verb == "expect":
        await self._settle()
        if step.expect == "js":
          await self.s.js(f"async () => !!(await ({step.value}))", main_world=True)
      elif step.verb == "wait":
        await self._settle()
        await asyncio.sleep(float(step.value) / 1000)
      elif step.verb == "press" and step.selector is None:
        await self._settle()
        await self.s.keyboard.press(step.value)
      else:
        await self._act(step)
    await self._settle()

  async def _act(self, step: Any) -> None:
    # As the runner does: the DOM part goes with the locate unless a settle is owed (an
    # exception or hang during the settle is the previous action's).
    sel, verb, rr = step.selector, step.verb, rubric_runner
    opts = {"useLabel": verb in ("check", "uncheck")}
    part, owed = verb in rr._PREPARED, self.owed
    if part and not owed:
      t = await self._dom(rr._LOCATE_AND_PREPARE_JS, sel, opts, verb, step.value)
    else:
      t = await self._dom(actions.LOCATE_TARGET_JS, sel, opts)
    if not (t.get("found") and t["visible"] and not t["covered"]
            and (verb == "hover" or not t["disabled"])):
      raise RuntimeError(f"least work: cannot {step} on this reference app: {t}")
    if part and owed:
      if verb == "fill" and t["type"] in actions.VALUE_SET_INPUTS:
        await self.s.js(rr._SET_VALUE_JS, sel, step.value)
      elif verb == "fill":
        await self.s.js(rr._FOCUS_SELECT_JS, sel)
      elif verb == "select":
        await self.s.js(rr._SELECT_JS, sel, step.value)
      else:
        await self.s.js(rr._FOCUS_JS, sel)
    self.owed = True
    mouse, keyboard, xy = self.s.mouse, self.s.keyboard, (t["x"], t["y"])
    if step.verb == "click":
      await mouse.click(*xy)
    elif step.verb == "dblclick":
      await mouse.dblclick(*xy)
    elif step.verb == "hover":
      await mouse.move(*xy)
    elif step.verb in ("check", "uncheck") and t["checked"] != (step.verb == "check"):
      await mouse.click(*xy)
    elif step.verb == "fill" and t["type"] not in actions.VALUE_SET_INPUTS:
      await (keyboard.insert_text(step.value) if step.value else keyboard.press("Delete"))
    elif step.verb == "press":
      await keyboard.press(step.value)


async def run_app(session: PageSession, task, html: str) -> list[list[Any]]:
  """Every load of the app's plan, and on each its rubrics' steps: the read-only rubrics
  that share the load read together, first, as the evaluator reads them. Returns what
  the expectations read, per load."""
  config = EvalConfig()
  values = []
  for group in plan_loads(task, config):
    load = await session.load(html)
    if not load.ok:
      raise RuntimeError(f"least work: {task.id} did not load: {load.reason}")
    run = _Run(session)
    await run.steps([s for r in group if shares_load(r, config) for s in r.steps])
    for rubric in group:
      if not shares_load(rubric, config):
        await run.steps(rubric.steps)
    values.append(run.values)
  return values


def app_html(task) -> str:
  return extract_lib.extract_app(f"```html\n{task.reference}\n```").html


def worker(task_ids: list[str], examples: str, barrier, out) -> None:
  """One process of the measurement: one session, warmed on the first app, then its share
  of the apps after all processes are ready; puts (start, end) of the timed part."""
  from rcca_jax.data import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
  by_id = {t.id: t for t in tasks_lib.load_tasks(examples)}
  tasks = [by_id[i] for i in task_ids]

  async def go():
    session = PageSession(EvalConfig())
    await session.start()
    try:
      await run_app(session, tasks[0], app_html(tasks[0]))
      barrier.wait()
      start = time.monotonic()
      for task in tasks:
        await run_app(session, task, app_html(task))
      return start, time.monotonic()
    finally:
      await session.close()
  out.put(asyncio.run(go()))
