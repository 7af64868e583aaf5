"""Runs one rubric's DSL steps on a loaded page and decides pass / severity
(docs/method.md#2-gated-reward).

Actions dispatch real input events (CDP `Input.*`, `input_events.py`, as Playwright's
mouse and keyboard send them) at the target's centre after one DOM read that checks
existence, visibility, enabled state and hit-testing; this avoids Playwright's
per-document actionability machinery (~150 ms on each fresh page) while keeping the
events trusted. Fill, select and press do their DOM part (focus and select, set the
value, choose the option) in that read when the target passes. DOM reads run in an
isolated world. After an action the page settles (one frame and a timer turn) inside the
next DOM read, in the same browser call; what happens meanwhile (an uncaught exception,
a hang) is the action's, so an action owed a settle does its DOM part in a call of its
own. Consecutive expectations that only read the DOM are one call, and so are those of
the read-only rubrics that share a load. Severities: `critical` when a target matches nothing or
cannot be interacted with, or an uncaught exception / hang happens during the
interaction; `major` when an expectation is false (a `count` of zero is a measured
value, not a missing target, so a false count is `major` too); `minor` when it holds
only up to normalisation, and for failed style checks of `rendering` rubrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from typing import Any, Awaitable, Callable, Sequence

from rcca_jax.evaluation import actions
from rcca_jax.evaluation import compare
from rcca_jax.evaluation import devtools
from rcca_jax.evaluation.page_session import (CallTimeout, JsError, PageException,
                                              PageSession)

# Focuses an editable target and selects its content so inserted text replaces it.
_FOCUS_SELECT_JS = """(sel) => {
  const el = document.querySelector(sel);
  el.focus();
  if (el.isContentEditable) {
    const range = document.createRange(); range.selectNodeContents(el);
    const s = getSelection(); s.removeAllRanges(); s.addRange(range);
  } else if (typeof el.select === 'function') { el.select(); }
  return document.activeElement === el;
}"""

_SET_VALUE_JS = """(sel, value) => {
  const el = document.querySelector(sel);
  el.focus(); el.value = value;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return el.value;
}"""

_SELECT_JS = """(sel, value) => {
  const el = document.querySelector(sel);
  const opts = Array.from(el.options);
  const opt = opts.find(o => o.value === value) || opts.find(o => o.label.trim() === value)
      || opts.find(o => o.textContent.trim() === value);
  if (!opt) return {ok: false, options: opts.map(o => o.value).slice(0, 20)};
  el.focus(); opt.selected = true;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return {ok: true, value: el.value};
}"""

_FOCUS_JS = "(sel) => { const el = document.querySelector(sel); el.focus(); return true; }"

_NOT_FILLABLE = ("checkbox", "radio", "button", "submit", "file")  # input types fill refuses

# Locates an action's target and, when it passes every check the runner makes before
# acting, does the action's DOM part in the same call (`then`): fill focuses and selects
# the target or sets its value, select chooses the option, press focuses the target.
_LOCATE_AND_PREPARE_JS = """(target, opts, verb, value) => {
  const t = (%s)(target, opts);
  if (!t.found || !t.visible || t.disabled || t.covered) return t;
  if (verb === 'fill' && t.editable && !%s.includes(t.type)) {
    t.then = %s.includes(t.type) ? (%s)(target, value) : (%s)(target);
  } else if (verb === 'select' && t.is_select) {
    t.then = (%s)(target, value);
  } else if (verb === 'press') {
    t.then = (%s)(target);
  }
  return t;
}""" % (actions.LOCATE_TARGET_JS, json.dumps(list(_NOT_FILLABLE)),
        json.dumps(sorted(actions.VALUE_SET_INPUTS)), _SET_VALUE_JS, _FOCUS_SELECT_JS,
        _SELECT_JS, _FOCUS_JS)
# What the prepared DOM part is called in a hang's message (as when it was a call of its own).
_PREPARED = {"fill": "fill", "select": "select", "press": "focus"}

# Reads what an expectation needs from the DOM in one call.
_READ_JS = """(sel, kind, name, expected) => {
  let els;
  try { els = document.querySelectorAll(sel); } catch (e) { return {bad: String(e.message)}; }
  if (kind === 'count') {
    return {found: els.length > 0, count: els.length, info: els.length ? (%s)(els[0]) : null};
  }
  const el = els[0];
  if (!el) return {found: false};
  const out = {found: true, info: (%s)(el)};
  const r = el.getBoundingClientRect(), st = getComputedStyle(el);
  out.visible = r.width > 0 && r.height > 0 && st.visibility !== 'hidden' &&
      st.display !== 'none' && parseFloat(st.opacity || '1') > 0;
  const text = (el.innerText !== undefined ? el.innerText : el.textContent) || '';
  if (kind === 'text' || kind === 'number') out.value = text;
  if (kind === 'value') out.value = ('value' in el) ? String(el.value) : el.getAttribute('value');
  if (kind === 'attr') out.value = el.getAttribute(name);
  if (kind === 'style') out.value = st.getPropertyValue(name);
  if (kind === 'style' && expected !== null) {
    const probe = document.createElement(el.tagName);
    probe.style.setProperty(name, expected);
    if (name !== 'display') probe.style.display = 'none';
    (el.parentElement || document.body).appendChild(probe);
    out.normalized = probe.style.getPropertyValue(name) ? getComputedStyle(probe).getPropertyValue(name) : null;
    probe.remove();
  }
  return out;
}""" % (actions.ELEMENT_INFO_JS, actions.ELEMENT_INFO_JS)


_READ_ALL_JS = "(reads) => reads.map((r) => (%s)(...r))" % _READ_JS


def _pure_read(step: Any) -> bool:
  return (step.verb == "expect" and step.expect in _PURE_READS
          and not (step.op == "matches" and compare.check_regex(step.value)))


def _read_args(step: Any, probe: bool = True) -> list[Any]:
  return [step.selector, step.expect, step.name,
          step.value if step.expect == "style" and probe else None]


def _needs_probe(step: Any, read: dict[str, Any]) -> bool:
  """Whether a style read without the probe leaves the comparison open: the expected
  value's computed form could pass an `==` or `contains` that failed, or fail a `!=`."""
  if step.expect != "style" or "normalized" in read or not read.get("found"):
    return False
  if step.op not in ("==", "contains", "!="):
    return False
  passed = compare.compare_text(step.op, read["value"], step.value) is None
  return passed if step.op == "!=" else not passed


@dataclasses.dataclass
class Failure:
  """Why a rubric failed, in page terms (document coordinates, no response offsets)."""

  step_index: int
  severity: str
  message: str
  selector: str | None = None
  expected: Any = None
  observed: Any = None
  element: dict[str, Any] | None = None
  exception: PageException | None = None
  hang: str | None = None
  listeners: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  css_rules: list[dict[str, Any]] = dataclasses.field(default_factory=list)


# -- expectations answered by one DOM read (`_READ_JS`) --------------------------------
# Each judges the read `r` of `step`; `fail(severity, message, expected, observed)` makes
# its failure.
_Fail = Callable[[str, str, Any, Any], Failure]
_Judge = Callable[[Any, dict, _Fail, str], Failure | None]


def _found(judge: _Judge) -> _Judge:
  """`judge` of an expectation on an element: when none matches, a critical failure."""
  def judge_found(step: Any, r: dict, fail: _Fail, level: str) -> Failure | None:
    if not r["found"]:
      return fail("critical", f"expect {step.expect}: no element matches {step.selector!r}",
                  step.value, None)
    return judge(step, r, fail, level)
  return judge_found


def _count(step: Any, r: dict, fail: _Fail, _level: str) -> Failure | None:
  n = r["count"]
  if compare.compare_number(step.op, n, step.value) is None:
    return None
  return fail("major", f"expected count of {step.selector!r} {step.op} {step.value:g}, got {n}",
              step.value, n)


def _hidden(step: Any, r: dict, fail: _Fail, _level: str) -> Failure | None:
  if r["found"] and r["visible"]:
    return fail("major", f"expected {step.selector!r} to be hidden, but it is visible",
                "hidden", "visible")
  return None


def _visible(step: Any, r: dict, fail: _Fail, _level: str) -> Failure | None:
  return None if r["visible"] else fail("major", f"expected {step.selector!r} to be visible",
                                        "visible", "not visible")


def _number(step: Any, r: dict, fail: _Fail, _level: str) -> Failure | None:
  observed, sel = r["value"], step.selector
  num = compare.first_number(observed or "")
  if num is None:
    return fail("major", f"expected a number in {sel!r}, got text {observed!r}",
                step.value, observed)
  sev = compare.compare_number(step.op, num, step.value)
  return None if sev is None else fail(
      sev, f"expected number in {sel!r} {step.op} {step.value:g}, got {num:g}",
      step.value, num)


def _compared(step: Any, r: dict, fail: _Fail, level: str) -> Failure | None:
  """text, value, attr and style: the observed string against the expected one."""
  kind, observed, sel = step.expect, r["value"], step.selector
  if observed is None:
    return fail("major", f"{sel!r} has no attribute {step.name!r}", step.value, None)
  alternatives = (r["normalized"],) if kind == "style" and r.get("normalized") else ()
  sev = compare.compare_text(step.op, observed, step.value, alternatives=alternatives)
  if sev is None:
    return None
  if kind == "style" and level == "rendering":
    sev = "minor"
  what = {"text": "text", "value": "value", "attr": f"attribute {step.name}",
          "style": f"style {step.name}"}[kind]
  shown = compare.collapse(observed)
  return fail(sev, f"expected {what} of {sel!r} {step.op} {step.value!r}, got {shown[:200]!r}",
              step.value, shown[:500])


_DOM_JUDGES: dict[str, _Judge] = {
    "exists": _found(lambda *_: None), "visible": _found(_visible), "hidden": _hidden,
    "count": _count, "text": _found(_compared), "value": _found(_compared),
    "attr": _found(_compared), "style": _found(_compared), "number": _found(_number)}

# Expectations that only read the DOM: consecutive ones are read in one call, and so are
# those of the read-only rubrics that share a load. A read taken ahead is used only while
# nothing else has run meanwhile. A style read taken ahead has the computed value only;
# when that alone does not decide the comparison, the step reads again with the probe
# (an element with the expected value set, for its computed form), which adds an element.
_PURE_READS = frozenset(_DOM_JUDGES)
# Expectations that only read the page: the DOM reads, and `no_errors` (the exception log).
READONLY_EXPECTATIONS = _PURE_READS | {"no_errors"}


@dataclasses.dataclass
class RubricRun:
  """Outcome of one rubric's steps. `passed is None`: the check itself is broken."""

  passed: bool | None
  severity: str | None
  detail: str
  path: list[str]
  failure: Failure | None = None
  exceptions: list[PageException] = dataclasses.field(default_factory=list)
  hang: str | None = None
  seconds: float = 0.0


class _Stop(Exception):
  def __init__(self, failure: Failure):
    super().__init__(failure.message)
    self.failure = failure


class _CheckError(Exception):
  """The rubric's check cannot be run as written (bad selector, regex or key)."""


def _check_prepared(target: dict[str, Any], prepared: bool) -> None:
  """The page and the runner judged the target alike (`_LOCATE_AND_PREPARE_JS`)."""
  if prepared and "then" not in target:
    raise RuntimeError("rubric runner: the target passed the checks but was not prepared")


def is_readonly(steps: Sequence[Any]) -> bool:
  """Whether a check only reads the page (no actions, waits or page JS)."""
  return bool(steps) and all(s.verb == "expect" and s.expect in READONLY_EXPECTATIONS
                             for s in steps)


def _mouse_action(method: str) -> Callable[..., Awaitable[None]]:
  """The action that does mouse `method` ("click", "dblclick", "move") at the target."""
  async def act(runner: RubricRunner, i: int, step: Any, t: dict[str, Any],
                prepared: bool) -> None:
    del i, prepared
    s = runner.session
    await s.call(getattr(s.mouse, method)(t["x"], t["y"]), f"{step.verb} {step.selector}")
  return act


class RubricRunner:
  """Executes DSL steps on a `PageSession` with per-step and per-rubric deadlines."""

  def __init__(self, session: PageSession):
    self.session = session
    self.config = session.config
    self._steps: Sequence[Any] = ()
    self._seen = 0
    self._owed: int | None = None  # the action whose settle is still to be done
    self._ahead: dict[int, dict] = {}  # id(step) -> its read, taken with an earlier one
    self._ahead_log: Any = None        # ... on the load this log belongs to

  async def _read_ahead(self, steps: Sequence[Any]) -> None:
    """Reads the page for all of `steps` (pure reads) in one call; they are used until
    anything else happens on the page (an action, a wait, page JS, a style probe, a
    failed expectation's retry) or the page is loaded again."""
    self._ahead.clear()
    if len(steps) > 1:
      reads = await self._read(_READ_ALL_JS, [_read_args(s, probe=False) for s in steps],
                               what=f"read {steps[0].selector}")
      self._ahead, self._ahead_log = {id(s): r for s, r in zip(steps, reads)}, self.session.log

  async def run(self, steps: Sequence[Any], level: str,
                read_with: Sequence[Any] = ()) -> RubricRun:
    """Runs `steps` on the currently loaded page (the caller loads it fresh).

    `read_with`: the steps of read-only rubrics that run next on this load; their pure
    reads are taken in the same call as this rubric's last ones.
    """
    start = time.monotonic()
    if self._ahead_log is not self.session.log:
      self._ahead.clear()
    seen = self._seen = len(self.session.log.exceptions)
    self._steps, self._owed = steps, None
    path: list[str] = []
    deadline = start + self.config.rubric_timeout
    try:
      for i, step in enumerate(steps):
        path.append(str(step))
        if time.monotonic() > deadline:
          await self._settle_owed()
          raise _Stop(Failure(i, "critical", f"rubric exceeded {self.config.rubric_timeout:g}s",
                              hang="rubric deadline"))
        try:
          if not _pure_read(step):
            self._ahead.clear()
          elif id(step) not in self._ahead:
            batch = list(itertools.takewhile(_pure_read, steps[i:]))
            if i + len(batch) == len(steps):  # nothing after it here touches the page
              batch += [s for s in read_with if _pure_read(s)]
            await self._read_ahead(batch)
          if step.verb == "expect":
            await self._expect(i, step, level)
          else:
            await self._act(i, step)
            self._owed = i
        except CallTimeout as e:
          raise _Stop(self._hang(i, e)) from None
        except JsError as e:  # e.g. the app navigated itself to about:blank
          raise _Stop(self._gone(i, e)) from None
        self._stop_on_new_exception(i)
      await self._settle_owed()
    except _Stop as stop:
      self._ahead.clear()
      failure = stop.failure
      del path[failure.step_index + 1:]  # a failure found later may belong to an earlier action
      await self._collect_evidence(failure, steps, level)  # also after a terminated hang
      run = RubricRun(False, failure.severity, failure.message, path, failure,
                      list(self.session.log.exceptions[seen:]), failure.hang)
    except _CheckError as e:
      run = RubricRun(None, None, f"check error: {e}", path)
    else:
      run = RubricRun(True, None, "ok", path)
    run.seconds = time.monotonic() - start
    return run

  # -- settling ----------------------------------------------------------------------
  def _hang(self, i: int, e: CallTimeout) -> Failure:
    return Failure(i, "critical", str(e), selector=self._steps[i].selector, hang=str(e))

  def _gone(self, i: int, e: JsError) -> Failure:
    """The page stopped answering the checker (its document was replaced)."""
    navigations = self.session.log.navigations
    where = f" (it navigated to {navigations[-1]})" if navigations else ""
    return Failure(i, "critical", f"the page went away during the interaction{where}: {e}",
                   selector=self._steps[i].selector)

  def _stop_on_new_exception(self, i: int) -> None:
    new = self.session.log.exceptions[self._seen:]
    if new:
      raise _Stop(Failure(i, "critical", f"uncaught exception during the interaction: "
                          f"{new[0].message}", selector=self._steps[i].selector,
                          exception=new[0]))

  async def _settle_owed(self) -> None:
    """Settles after the last action when no DOM read has done it (before waits, keys,
    page JS and the end of the rubric)."""
    if self._owed is not None:
      await self._read("() => null", what="settle")

  async def _read(self, fn: str, *args: Any, what: str) -> Any:
    """A DOM read in the isolated world; settles first when an action is owed its settle.

    Exceptions and hangs up to the read's answer then belong to that action: the
    exception events of the page arrive before the answer.
    """
    owed, self._owed = self._owed, None
    if owed is None:
      return await self.session.js(fn, *args, what=what)
    try:
      value = await self.session.js(fn, *args, what="settle", settle_first=True)
    except CallTimeout as e:
      raise _Stop(self._hang(owed, e)) from None
    except JsError as e:
      self._stop_on_new_exception(owed)
      raise _Stop(self._gone(owed, e)) from None
    self._stop_on_new_exception(owed)
    return value

  # -- actions -----------------------------------------------------------------------
  async def _target(self, i: int, step: Any, use_label: bool = False,
                    prepare: bool = False) -> dict[str, Any]:
    """Locates the action's target and checks it can be acted on; with `prepare`, the
    action's DOM part is done in the same call when it can (`_LOCATE_AND_PREPARE_JS`)."""
    if prepare:
      t = await self._read(_LOCATE_AND_PREPARE_JS, step.selector, {"useLabel": use_label},
                           step.verb, step.value,
                           what=f"{_PREPARED[step.verb]} {step.selector}")
    else:
      t = await self._read(actions.LOCATE_TARGET_JS, step.selector, {"useLabel": use_label},
                           what=f"locate {step.selector}")
    if t.get("bad"):
      raise _CheckError(f"invalid selector {step.selector!r}: {t['bad']}")
    if not t["found"]:
      raise _Stop(Failure(i, "critical", f"{step.verb}: no element matches {step.selector!r}",
                          selector=step.selector, element={"exists": False}))
    problem = None
    if not t["visible"]:
      problem = "is not visible"
    elif t["disabled"] and step.verb not in ("hover",):
      problem = "is disabled"
    elif t["covered"]:
      problem = f"is covered by {t['cover']}"
    if problem:
      raise _Stop(Failure(i, "critical", f"{step.verb}: {step.selector!r} {problem}",
                          selector=step.selector, element=t["info"]))
    return t

  async def _act(self, i: int, step: Any) -> None:
    verb = step.verb
    if verb == "wait":
      await self._settle_owed()
      ms = min(float(step.value), self.config.rubric_timeout * 1000)
      await asyncio.sleep(ms / 1000)
      return
    if verb == "press" and step.selector is None:
      await self._settle_owed()
      await self._press(step.value)
      return
    # The DOM part goes with the locate unless a settle is owed: an exception or hang
    # during the settle is the previous action's, during the DOM part this one's.
    prepared = verb in _PREPARED and self._owed is None
    t = await self._target(i, step, use_label=verb in ("check", "uncheck"), prepare=prepared)
    act = self._ACTIONS.get(verb)
    if act is None:
      raise _CheckError(f"unknown action {verb!r}")
    await act(self, i, step, t, prepared)

  # Each action on its located target `t`; `prepared`: its DOM part is done already.
  async def _check(self, i: int, step: Any, t: dict[str, Any], prepared: bool) -> None:
    del prepared
    s, verb = self.session, step.verb
    if t["type"] not in ("checkbox", "radio"):
      raise _Stop(Failure(i, "critical", f"{verb}: {step.selector!r} is not a checkbox or radio",
                          selector=step.selector, element=t["info"]))
    want = verb == "check"
    if t["checked"] != want:
      await s.call(s.mouse.click(t["x"], t["y"]), f"{verb} {step.selector}")
      after = await s.js("(sel) => !!document.querySelector(sel)?.checked", step.selector)
      if after != want:
        raise _Stop(Failure(i, "critical", f"{verb}: clicking {step.selector!r} did not "
                            f"change its state", selector=step.selector, element=t["info"]))

  async def _fill(self, i: int, step: Any, t: dict[str, Any], prepared: bool) -> None:
    s = self.session
    if not t["editable"] or t["type"] in _NOT_FILLABLE:
      raise _Stop(Failure(i, "critical", f"fill: {step.selector!r} is not editable",
                          selector=step.selector, element=t["info"]))
    _check_prepared(t, prepared)
    if t["type"] in actions.VALUE_SET_INPUTS:
      if not prepared:
        await s.js(_SET_VALUE_JS, step.selector, step.value, what=f"fill {step.selector}")
    else:
      if not prepared:
        await s.js(_FOCUS_SELECT_JS, step.selector, what=f"focus {step.selector}")
      if step.value:
        await s.call(s.keyboard.insert_text(step.value), f"fill {step.selector}")
      else:
        await s.call(s.keyboard.press("Delete"), f"fill {step.selector}")

  async def _select(self, i: int, step: Any, t: dict[str, Any], prepared: bool) -> None:
    if not t["is_select"]:
      raise _Stop(Failure(i, "critical", f"select: {step.selector!r} is not a <select>",
                          selector=step.selector, element=t["info"]))
    _check_prepared(t, prepared)
    res = t["then"] if prepared else await self.session.js(
        _SELECT_JS, step.selector, step.value, what=f"select {step.selector}")
    if not res["ok"]:
      raise _Stop(Failure(i, "critical", f"select: no option {step.value!r} in "
                          f"{step.selector!r}", selector=step.selector, expected=step.value,
                          observed=res["options"], element=t["info"]))

  async def _press_on(self, i: int, step: Any, t: dict[str, Any], prepared: bool) -> None:
    del i
    _check_prepared(t, prepared)
    if not prepared:
      await self._read(_FOCUS_JS, step.selector, what=f"focus {step.selector}")
    await self._press(step.value)

  _ACTIONS: dict[str, Callable[..., Awaitable[None]]] = {
      "click": _mouse_action("click"), "dblclick": _mouse_action("dblclick"),
      "hover": _mouse_action("move"), "check": _check, "uncheck": _check, "fill": _fill,
      "select": _select, "press": _press_on}

  async def _press(self, key: str) -> None:
    try:
      await self.session.call(self.session.keyboard.press(key), f"press {key}")
    except JsError as e:
      if "Unknown key" in str(e):
        raise _CheckError(f"unknown key {key!r}") from None
      raise

  # -- expectations ------------------------------------------------------------------
  async def _expect(self, i: int, step: Any, level: str) -> None:
    verdict = await self._judge_expectation(i, step, level)
    if verdict is not None and step.expect != "no_errors" and self.config.expect_retry_ms > 0:
      self._ahead.clear()
      await asyncio.sleep(self.config.expect_retry_ms / 1000)  # let transitions/timers finish
      verdict = await self._judge_expectation(i, step, level)
    if verdict is not None:
      raise _Stop(verdict)

  async def _judge_expectation(self, i: int, step: Any, level: str) -> Failure | None:
    kind = step.expect
    judge = self._PAGE_JUDGES.get(kind)
    if judge is not None:
      await self._settle_owed()
      return await judge(self, i, step)
    if kind in ("text", "value", "attr", "style") and step.op == "matches":
      bad = compare.check_regex(step.value)
      if bad:
        await self._settle_owed()  # what the last action did still counts
        raise _CheckError(bad)
    r = self._ahead.pop(id(step), None)
    if r is not None and _needs_probe(step, r):
      r = None
    if r is None:
      if step.expect == "style":
        self._ahead.clear()  # the probe adds an element
      r = await self._read(_READ_JS, *_read_args(step), what=f"read {step.selector}")
    if r.get("bad"):
      raise _CheckError(f"invalid selector {step.selector!r}: {r['bad']}")
    element = r.get("info") or {"exists": False}

    def fail(severity, message, expected, observed):
      return Failure(i, severity, message, selector=step.selector, expected=expected,
                     observed=observed, element=element)

    return _DOM_JUDGES[kind](step, r, fail, level)

  async def _expect_no_errors(self, i: int, step: Any) -> Failure | None:
    del step
    if self.session.log.exceptions:
      first = self.session.log.exceptions[0]
      return Failure(i, "critical", f"uncaught exception: {first.message}", exception=first,
                     expected="no uncaught exception", observed=first.message)
    return None

  async def _expect_js(self, i: int, step: Any) -> Failure | None:
    fn = f"async () => {{ const v = await ({step.value}); return [!!v, String(v).slice(0, 200)]; }}"
    try:
      ok, shown = await self.session.js(fn, what="expect js", main_world=True)
    except JsError as e:
      return Failure(i, "major", f"expect js {step.value!r} threw: {e}", expected="truthy",
                     observed=f"threw: {e}")
    if ok:
      return None
    return Failure(i, "major", f"expected js {step.value!r} to be truthy, got {shown}",
                   expected="truthy", observed=shown)

  # Expectations on the page rather than one DOM read; they settle an owed action first.
  _PAGE_JUDGES: dict[str, Callable[..., Awaitable[Failure | None]]] = {
      "no_errors": _expect_no_errors, "js": _expect_js}

  # -- evidence ----------------------------------------------------------------------
  async def _collect_evidence(self, failure: Failure, steps: Sequence[Any], level: str) -> None:
    """Listeners of the acted-on elements, and matched CSS rules for style failures."""
    selectors = []
    for step in steps[:failure.step_index + 1]:
      # A key press without a selector goes to the focused element (selector None).
      if step.verb == "expect" or (step.selector is None and step.verb != "press"):
        continue
      if step.selector not in selectors:
        selectors.append(step.selector)
    if failure.selector and failure.selector not in selectors and not selectors:
      selectors.append(failure.selector)
    try:
      for sel in selectors[-3:]:
        failure.listeners.extend(await devtools.event_listeners(self.session, sel))
      step = steps[failure.step_index]
      if failure.element and failure.element.get("exists") and (
          level == "rendering" or (step.verb == "expect" and step.expect in ("style", "visible",
                                                                             "hidden"))):
        failure.css_rules = await devtools.matched_css_rules(
            self.session, failure.selector, step.name if step.expect == "style" else None)
    except (CallTimeout, JsError, KeyError, TypeError):
      pass  # evidence is best effort; the verdict stands
