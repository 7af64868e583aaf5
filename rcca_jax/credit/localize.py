"""Code localization: issue evidence -> direct and context spans of the response.

`localize_record(record, response)` recomputes `direct` and `context` of every issue of
an evaluation record (docs/contracts.md#4-evaluation) from its evidence (its keys:
docs/contracts.md#issue-evidence), by the rules of docs/method.md#4-code-localization.
What the running browser reported (stack frames, listener locations, matched CSS rules)
comes first; reading the source (element look-ups, bindings) fills in where the browser
had nothing to say. All work is in app coordinates, converted to response spans
at the end; the result is deterministic.

Where the policy fails most: a selector that matches nothing blames the element the app
most plausibly meant (`targets`; `evidence.target_guess` says which, or why none); a
listener or binding for an event the action does not fire blames the binding; a hang
blames the loop the paused script was in; a syntax error blames the construct left open
and where parsing fails (`evidence.syntax_spans`).
"""

from __future__ import annotations

import bisect
import copy
import difflib
import re
from collections.abc import Sequence
from typing import Any

from rcca_jax.base import dsl
from rcca_jax.base.js_index import FUNCTION_TYPES, JsIndex, statement_span
from rcca_jax.base.schema import Span, contains, merge_spans, subtract_spans
from rcca_jax.credit.context import expand_context
from rcca_jax.credit.targets import MIN_SCORE, TargetFinder, last_compound, parse_steps
from rcca_jax.evaluation.actions import ACTION_EVENTS, fired_events
from rcca_jax.evaluation.extract import Extraction, extract_app
from rcca_jax.evaluation.source import ParsedApp, parse_app

_GLOBAL_TARGETS = ("document", "window", "document.body")
_LOOPS = frozenset({"for_statement", "for_in_statement", "while_statement", "do_statement"})
_JS_LOOKUP = re.compile(r"(getElementById|querySelector(?:All)?)\(\s*[\"'`]([^\"'`]+)[\"'`]")
_DOM_EVENTS = frozenset(
    t for events in ACTION_EVENTS.values() for t in events) | frozenset({
        "load", "DOMContentLoaded", "resize", "scroll", "focus", "blur", "focusin", "focusout",
        "contextmenu", "wheel", "animationend", "transitionend", "beforeunload", "hashchange",
        "popstate", "storage", "visibilitychange", "error", "reset", "invalid", "drag",
        "dragstart", "dragend", "dragover", "dragenter", "dragleave", "drop", "copy", "paste",
        "cut", "pointerleave", "pointerout", "pointercancel", "touchmove", "selectionchange"})
_NULL_ACCESS = re.compile(
    r"Cannot (?:read|set) propert(?:y|ies) (?:of (?:null|undefined) )?\((?:reading|setting) "
    r"'([^']+)'\)|(?:null|undefined) is not an object \(evaluating '([^']+)'\)")
QUOTE_THRESHOLD = 0.8
_MIN_QUOTE = 8
# An element whose source is at most this long is blamed whole; a larger one by its start tag.
_SMALL_ELEMENT = 300


def localize_record(record: dict[str, Any], response: str) -> dict[str, Any]:
  """A copy of `record` whose issues' `direct`/`context` are recomputed from evidence.

  An issue for which the evidence yields nothing keeps the evaluator's `direct`.
  `context` never repeats `direct`; both are sorted, merged response spans.
  """
  out = dict(record)
  loc = Localizer(response, record.get("html_span"))
  issues = []
  for issue in record.get("issues") or []:
    new = copy.deepcopy(issue)
    direct, context = loc.localize(issue)
    if loc.target_note is not None:
      new.setdefault("evidence", {})["target_guess"] = loc.target_note
    if not direct:
      direct = merge_spans(issue.get("direct") or [])
    new["direct"] = [list(s) for s in direct]
    new["context"] = [list(s) for s in subtract_spans(context, direct)]
    issues.append(new)
  out["issues"] = issues
  return out


class Localizer:
  """Localizes the issues of one response; parses the app once."""

  def __init__(self, response: str, html_span: Sequence[int] | None):
    self.response = response
    self.ext: Extraction | None = None
    if html_span is not None:
      ext = extract_app(response)
      if ext is not None and tuple(ext.html_span) == tuple(html_span):
        self.ext = ext
    self._app: ParsedApp | None = None
    self._index: JsIndex | None = None
    self._html_ids: list[tuple[str, Span, Span]] | None = None
    self._targets: TargetFinder | None = None
    self.target_note: dict[str, Any] | None = None   # the last issue's missing-target guess
    if self.ext is not None:
      segs = sorted(self.ext.segments, key=lambda s: s[1])
      self._resp_starts = [s[1] for s in segs]
      self._segs = segs

  # -- coordinates -------------------------------------------------------------------
  @property
  def app(self) -> ParsedApp:
    if self._app is None:
      self._app = parse_app(self.ext.html)
    return self._app

  @property
  def index(self) -> JsIndex:
    if self._index is None:
      self._index = JsIndex(self.app)
    return self._index

  @property
  def targets(self) -> TargetFinder:
    if self._targets is None:
      self._targets = TargetFinder(self.app, self.index)
    return self._targets

  def to_app(self, offset: int | None) -> int | None:
    """App offset of a response offset inside the extracted document."""
    if offset is None or self.ext is None:
      return None
    i = bisect.bisect_right(self._resp_starts, offset) - 1
    if i < 0:
      return None
    app_start, resp_start, length = self._segs[i]
    return app_start + offset - resp_start if offset < resp_start + length else None

  def span_to_app(self, span: Sequence[int]) -> Span | None:
    s, e = self.to_app(span[0]), self.to_app(max(span[0], span[1] - 1))
    return (s, e + 1) if s is not None and e is not None and e >= s else None

  def to_response(self, spans: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in spans:
      out.extend(self.ext.span_to_response(s, e))
    return out

  def _position(self, item: dict[str, Any]) -> int | None:
    """App offset of a stack frame / listener: its response `offset` (None: not in the
    app), or its document line:column when the record has no `offset` at all."""
    if "offset" in item:
      return self.to_app(item["offset"])
    if isinstance(item.get("line"), int) and isinstance(item.get("column"), int):
      return self.ext.line_col_to_app(item["line"], item["column"])
    return None

  # -- per issue ---------------------------------------------------------------------
  def localize(self, issue: dict[str, Any]) -> tuple[list[Span], list[Span]]:
    """(direct, context) response spans of one issue."""
    ev = issue.get("evidence") or {}
    self.target_note = None
    direct_resp: list[Span] = []
    syntax = [tuple(x) for x in ev.get("syntax_spans") or [] if _is_span(x)]
    if syntax:                           # the construct left open and where parsing fails
      direct_resp.extend(syntax)
    elif _is_span(ev.get("node_span")):
      direct_resp.append(tuple(ev["node_span"]))
    for quote in ev.get("quotes") or []:
      if isinstance(quote, str):
        direct_resp.extend(match_quote(self.response, quote))
    if self.ext is None:
      return merge_spans(direct_resp), []
    context: list[Span] = []
    thrown = self._exception(ev, context)
    handlers: list[Span] = []
    self._listeners(ev, handlers, context)
    found: list[Span] = []
    self._css(ev, found, context)
    self._element(ev, found, context)
    # A guessed missing target: the handlers did their work on an element under another
    # name, so they are context.
    if (self.target_note or {}).get("guess"):
      context.extend(handlers)
    else:
      found.extend(handlers)
    # An exception the browser saw is the most specific evidence: what the rubric's
    # target and path point at is then context.
    direct = thrown if thrown else found
    if thrown:
      context.extend(found)
    for span in direct_resp:
      app_span = self.span_to_app(span)
      if app_span is not None:
        direct.append(app_span)
    html_ids = [(i, tag) for i, tag, _ in self.html_ids()]
    context.extend(expand_context(self.index, direct, html_ids))
    direct_out = merge_spans(self.to_response(merge_spans(direct)) + direct_resp)
    return direct_out, subtract_spans(self.to_response(merge_spans(context)), direct_out)

  def statement_at(self, app_offset: int) -> Span | None:
    block = self.app.block_at(app_offset)
    if block is None or block.language != "js":
      return None
    node = block.node_at(app_offset)
    return statement_span(block, node) if node is not None else None

  def _exception(self, ev: dict[str, Any], context: list[Span]) -> list[Span]:
    """Direct spans of an exception: the innermost in-app frame's statement (without the
    callbacks it passes) and where a null/undefined object came from. Outer frames'
    statements go to context."""
    frames = [f for f in ev.get("stack") or [] if isinstance(f, dict)]
    positions = [pos for pos in (self._position(f) for f in frames) if pos is not None]
    exc = ev.get("exception") if isinstance(ev.get("exception"), dict) else {}
    if not positions and exc and self.to_app(exc.get("offset")) is not None:
      positions = [self.to_app(exc["offset"])]
    stmts = [(pos, stmt) for pos in positions if (stmt := self.statement_at(pos)) is not None]
    if not stmts:
      return []
    pos, stmt = stmts[0]
    if ev.get("hang"):
      return self._loop(pos, stmts[1:], context)
    callbacks = [f.span for f in self.index.functions
                 if contains(stmt, f.span) and not f.span[0] <= pos < f.span[1]
                 and f.span != stmt]
    direct = subtract_spans([stmt], callbacks)
    context.extend(callbacks)
    context.extend(s for _, s in stmts[1:])
    m = _NULL_ACCESS.search(str(exc.get("message", "")))
    if m:
      direct.extend(self._null_sources(stmt, m.group(1) or m.group(2)))
    return direct

  def _loop(self, pos: int, outer: list[tuple[int, Span]], context: list[Span]) -> list[Span]:
    """Direct spans of a hang: the header of the innermost loop around the position where
    the script was paused (the statement itself when no loop encloses it in its function)."""
    html = self.app.html
    while pos < len(html) - 1 and html[pos].isspace():   # a line position (profiler)
      pos += 1
    stmt = self.statement_at(pos) or (pos, pos + 1)
    block = self.app.block_at(pos)
    node = block.node_at(pos) if block is not None else None
    while node is not None and node.type not in _LOOPS and node.type not in FUNCTION_TYPES:
      node = node.parent
    context.extend(s for _, s in outer)
    if node is None or node.type not in _LOOPS:
      return [stmt]
    start, end = block.node_app_span(node)
    body = node.child_by_field_name("body")
    if body is not None and node.type == "do_statement":
      start = block.node_app_span(body)[1]          # `while (cond);` after the body
    elif body is not None:
      end = block.node_app_span(body)[0]            # `while (cond)` / `for (...)`
    text = self.app.html[start:end]
    header = (start + len(text) - len(text.lstrip()), end - len(text) + len(text.rstrip()))
    context.append(block.node_app_span(node))
    return [header] if contains(header, stmt) or contains(stmt, header) else [header, stmt]

  def _null_sources(self, stmt: Span, prop: str) -> list[Span]:
    """Where the null/undefined object whose `prop` the statement accessed was assigned."""
    if "." in prop:                      # Safari-style 'a.b.c': the object is 'a.b'
      keys = {prop.rsplit(".", 1)[0]}
    else:
      keys = {r.key.rsplit(".", 1)[0] for r in self.index.refs
              if stmt[0] <= r.span[0] and r.span[1] <= stmt[1] and r.key.endswith("." + prop)}
    scoped = {(r.key, r.scope) for r in self.index.refs
              if r.key in keys and stmt[0] <= r.span[0] and r.span[1] <= stmt[1]}
    return sorted({r.stmt for r in self.index.refs
                   if r.write and (r.key, r.scope) in scoped and not contains(stmt, r.span)})

  def _listeners(self, ev: dict[str, Any], direct: list[Span], context: list[Span]) -> None:
    """Handlers of the elements the rubric acted on (CDP), else bindings found in the JS.

    A listener on an acted-on element whose event the action does not fire (`clik`,
    `change` on a button) blames its binding statement; its handler is context. An
    acted-on element with no binding at all is blamed itself, and the bindings of the
    same events elsewhere (where the missing one would be) are context."""
    missing = _missing_selector(ev)     # nothing to bind: `_element` guesses the target
    actions = [a for a in _actions(ev.get("path")) if missing is None or a.selector != missing]
    listeners = [l for l in ev.get("listeners") or [] if isinstance(l, dict)]
    tags = {a.selector: self._target_kind(a.selector) for a in actions}
    fires = [l for l in listeners if any(_fires(a, tags[a.selector], l) for a in actions)]
    misbound = [l for l in listeners if l not in fires and _misbound(l, actions, fires)]
    found = False
    for lst in fires or ([] if misbound else listeners):
      pos = self._position(lst)
      if pos is not None:
        found |= self._handler(pos, direct)
    for lst in misbound:
      pos = self._position(lst)
      if pos is not None:
        found |= self._binding_of_handler(pos, direct, context)
    types = {t for a in actions for t in ACTION_EVENTS.get(a.verb, ())}
    delegated = any(l.get("node") == "ancestor" and l.get("type") in types for l in listeners)
    for action in actions:
      if delegated or (action.selector is None and action.verb != "press"):
        continue
      if action.selector is None:        # a key press goes to the document
        if found and not any(l.get("type") in ACTION_EVENTS["press"] for l in listeners):
          self._missing_binding(None, direct, context)
        continue
      events = ACTION_EVENTS.get(action.verb, ())
      ids = re.findall(r"#([\w-]+)", action.selector)
      if found and ids and not any(
          l.get("node") == "target" and (l.get("type") in events or l in misbound)
          and re.search("#" + re.escape(ids[-1]) + r"(?![\w-])", str(l.get("selector", "")))
          for l in listeners):
        self._missing_binding(action.selector, direct, context)
    if found or not actions:
      return
    for action in actions:             # no browser evidence: bindings in the source
      if not self._source_bindings(action, direct, context):
        self._missing_binding(action.selector, direct, context)

  def _source_bindings(self, action: dsl.Step, direct: list[Span],
                       context: list[Span]) -> bool:
    """Handlers bound in the JS to the action's element for events it fires; failing
    those, its bindings to other events (their statements direct, handlers context)."""
    lookups = [] if action.selector is None else self.index.element_lookups(action.selector)
    targets = set(_GLOBAL_TARGETS) if action.selector is None else {
        lk.var[0] for lk in lookups if lk.var}
    chained = {lk.stmt for lk in lookups if lk.var is None}   # el(...).addEventListener
    events = fired_events(action, *self._target_kind(action.selector))
    tags = [t.app_span for t in self.targets.tags
            if action.selector and last_compound(action.selector).ids
            and last_compound(action.selector).matches(t)]
    mine = [b for b in self.index.bindings
            if (b.target == "<attribute>" and any(contains(t, b.stmt) for t in tags))
            or b.target in targets or b.stmt in chained]
    before = len(direct)
    for b in mine:
      if b.event not in events and b.event is not None:
        continue
      if b.target == "<attribute>":
        direct.append(b.stmt)
        self._callees(b.stmt, direct)
        continue
      if b.handler_span is not None:
        direct.append(b.handler_span)
      for f in self.index.functions_named(b.handler_name or ""):
        direct.append(f.span)
    if len(direct) > before or action.selector is None:
      return len(direct) > before
    for b in mine:                       # bound, but to an event the action does not fire
      direct.extend(self._binding_statement(b, context))
    return len(direct) > before

  def _binding_of_handler(self, pos: int, direct: list[Span], context: list[Span]) -> bool:
    """A listener of the wrong event: the statement binding it is direct, its handler
    context (the handler itself when no binding in the source names it)."""
    func = self.index.function_at(pos)
    if func is None:
      return self._handler(pos, direct)
    bindings = [b for b in self.index.bindings
                if b.handler_span == func.span or (func.name and b.handler_name == func.name)]
    if not bindings:
      return self._handler(pos, direct)
    for b in bindings:
      direct.extend(self._binding_statement(b, context))
    context.append(func.span)
    return True

  def _binding_statement(self, b, context: list[Span]) -> list[Span]:
    """A binding's own text: the statement without the functions it passes (context), or
    an `on*="..."` attribute with its name."""
    if b.target == "<attribute>":
      m = re.search(r"\bon[a-z]+\s*=\s*[\"']?\Z", self.app.html[max(0, b.stmt[0] - 40):b.stmt[0]],
                    re.IGNORECASE)
      return [(b.stmt[0] - len(m.group()) if m else b.stmt[0], b.stmt[1])]
    handlers = [b.handler_span] if b.handler_span is not None else []
    context.extend(handlers)
    return subtract_spans([b.stmt], handlers)

  def _target_kind(self, selector: str | None) -> tuple[str | None, str]:
    """(tag, input type) of the element a selector names, from the static markup, else
    the selector's tag."""
    if selector is None:
      return None, ""
    want = last_compound(selector)
    tag = next((t for t in self.targets.tags if (want.ids or want.classes or want.attr_names)
                and want.matches(t)), None)
    if tag is None:
      return want.tag, ""
    return tag.tag, tag.attributes.get("type", "").lower()

  def _missing_binding(self, selector: str | None, direct: list[Span],
                       context: list[Span]) -> None:
    """The rubric acted on an element that nothing listens to. Nothing is direct (the
    binding that is missing has no text); context: the element, the app's event wiring
    (the siblings' bindings), functions and variables nothing uses any more, and the code
    that holds the element (its look-ups, their uses, and the functions using it: the
    would-be handler)."""
    del direct
    context.extend(b.stmt for b in self.index.bindings)
    context.extend(f.span for f in self.index.unused_functions())
    context.extend(self.index.unread_variables())
    if selector is None:
      return
    context.extend(self._markup({}, selector))
    ids = re.findall(r"#([\w-]+)", selector)
    classes = set()
    for tag in self.app.start_tags:
      if ids and tag.attributes.get("id") == ids[-1]:
        classes.update(tag.attributes.get("class", "").split())
    for sel in [selector] + ["." + c for c in sorted(classes)]:
      for lk in self.index.element_lookups(sel):
        context.append(lk.stmt)
        if lk.var is None:
          continue
        key, scope = lk.var
        for r in self.index.refs:
          if r.scope == scope and (r.key == key or r.key.startswith(key + ".")):
            context.append(r.stmt)
            func = self.index.innermost_function(r.span)
            if func is not None:
              context.append(func.span)

  def _handler(self, pos: int, direct: list[Span]) -> bool:
    """Blames the handler function at `pos`; thin wrappers pass blame to their callees."""
    block = self.app.block_at(pos)
    if block is None or block.language != "js":
      return False
    if block.kind == "attr":
      span = (block.app_start, block.app_end)
      direct.append(span)
      self._callees(span, direct)
      return True
    func = self.index.function_at(pos)
    if func is None:
      return False
    direct.append(func.span)
    if func.statements <= 1:
      self._callees(func.body, direct)
    return True

  def _callees(self, span: Span, direct: list[Span]) -> None:
    for call in self.index.calls:
      if contains(span, call.span):
        direct.extend(f.span for f in self.index.functions_named(call.name)
                      if not contains(f.span, span))

  def _css(self, ev: dict[str, Any], direct: list[Span], context: list[Span]) -> None:
    """Matched rules; with a property named, only its declarations are direct."""
    for rule in ev.get("css_rules") or []:
      if not isinstance(rule, dict) or not _is_span(rule.get("span")):
        continue
      span = self.span_to_app(rule["span"])
      if span is None:
        continue
      decls = self._declarations(span, rule.get("property")) if rule.get("property") else []
      if decls:
        direct.extend(decls)
        context.append(span)
      else:
        direct.append(span)

  def _declarations(self, rule: Span, prop: str) -> list[Span]:
    block = self.app.block_at(rule[0])
    if block is None or block.language != "css":
      return []
    out = []
    stack = [block.tree.root_node]
    while stack:
      node = stack.pop()
      if node.type == "declaration":
        name = node.named_children[0] if node.named_children else None
        span = tuple(block.node_app_span(node))
        if (name is not None and name.type == "property_name" and contains(rule, span)
            and _covers_property(name.text.decode(), prop)):
          out.append(span)
        continue
      stack.extend(node.named_children)
    return out

  def _element(self, ev: dict[str, Any], direct: list[Span], context: list[Span]) -> None:
    """The element a failed step inspected: static markup, and the code that makes it."""
    selector = ev.get("selector")
    steps = _actions(ev.get("step"), keep_expect=True)
    step = steps[0] if steps else None
    if step is not None and step.expect == "js":
      self._js_targets(ev, step, direct, context)
    if not isinstance(selector, str) or step is None:
      return
    element = ev.get("element") if isinstance(ev.get("element"), dict) else {}
    counted = step.expect == "count" and isinstance(ev.get("observed"), (int, float)) and ev["observed"] > 0
    if element.get("exists") is False and not counted:
      creators = self._creators(selector)
      direct.extend(creators)
      want = last_compound(selector)
      if want.ids or (want.classes and not creators):   # a name the app may have changed
        self._missing_target(ev, selector, step, direct, context)
      elif (absent := self._absent_id(selector)) is not None:    # `#renamed option`
        self._missing_target(ev, absent, step, direct, context, as_expectation=True)
      return
    markup = self._markup(ev, selector)
    if step.verb != "expect":
      direct.extend(markup)
      return
    if step.expect == "style":
      if not ev.get("css_rules"):        # inline style, or styles set from JS
        direct.extend(markup)
        self._writes(selector, direct, context)
      return
    initial = not _actions(ev.get("path"))
    if initial or step.expect in ("exists", "visible", "hidden", "count", "attr"):
      direct.extend(markup or self._creators(selector))
    if step.expect not in ("no_errors", "js"):
      self._writes(selector, direct, context)

  def _writes(self, selector: str, direct: list[Span], context: list[Span]) -> None:
    """Statements that change the element, and app functions computing what they write;
    the look-ups that fetch the element are context."""
    for stmt in self.index.element_writes(selector):
      direct.append(stmt)
      self._callees(stmt, direct)
    context.extend(self.index.element_lookup_statements(selector))

  def _markup(self, ev: dict[str, Any], selector: str) -> list[Span]:
    """Static markup of the element: the evaluator's `element_source`, else by its id."""
    if _is_span(ev.get("element_source")):
      return self._element_source(ev["element_source"])
    ids = re.findall(r"#([\w-]+)", selector)
    return [elem for i, _, elem in self.html_ids() if ids and i == ids[-1]
            and elem[1] - elem[0] <= _SMALL_ELEMENT][:1]

  def _element_source(self, span: Sequence[int]) -> list[Span]:
    """The start tag, widened to the whole element when that is small."""
    tag = self.span_to_app(span)
    if tag is None:
      return []
    for _, start_tag, element in self.html_ids():
      if start_tag == tag:
        return [element if element[1] - element[0] <= _SMALL_ELEMENT else tag]
    return [tag]

  def _creators(self, selector: str) -> list[Span]:
    """JS statements whose string literals name the selector's id or classes: the name
    alone, as a selector (`#x`, `.x`) or in markup (`id="x"`, `class="a x"`)."""
    names = re.findall(r"[#.]([\w-]+)", selector)
    if not names:
      return []
    pats = [re.compile(r"^[\"'`]\s*" + re.escape(n) + r"\s*[\"'`]$|[#.]" + re.escape(n)
                       + r"(?![\w-])|\b(?:id|class)\s*=\s*[\"'][^\"']*(?<![\w-])" + re.escape(n)
                       + r"(?![\w-])") for n in names]
    return sorted({stmt for text, stmt in self.index.strings if any(p.search(text) for p in pats)})

  def _missing_target(self, ev: dict[str, Any], selector: str, step: dsl.Step,
                      direct: list[Span], context: list[Span],
                      as_expectation: bool = False) -> None:
    """A selector that matched nothing: blame the element the app most plausibly meant
    (its identifying attribute and the code naming it); its wiring is context. When no
    element is plausible, the evidence says so and nothing is blamed directly.
    `as_expectation`: the selector is only part of what the step named (an ancestor, or
    a look-up inside `expect js`), so any element may be meant."""
    finder = self.targets
    check = parse_steps(ev.get("check") or ev.get("path") or [])
    verb, kind = ("expect", "exists") if as_expectation else (
        step.verb, step.expect if step.verb == "expect" else None)
    handlers = self._action_handlers(ev, selector)
    guess, ranked = finder.guess(selector, (verb, kind, selector), check,
                                 ev.get("expected"), ev.get("rubric_selectors") or [],
                                 handlers, ACTION_EVENTS.get(verb, ()))
    self.target_note = {"selector": selector, "candidates": ranked,
                        "guess": None if guess is None else ranked[0]["element"]}
    if guess is None:
      self.target_note["why"] = ("no element is plausible" if not ranked or
                                 ranked[0]["score"] < MIN_SCORE else
                                 "several elements are equally plausible")
      return
    direct.append(finder.attribute_span(guess.element, guess.attribute, guess.value))
    shared = guess.attribute == "class" and sum(
        guess.value in t.attributes.get("class", "").split() for t in finder.tags) > 1
    if not shared:
      for stmt in finder.references(guess.attribute, guess.value):
        callbacks = self._callbacks(stmt)
        direct.extend(subtract_spans([stmt], callbacks))
        context.extend(callbacks)
    bindings = finder.bindings_of(guess.element)
    context.extend(b.stmt for b in bindings)
    context.extend(finder.handler_spans(bindings))
    for sel in finder.selectors_for(guess.element):
      context.extend(self.index.element_writes(sel))
    context.append(guess.element.app_span)

  def _js_targets(self, ev: dict[str, Any], step: dsl.Step, direct: list[Span],
                  context: list[Span]) -> None:
    """`expect js` reading an element that does not exist: its missing target."""
    for method, arg in _JS_LOOKUP.findall(str(step.value)):
      selector = "#" + arg if method == "getElementById" else arg
      if self._creators(selector):
        continue
      absent = self._absent_id(selector)
      if absent is not None:
        self._missing_target(ev, absent, step, direct, context, as_expectation=True)
        return

  def _absent_id(self, selector: str) -> str | None:
    """`#x` for the first id in the selector that no static element has."""
    known = {t.attributes.get("id") for t in self.targets.tags}
    return next((f"#{i}" for i in re.findall(r"#([\w-]+)", selector) if i not in known), None)

  def _callbacks(self, stmt: Span) -> list[Span]:
    """Functions passed inside a statement (its callbacks)."""
    return [f.span for f in self.index.functions if contains(stmt, f.span) and f.span != stmt]

  def _action_handlers(self, ev: dict[str, Any], missing: str) -> list[Span]:
    """Handler functions (and what they call) of the elements the rubric acted on."""
    spans = []
    for lst in ev.get("listeners") or []:
      pos = self._position(lst) if isinstance(lst, dict) else None
      func = self.index.function_at(pos) if pos is not None else None
      if func is not None:
        spans.append(func.span)
    finder = self.targets
    for action in _actions(ev.get("path")):
      if action.selector and action.selector != missing:
        for tag in finder.tags:
          if last_compound(action.selector).matches(tag):
            spans.extend(finder.handler_spans(finder.bindings_of(tag)))
    return finder.closure(spans)

  def html_ids(self) -> list[tuple[str, Span, Span]]:
    """(id, start-tag span, element span) of the static elements that have an id."""
    if self._html_ids is None:
      self._html_ids = []
      stack = [self.app.html_tree.root_node]
      while stack:
        node = stack.pop()
        if node.type in ("start_tag", "self_closing_tag"):
          elem_id = _attribute(node, "id")
          if elem_id:
            element = node.parent if node.parent is not None and node.parent.type == "element" else node
            self._html_ids.append((elem_id, self.app.element_span(node),
                                   self.app.element_span(element)))
        stack.extend(reversed(node.named_children))
      self._html_ids.sort(key=lambda x: x[1])
    return self._html_ids


def match_quote(response: str, quote: str, threshold: float = QUOTE_THRESHOLD) -> list[Span]:
  """Response spans of a quoted code excerpt: exact up to whitespace, else the best
  difflib match over windows of as many lines, if its ratio reaches `threshold`."""
  norm_q = " ".join(quote.split())
  if len(norm_q) < _MIN_QUOTE:
    return []
  norm, where = _normalize(response)
  spans = []
  start = norm.find(norm_q)
  while start >= 0 and len(spans) < 3:
    spans.append((where[start], where[start + len(norm_q) - 1] + 1))
    start = norm.find(norm_q, start + 1)
  if spans:
    return spans
  lines = [(m.start(), m.end()) for m in re.finditer(r"[^\n]*\S[^\n]*", response)]
  n = max(1, sum(1 for l in quote.splitlines() if l.strip()))
  best, best_span = threshold, None
  for width in sorted({max(1, n - 1), n, n + 1}):
    for i in range(len(lines) - width + 1):
      s, e = lines[i][0], lines[i + width - 1][1]
      window = " ".join(response[s:e].split())
      matcher = difflib.SequenceMatcher(None, norm_q, window, autojunk=False)
      if matcher.real_quick_ratio() < best or matcher.quick_ratio() < best:
        continue
      ratio = matcher.ratio()
      if ratio > best or (ratio == best and best_span is None):
        best, best_span = ratio, (s + len(response[s:e]) - len(response[s:e].lstrip()), e)
  return [best_span] if best_span else []


def _normalize(text: str) -> tuple[str, list[int]]:
  """`text` with whitespace runs collapsed to one space, and each char's source index."""
  chars, where = [], []
  for m in re.finditer(r"\S+|\s+", text):
    if m.group().isspace():
      if chars:
        chars.append(" ")
        where.append(m.start())
    else:
      chars.extend(m.group())
      where.extend(range(m.start(), m.end()))
  return "".join(chars), where


def _fires(action: dsl.Step, target: tuple[str | None, str], listener: dict[str, Any]) -> bool:
  return listener.get("type") in fired_events(action, *target)


def _misbound(listener: dict[str, Any], actions: Sequence[dsl.Step],
              fires: Sequence[dict[str, Any]]) -> bool:
  """A listener on the acted-on element (with none there that fires), or anywhere with a
  misspelling of an event the actions fire."""
  events = sorted({t for a in actions for t in ACTION_EVENTS.get(a.verb, ())})
  if listener.get("node") == "target":
    return not any(l.get("node") == "target" and l.get("selector") == listener.get("selector")
                   for l in fires) and bool(actions)
  event = str(listener.get("type", ""))
  return event not in _DOM_EVENTS and bool(difflib.get_close_matches(event, events, cutoff=0.75))


def _missing_selector(ev: dict[str, Any]) -> str | None:
  """The failing step's selector when it matched nothing (a count of zero included)."""
  element = ev.get("element") if isinstance(ev.get("element"), dict) else {}
  selector = ev.get("selector")
  return selector if isinstance(selector, str) and element.get("exists") is False else None


def _actions(steps: Any, keep_expect: bool = False) -> list[dsl.Step]:
  """Parsed DSL steps (a list of step texts or one text); unparsable ones are skipped."""
  if isinstance(steps, str):
    steps = [steps]
  out = []
  for text in steps or []:
    try:
      parsed = dsl.parse_check(text) if isinstance(text, str) else ()
    except dsl.DslSyntaxError:
      continue
    out.extend(s for s in parsed if keep_expect or s.verb not in ("expect", "wait"))
  return out


def _attribute(tag, name: str) -> str | None:
  for attr in tag.named_children:
    if attr.type != "attribute" or not attr.named_children:
      continue
    if attr.named_children[0].text.decode().lower() != name:
      continue
    for value in attr.named_children[1:]:
      text = value.text.decode("utf-8", "replace")
      return text.strip("'\"")
  return None


def _covers_property(declared: str, prop: str) -> bool:
  """`declared` sets `prop` itself or as a shorthand (`border` for `border-color`)."""
  declared, prop = declared.strip().lower(), prop.strip().lower()
  return declared == prop or prop.startswith(declared + "-")


def _is_span(x: Any) -> bool:
  return (isinstance(x, (list, tuple)) and len(x) == 2
          and all(isinstance(v, int) for v in x) and x[0] <= x[1])
