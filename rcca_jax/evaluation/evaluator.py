"""Evaluates one response against its task: gated stages, rubric checks, diagnostics.

`Evaluator(config).evaluate(task, response, sample_id)` runs format -> source ->
runtime -> rubrics (docs/method.md#2-gated-reward) in one reused browser page;
`static_record()` gives the record of the pure-Python stages alone (used when a worker
overran its deadline).
Everything the browser reports in document coordinates is mapped to response offsets.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import time
from typing import Any, Awaitable, Callable, Sequence

from rcca_jax.base.schema import GATES
from rcca_jax.evaluation import extract as extract_lib
from rcca_jax.evaluation import reward as reward_lib
from rcca_jax.evaluation import rubric_runner
from rcca_jax.evaluation import source
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.judge import Judge
from rcca_jax.evaluation.page_session import (BrowserGone, PageCrashed, PageException,
                                              PageLog, PageSession)
from rcca_jax.evaluation.record import JUDGE_FAILED, EvalRecord, Issue, RubricResult

_MAX_HANGS = 2  # after this many hung rubrics the remaining ones are not run


@dataclasses.dataclass
class StaticResult:
  """Outcome of the format and source stages."""

  extraction: Any | None           # extract.Extraction
  parsed: Any | None               # source.ParsedApp
  gates: list[bool]                # outcomes of the stages that ran
  issues: list[Issue]

  @property
  def passed(self) -> bool:
    return len(self.gates) == 2 and all(self.gates)


def static_stages(response: str) -> StaticResult:
  """Format (an app can be extracted) and source (it parses) stages."""
  extraction = extract_lib.extract_app(response)
  if extraction is None:
    return StaticResult(None, None, [False], [])
  parsed = source.parse_app(extraction.html)
  issues = source.source_issues(extraction, parsed)
  for issue in issues:
    if not issue.evidence.get("fatal"):
      issue.severity = "minor"  # reported, but does not gate
  return StaticResult(extraction, parsed, [True, not parsed.fatal], issues)


# A stack frame's `url` when it is the app's own page (docs/contracts.md#issue-evidence).
APP_FRAME_URL = "app"


def _not_run(task, why: str) -> list[RubricResult]:
  return [RubricResult(r.id, None, None, f"not run: {why}") for r in task.rubrics]


def build_record(task, sample_id: int, gates: Sequence[bool], rubrics: list[RubricResult],
                 html_span, issues: list[Issue], config: EvalConfig, *,
                 error: str | None = None, timing: dict[str, float] | None = None) -> EvalRecord:
  """Assembles the record: gate dict, rubric score (only when all gates passed), reward.

  When all gates pass but the judge could not grade a rubric, the record is unscorable
  (`config.partial_judge == "unscorable"`: no reward, `unscorable` says why); when every
  rubric is ungraded, there is no reward (docs/method.md#2-gated-reward): `reward` and
  `rubric_score` are None and `no_reward` says why.
  """
  cfg = config.reward_config()
  gate_dict = reward_lib.gate_values(*gates)
  score, no_reward, unscorable = None, None, None
  if len(gates) == 3 and all(gates):
    failed = [r for r in rubrics if r.passed is None and r.detail.startswith(JUDGE_FAILED)]
    if failed and error is None and config.partial_judge == "unscorable":
      unscorable = (f"{len(failed)} of {len(rubrics)} rubrics ungraded by the judge: "
                    f"{failed[0].detail[len(JUDGE_FAILED):]}")[:500]
    elif rubrics and error is None and all(r.passed is None for r in rubrics):
      no_reward = f"all {len(rubrics)} rubrics ungraded"
    else:
      levels = {r.id: r.level for r in task.rubrics}
      score = reward_lib.rubric_score(reward_lib.rubric_violations(levels, rubrics), cfg)
  if no_reward is not None or unscorable is not None:
    reward = None
  else:
    reward = (reward_lib.gated_reward(gate_dict, score, cfg) if error is None
              else cfg.format_fail)
  return EvalRecord(task.id, sample_id, reward, gate_dict, score, rubrics,
                    tuple(html_span) if html_span else None, issues, error, timing or {},
                    no_reward, unscorable)


def _gate_failed_record(task, sample_id: int, gates: Sequence[bool], html_span,
                        issues: list[Issue], config: EvalConfig, *,
                        timing: dict[str, float] | None = None) -> EvalRecord:
  """The record of a response whose last gate in `gates` failed: no rubric ran."""
  failed = GATES[len(gates) - 1]
  return build_record(task, sample_id, gates, _not_run(task, f"{failed} gate failed"),
                      html_span, issues, config, timing=timing)


def static_record(task, response: str, sample_id: int,
                  runtime_failure: str = "not run in a browser",
                  config: EvalConfig | None = None) -> EvalRecord:
  """The record from format/source alone; if they pass, runtime fails with the reason."""
  config = config or EvalConfig()
  st = static_stages(response)
  span = st.extraction.html_span if st.extraction else None
  if not st.passed:
    return _gate_failed_record(task, sample_id, st.gates, span, st.issues, config)
  issue = Issue("runtime", runtime_failure, evidence={"hang": runtime_failure})
  return _gate_failed_record(task, sample_id, [True, True, False], span, [issue], config)


def error_record(task_id: str, sample_id: int | None, error: str) -> EvalRecord:
  """A record for an item that could not be evaluated at all (bad line, unknown task)."""
  return EvalRecord(task_id or "", sample_id if sample_id is not None else -1, 0.0,
                    reward_lib.gate_values(False), None, [], None, [], error)


class _Mapper:
  """Document coordinates / app offsets of one app -> response offsets and spans."""

  def __init__(self, static: StaticResult):
    self.ex = static.extraction
    self.parsed = static.parsed

  def offset(self, line: int, column: int) -> int | None:
    return self.ex.to_response(self.ex.line_col_to_app(line, column))

  def statement(self, line: int, column: int) -> list[tuple[int, int]]:
    span = self.parsed.statement_at(self.ex.line_col_to_app(line, column))
    return self.ex.span_to_response(*span) if span else []

  def frames(self, frames: Sequence[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    """Stack frames as evidence; the app's own page (`url`, numbered by the browser's
    loads, so by which worker graded the app) is written `APP_FRAME_URL`."""
    out = []
    for f in frames[:20]:
      mine = f["url"] == url
      out.append({"function": f["function"], "line": f["line"], "column": f["column"],
                  "url": APP_FRAME_URL if mine else f["url"],
                  "offset": self.offset(f["line"], f["column"]) if mine else None})
    return out

  def exception(self, exc: PageException, url: str) -> tuple[dict[str, Any], list]:
    """Evidence and direct spans of an uncaught exception (innermost app frame)."""
    stack = self.frames(exc.frames, url)
    top = next((f for f in stack if f["offset"] is not None), None)
    direct = self.statement(top["line"], top["column"]) if top else []
    evidence = {"exception": {"message": exc.message, "offset": top["offset"] if top else None},
                "stack": stack}
    return evidence, direct

  def element_source(self, info: dict[str, Any]) -> list[int] | None:
    """Span of the element's static start tag, when it maps to the markup."""
    if not info or not info.get("exists"):
      return None
    span = self.parsed.start_tag_for_id(info["id"]) if info.get("id") else None
    if span is None:
      same = [t for t in self.parsed.start_tags if t.tag == info.get("tag")]
      if len(same) == info.get("tag_count") and 0 <= info.get("tag_index", -1) < len(same):
        span = same[info["tag_index"]].app_span
    if span is None:
      return None
    spans = self.ex.span_to_response(*span)
    return [spans[0][0], spans[0][1]] if spans else None

  def listeners(self, listeners: list[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    out = []
    for lst in listeners:
      offset = self.offset(lst["line"], lst["column"]) if lst["url"] == url else None
      out.append({"type": lst["type"], "offset": offset, "line": lst["line"],
                  "column": lst["column"], "node": lst["node"], "selector": lst["selector"]})
    return out

  def css_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    html = self.ex.html
    for rule in rules:
      start = self.ex.line_col_to_app(*rule["start"])
      end = self.ex.line_col_to_app(*rule["end"])
      close = html.find("}", end)
      if close != -1 and not html[end:close].strip():
        end = close + 1
      spans = self.ex.span_to_response(start, end)
      if spans:
        out.append({"selector": rule["selector"], "span": [spans[0][0], spans[-1][1]],
                    "property": rule["property"]})
    return out


def shares_load(rubric, config: EvalConfig) -> bool:
  """Whether the rubric only reads the initial page, so it runs on a shared load."""
  return bool(config.share_readonly_loads and rubric.kind == "initial" and rubric.steps
              and rubric_runner.is_readonly(rubric.steps))


def plan_loads(task, config: EvalConfig) -> list[list[Any]]:
  """Groups the checkable rubrics into page loads: every other rubric gets a load of its
  own; the read-only initial ones share one, before the first other rubric on its load
  (they only read, so it still starts from the page as loaded)."""
  shared = [r for r in task.rubrics if r.steps and shares_load(r, config)]
  alone = [[r] for r in task.rubrics if r.steps and not shares_load(r, config)]
  if not shared:
    return alone
  return [shared + (alone[0] if alone else [])] + alone[1:]


class Evaluator:
  """Evaluates responses one at a time in one browser (one per worker process)."""

  def __init__(self, config: EvalConfig | None = None):
    self.config = config or EvalConfig()
    self.judge = None
    if self.config.has_judge:
      self.judge = Judge(self.config.judge_url, self.config.judge_model,
                         timeout=self.config.judge_timeout, retries=self.config.judge_retries,
                         max_app_chars=self.config.judge_max_app_chars,
                         api_key=os.environ.get("RCCA_JUDGE_API_KEY"),
                         budget=self.config.judge_budget)
    self._loop = asyncio.new_event_loop()
    self._session: PageSession | None = None

  def start(self) -> None:
    """Launches the browser now (otherwise the first evaluation does)."""
    self._loop.run_until_complete(self._ensure_session())

  def evaluate(self, task, response: str, sample_id: int) -> EvalRecord:
    return self._loop.run_until_complete(self.evaluate_async(task, response, sample_id))

  def close(self) -> None:
    if self._session is not None:
      self._loop.run_until_complete(self._session.close())
      self._session = None
    self._loop.close()

  async def _ensure_session(self) -> PageSession:
    if self._session is None:
      self._session = PageSession(self.config)
      await self._session.start()
    return self._session

  async def evaluate_async(self, task, response: str, sample_id: int) -> EvalRecord:
    start = time.monotonic()
    st = static_stages(response)
    timing = {"static": time.monotonic() - start}
    span = st.extraction.html_span if st.extraction else None
    if not st.passed:
      return _gate_failed_record(task, sample_id, st.gates, span, st.issues, self.config,
                                 timing=timing)
    session = await self._ensure_session()
    crash = None
    for _ in range(2):  # a crash or browser death is retried once on a fresh context
      try:
        await session.begin_app()
        runtime_ok, results, issues = await self._browser_stages(task, st, session)
        break
      except (PageCrashed, BrowserGone) as e:
        crash = e
        await session.reset()
    else:
      why = f"{crash} (twice; out of memory?)" if isinstance(crash, PageCrashed) else (
          f"{crash} (twice)")
      runtime_ok, results = False, _not_run(task, "runtime gate failed")
      issues = [Issue("runtime", why, evidence={"crash": str(crash)})]
    if runtime_ok:
      results, judge_issues = await self._judge_rubrics(task, st, results)
      issues = issues + judge_issues
    timing["total"] = time.monotonic() - start
    return build_record(task, sample_id, [True, True, runtime_ok], results, span,
                        st.issues + issues, self.config, timing=timing)

  # -- browser stages ----------------------------------------------------------------
  async def _browser_stages(self, task, st: StaticResult, session: PageSession):
    """Runtime gate and rubric checks; returns (runtime_ok, rubric results, issues)."""
    mapper = _Mapper(st)
    runner = rubric_runner.RubricRunner(session)
    issues: list[Issue] = []
    logs: list[PageLog] = []
    results: dict[str, RubricResult] = {}
    runtime_ok, hangs = True, 0
    selectors = sorted({s.selector for r in task.rubrics for s in r.steps or () if s.selector})
    groups = collections.deque(plan_loads(task, self.config) or [[]])
    gi = -1
    while groups:
      group, gi = groups.popleft(), gi + 1
      if hangs >= _MAX_HANGS:
        for r in group:
          results[r.id] = RubricResult(r.id, False, "critical", "not run: the page hung "
                                       f"{hangs} times")
        continue
      html = st.extraction.html
      load = await session.load(html)
      logs.append(session.log)
      if not load.ok or (gi == 0 and session.log.exceptions):
        runtime_ok = False
        log = session.log
        stack = [] if load.ok else await self._hang_stack(session, mapper,
                                                          lambda: session.load(html))
        issues.extend(self._load_issues(load, log, mapper, stack))
        for r in task.rubrics:
          results.setdefault(r.id, RubricResult(r.id, None, None,
                                                "not run: runtime gate failed"))
        break
      for k, r in enumerate(group):
        # The read-only rubrics after this one on the load are read with it.
        later = ([s for q in group[k + 1:] if shares_load(q, self.config) for s in q.steps]
                 if shares_load(r, self.config) else [])
        run = await runner.run(r.steps, r.level, read_with=later)
        results[r.id], issue = self._rubric_result(r, run, session, mapper, selectors)
        if issue is not None:
          issues.append(issue)
        if run.hang:
          stack = await self._hang_stack(session, mapper,
                                         lambda r=r, run=run: self._replay(session, html, r, run))
          if stack and issue is not None and issue.evidence.get("hang"):
            issue.evidence["stack"] = stack
          hangs += 1
          runtime_ok = False
          evidence = {"hang": run.hang, "path": run.path}
          if stack:
            evidence["stack"] = stack
          issues.append(Issue("runtime", f"the page hung during rubric {r.id}: {run.hang}",
                              evidence=evidence))
        elif run.exceptions and self.config.gate_on_interaction_errors:
          runtime_ok = False
          for exc in _distinct(run.exceptions):
            evidence, direct = mapper.exception(exc, session.log.url)
            evidence["path"] = run.path
            issues.append(Issue("runtime", f"uncaught exception during rubric {r.id}: "
                                f"{exc.message}", direct=direct, evidence=evidence))
        if run.hang and r is not group[-1]:
          # The page was terminated: the other shared rubrics are not run; the one that
          # shared their load gets a fresh one, as it would have alone.
          if not shares_load(group[-1], self.config):
            groups.appendleft([group[-1]])
          break
    issues.extend(_contained_behaviour_issues(logs))
    ordered = [results.get(r.id) or self._unchecked(r) for r in task.rubrics]
    return runtime_ok, ordered, issues

  def _unchecked(self, r) -> RubricResult:
    if r.steps:
      return RubricResult(r.id, False, "critical", "not run: the page hung")
    if self.judge is None:
      return RubricResult(r.id, None, None, "ungraded: no check and no judge configured")
    return RubricResult(r.id, None, None, "not judged: the runtime gate failed")

  async def _hang_stack(self, session: PageSession, mapper: _Mapper,
                        replay: Callable[[], Awaitable[Any]]) -> list[dict[str, Any]]:
    """Where a hang loops, as stack frames of the response: what the hang locator saw
    when the script was terminated, else what a replay under the Debugger shows."""
    frames, url = session.log.hang_frames, session.log.url
    if not frames:
      frames, url = await session.replay_hang(replay)
    return mapper.frames(frames, url) if frames else []

  @staticmethod
  async def _replay(session: PageSession, html: str, r, run: rubric_runner.RubricRun) -> None:
    """A fresh load and the rubric's steps up to the one that hung."""
    load = await session.load(html)
    if load.ok:
      last = run.failure.step_index if run.failure else len(r.steps) - 1
      await rubric_runner.RubricRunner(session).run(r.steps[:last + 1], r.level)

  def _load_issues(self, load, log: PageLog, mapper: _Mapper,
                   stack: list[dict[str, Any]]) -> list[Issue]:
    if not load.ok:
      evidence = {"hang": load.reason}
      if stack:
        evidence["stack"] = stack
      return [Issue("runtime", load.reason or "the page did not load", evidence=evidence)]
    out = []
    for exc in _distinct(log.exceptions):
      evidence, direct = mapper.exception(exc, log.url)
      if log.console_errors:
        evidence["console"] = [c.text for c in log.console_errors[:10]]
      out.append(Issue("runtime", f"uncaught exception during load: {exc.message}",
                       direct=direct, evidence=evidence))
    return out

  def _rubric_result(self, r, run: rubric_runner.RubricRun, session: PageSession,
                     mapper: _Mapper, selectors: Sequence[str] = ()
                     ) -> tuple[RubricResult, Issue | None]:
    """The rubric's result and its issue; the evidence names the rubric's whole check and
    every selector of the task (what a missing target may have been renamed from)."""
    if run.passed is None:
      return RubricResult(r.id, None, None, run.detail), None
    if run.passed:
      return RubricResult(r.id, True, None, run.detail), None
    f = run.failure
    step = r.steps[f.step_index]
    evidence: dict[str, Any] = {"step": str(step), "step_index": f.step_index, "path": run.path,
                                "expected": f.expected, "observed": f.observed}
    direct: list[tuple[int, int]] = []
    if f.selector is not None:
      evidence["selector"] = f.selector
    if f.element is not None and not f.element.get("exists"):
      evidence["check"] = [str(s) for s in r.steps]
      evidence["rubric_selectors"] = list(selectors)
    if f.element is not None:
      evidence["element"] = {k: f.element.get(k) for k in
                             ("tag", "id", "classes", "outer_html", "exists")}
      source_span = mapper.element_source(f.element)
      if source_span:
        evidence["element_source"] = source_span
    if f.exception is not None:
      exc_evidence, direct = mapper.exception(f.exception, session.log.url)
      evidence.update(exc_evidence)
    if f.listeners:
      evidence["listeners"] = mapper.listeners(f.listeners, session.log.url)
    if f.css_rules:
      evidence["css_rules"] = mapper.css_rules(f.css_rules)
    if session.log.console_errors:
      evidence["console"] = [c.text for c in session.log.console_errors[:10]]
    if f.hang:
      evidence["hang"] = f.hang
    issue = Issue("rubric", f.message, rubric_id=r.id, severity=f.severity, direct=direct,
                  evidence=evidence)
    return RubricResult(r.id, False, f.severity, f.message), issue

  async def _judge_rubrics(self, task, st: StaticResult, results: list[RubricResult]):
    """Grades rubrics without a check with the judge (when configured)."""
    if self.judge is None:
      return results, []
    out, issues = [], []
    for r, res in zip(task.rubrics, results):
      if r.steps:
        out.append(res)
        continue
      verdict = await asyncio.to_thread(self.judge.grade, task.request, r.text,
                                        st.extraction.html)
      if verdict.passed is None:
        out.append(RubricResult(r.id, None, None, f"{JUDGE_FAILED}{verdict.reason}"))
        continue
      out.append(RubricResult(r.id, verdict.passed, verdict.severity, f"judge: {verdict.reason}"))
      if not verdict.passed:
        issues.append(Issue("rubric", f"judge: {verdict.reason}", rubric_id=r.id,
                            severity=verdict.severity, evidence={"quotes": verdict.quotes}))
    return out, issues


def _distinct(exceptions: list[PageException]) -> list[PageException]:
  seen, out = set(), []
  for exc in exceptions:
    top = exc.frames[0] if exc.frames else {}
    key = (exc.message, top.get("line"), top.get("column"))
    if key not in seen:
      seen.add(key)
      out.append(exc)
  return out[:5]


def _unique(items) -> list:
  """Items in first-seen order without repeats (every load of an app repeats them)."""
  seen, out = set(), []
  for item in items:
    key = json.dumps(item, sort_keys=True)
    if key not in seen:
      seen.add(key)
      out.append(item)
  return out


def _contained_behaviour_issues(logs: list[PageLog]) -> list[Issue]:
  """Non-gating runtime issues: console errors, blocked requests, dialogs, pop-ups."""
  console = _unique(c.text for log in logs for c in log.console_errors)
  blocked = _unique(b for log in logs for b in log.blocked)
  navigations = _unique(n for log in logs for n in log.navigations)
  dialogs = _unique(d for log in logs for d in log.dialogs)
  popups = _unique(p for log in logs for p in log.popups)
  parts = []
  if console:
    parts.append(f"{len(console)} console error(s): {console[0][:120]}")
  if blocked:
    parts.append(f"{len(blocked)} request(s) blocked (first: {blocked[0]['url'][:120]})")
  if navigations:
    parts.append(f"{len(navigations)} navigation(s) away blocked (first: {navigations[0][:120]})")
  if popups:
    parts.append(f"{len(popups)} pop-up(s) closed")
  if dialogs:
    parts.append(f"{len(dialogs)} dialog(s) answered")
  if not parts:
    return []
  evidence: dict[str, Any] = {}
  for key, items in (("console", console), ("blocked", blocked), ("navigations", navigations),
                     ("popups", popups), ("dialogs", dialogs)):
    if items:
      evidence[key] = items[:20]
  return [Issue("runtime", "; ".join(parts), severity="minor", evidence=evidence)]
