"""Listeners and bindings: the elements the rubric acted on -> the handlers (or the wiring)
that should have answered."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from rcca_jax.base import dsl
from rcca_jax.base.schema import Span, contains, subtract_spans
from rcca_jax.credit.rules.view import AppView, Blame, steps
from rcca_jax.credit.targets import last_compound
from rcca_jax.evaluation.actions import ACTION_EVENTS, fired_events

_GLOBAL_TARGETS = ("document", "window", "document.body")
_DOM_EVENTS = frozenset(
    t for events in ACTION_EVENTS.values() for t in events) | frozenset({
        "load", "DOMContentLoaded", "resize", "scroll", "focus", "blur", "focusin", "focusout",
        "contextmenu", "wheel", "animationend", "transitionend", "beforeunload", "hashchange",
        "popstate", "storage", "visibilitychange", "error", "reset", "invalid", "drag",
        "dragstart", "dragend", "dragover", "dragenter", "dragleave", "drop", "copy", "paste",
        "cut", "pointerleave", "pointerout", "pointercancel", "touchmove", "selectionchange"})


def listener_blame(ev: dict[str, Any], view: AppView) -> Blame:
  """Handlers of the elements the rubric acted on (CDP), else bindings found in the JS.

  A listener on an acted-on element whose event the action does not fire (`clik`,
  `change` on a button) blames its binding statement; its handler is context. An
  acted-on element with no binding at all is blamed itself, and the bindings of the
  same events elsewhere (where the missing one would be) are context."""
  missing = missing_selector(ev)     # nothing to bind: the element rule guesses the target
  actions = [a for a in steps(ev.get("path")) if missing is None or a.selector != missing]
  listeners = [l for l in ev.get("listeners") or [] if isinstance(l, dict)]
  tags = {a.selector: target_kind(view, a.selector) for a in actions}
  fires = [l for l in listeners if any(_fires(a, tags[a.selector], l) for a in actions)]
  misbound = [l for l in listeners if l not in fires and _misbound(l, actions, fires)]
  blame, found = Blame(), False
  for lst in fires or ([] if misbound else listeners):
    pos = view.position(lst)
    if pos is not None and (spans := handler_blame(view, pos)):
      blame, found = blame + Blame(tuple(spans)), True
  for lst in misbound:
    pos = view.position(lst)
    if pos is not None and (wrong := _binding_of_handler(view, pos)) is not None:
      blame, found = blame + wrong, True
  types = {t for a in actions for t in ACTION_EVENTS.get(a.verb, ())}
  delegated = any(l.get("node") == "ancestor" and l.get("type") in types for l in listeners)
  for action in actions:
    if delegated or (action.selector is None and action.verb != "press"):
      continue
    if action.selector is None:        # a key press goes to the document
      if found and not any(l.get("type") in ACTION_EVENTS["press"] for l in listeners):
        blame += missing_binding(view, None)
      continue
    events = ACTION_EVENTS.get(action.verb, ())
    ids = re.findall(r"#([\w-]+)", action.selector)
    if found and ids and not any(
        l.get("node") == "target" and (l.get("type") in events or l in misbound)
        and re.search("#" + re.escape(ids[-1]) + r"(?![\w-])", str(l.get("selector", "")))
        for l in listeners):
      blame += missing_binding(view, action.selector)
  if found or not actions:
    return blame
  for action in actions:             # no browser evidence: bindings in the source
    bound = source_bindings(view, action)
    blame += bound if bound.direct else bound + missing_binding(view, action.selector)
  return blame


def source_bindings(view: AppView, action: dsl.Step) -> Blame:
  """Handlers bound in the JS to the action's element for events it fires; failing
  those, its bindings to other events (their statements direct, handlers context)."""
  index = view.index
  lookups = [] if action.selector is None else index.element_lookups(action.selector)
  targets = set(_GLOBAL_TARGETS) if action.selector is None else {
      lk.var[0] for lk in lookups if lk.var}
  chained = {lk.stmt for lk in lookups if lk.var is None}   # el(...).addEventListener
  events = fired_events(action, *target_kind(view, action.selector))
  want = last_compound(action.selector) if action.selector else None
  tags = [t.app_span for t in view.targets.tags if want is not None and want.ids
          and want.matches(t)]
  mine = [b for b in index.bindings
          if (b.target == "<attribute>" and any(contains(t, b.stmt) for t in tags))
          or b.target in targets or b.stmt in chained]
  direct: list[Span] = []
  for b in mine:
    if b.event not in events and b.event is not None:
      continue
    if b.target == "<attribute>":
      direct.append(b.stmt)
      direct.extend(view.callees(b.stmt))
      continue
    if b.handler_span is not None:
      direct.append(b.handler_span)
    direct.extend(f.span for f in index.functions_named(b.handler_name or ""))
  if direct or action.selector is None:
    return Blame(tuple(direct))
  out = Blame()
  for b in mine:                       # bound, but to an event the action does not fire
    out += binding_statement(view, b)
  return out


def handler_blame(view: AppView, pos: int) -> list[Span]:
  """The handler function at `pos` (empty: none there); thin wrappers pass blame to
  their callees."""
  block = view.app.block_at(pos)
  if block is None or block.language != "js":
    return []
  if block.kind == "attr":
    span = (block.app_start, block.app_end)
    return [span] + view.callees(span)
  func = view.index.function_at(pos)
  if func is None:
    return []
  return [func.span] + (view.callees(func.body) if func.statements <= 1 else [])


def _binding_of_handler(view: AppView, pos: int) -> Blame | None:
  """A listener of the wrong event: the statement binding it is direct, its handler
  context (the handler itself when no binding in the source names it); None: no handler
  at `pos`."""
  func = view.index.function_at(pos)
  bindings = [] if func is None else [
      b for b in view.index.bindings
      if b.handler_span == func.span or (func.name and b.handler_name == func.name)]
  if not bindings:
    spans = handler_blame(view, pos)
    return Blame(tuple(spans)) if spans else None
  out = Blame()
  for b in bindings:
    out += binding_statement(view, b)
  return out + Blame(context=(func.span,))


def binding_statement(view: AppView, b) -> Blame:
  """A binding's own text: the statement without the functions it passes (context), or
  an `on*="..."` attribute with its name."""
  if b.target == "<attribute>":
    m = re.search(r"\bon[a-z]+\s*=\s*[\"']?\Z", view.app.html[max(0, b.stmt[0] - 40):b.stmt[0]],
                  re.IGNORECASE)
    return Blame(((b.stmt[0] - len(m.group()) if m else b.stmt[0], b.stmt[1]),))
  handlers = (b.handler_span,) if b.handler_span is not None else ()
  return Blame(tuple(subtract_spans([b.stmt], handlers)), handlers)


def target_kind(view: AppView, selector: str | None) -> tuple[str | None, str]:
  """(tag, input type) of the element a selector names, from the static markup, else
  the selector's tag."""
  if selector is None:
    return None, ""
  want = last_compound(selector)
  tag = next((t for t in view.targets.tags if (want.ids or want.classes or want.attr_names)
              and want.matches(t)), None)
  if tag is None:
    return want.tag, ""
  return tag.tag, tag.attributes.get("type", "").lower()


def missing_binding(view: AppView, selector: str | None) -> Blame:
  """The rubric acted on an element that nothing listens to. Nothing is direct (the
  binding that is missing has no text); context: the element, the app's event wiring
  (the siblings' bindings), functions and variables nothing uses any more, and the code
  that holds the element (its look-ups, their uses, and the functions using it: the
  would-be handler)."""
  index = view.index
  context = [b.stmt for b in index.bindings]
  context.extend(f.span for f in index.unused_functions())
  context.extend(index.unread_variables())
  if selector is None:
    return Blame(context=tuple(context))
  context.extend(view.markup_by_id(selector))
  ids = re.findall(r"#([\w-]+)", selector)
  classes = set()
  for tag in view.app.start_tags:
    if ids and tag.attributes.get("id") == ids[-1]:
      classes.update(tag.attributes.get("class", "").split())
  for sel in [selector] + ["." + c for c in sorted(classes)]:
    for lk in index.element_lookups(sel):
      context.append(lk.stmt)
      if lk.var is not None:
        context.extend(_uses(view, *lk.var))
  return Blame(context=tuple(context))


def _uses(view: AppView, key: str, scope) -> list[Span]:
  """The statements using a variable (or its properties) and the functions holding them."""
  out = []
  for r in view.index.refs:
    if r.scope == scope and (r.key == key or r.key.startswith(key + ".")):
      out.append(r.stmt)
      func = view.index.innermost_function(r.span)
      if func is not None:
        out.append(func.span)
  return out


def missing_selector(ev: dict[str, Any]) -> str | None:
  """The failing step's selector when it matched nothing (a count of zero included)."""
  element = ev.get("element") if isinstance(ev.get("element"), dict) else {}
  selector = ev.get("selector")
  return selector if isinstance(selector, str) and element.get("exists") is False else None


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
