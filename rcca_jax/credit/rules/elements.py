"""Elements and missing targets: the element a failed step inspected -> its markup and the
code that makes it; a selector that matched nothing -> the element the app most plausibly
meant (`targets`), with a note saying which, or why none."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rcca_jax.base import dsl
from rcca_jax.base.schema import Span, contains, subtract_spans
from rcca_jax.credit.rules.view import NOTHING, SMALL_ELEMENT, AppView, Blame, is_span, steps
from rcca_jax.credit.targets import MIN_SCORE, last_compound
from rcca_jax.evaluation.actions import ACTION_EVENTS

_JS_LOOKUP = re.compile(r"(getElementById|querySelector(?:All)?)\(\s*[\"'`]([^\"'`]+)[\"'`]")


def element_blame(ev: dict[str, Any], view: AppView) -> Blame:
  """The element a failed step inspected: static markup, and the code that makes it."""
  selector = ev.get("selector")
  parsed = steps(ev.get("step"), keep_expect=True)
  step = parsed[0] if parsed else None
  blame = js_target_blame(ev, step, view) if step is not None and step.expect == "js" else NOTHING
  if not isinstance(selector, str) or step is None:
    return blame
  element = ev.get("element") if isinstance(ev.get("element"), dict) else {}
  counted = (step.expect == "count" and isinstance(ev.get("observed"), (int, float))
             and ev["observed"] > 0)
  if element.get("exists") is False and not counted:
    creators = _creators(view, selector)
    blame += Blame(tuple(creators))
    want = last_compound(selector)
    if want.ids or (want.classes and not creators):   # a name the app may have changed
      return blame + missing_target_blame(ev, selector, step, view)
    if (absent := _absent_id(view, selector)) is not None:    # `#renamed option`
      return blame + missing_target_blame(ev, absent, step, view, as_expectation=True)
    return blame
  markup = _markup(view, ev, selector)
  if step.verb != "expect":
    return blame + Blame(tuple(markup))
  if step.expect == "style":
    if not ev.get("css_rules"):        # inline style, or styles set from JS
      blame += Blame(tuple(markup)) + _writes(view, selector)
    return blame
  initial = not steps(ev.get("path"))
  if initial or step.expect in ("exists", "visible", "hidden", "count", "attr"):
    blame += Blame(tuple(markup or _creators(view, selector)))
  if step.expect not in ("no_errors", "js"):
    blame += _writes(view, selector)
  return blame


def missing_target_blame(ev: dict[str, Any], selector: str, step: dsl.Step, view: AppView,
                         as_expectation: bool = False) -> Blame:
  """A selector that matched nothing: blame the element the app most plausibly meant
  (its identifying attribute and the code naming it); its wiring is context. When no
  element is plausible, the note says so and nothing is blamed.
  `as_expectation`: the selector is only part of what the step named (an ancestor, or
  a look-up inside `expect js`), so any element may be meant."""
  finder = view.targets
  check = steps(ev.get("check") or ev.get("path"), keep_expect=True)
  verb, kind = ("expect", "exists") if as_expectation else (
      step.verb, step.expect if step.verb == "expect" else None)
  handlers = _action_handlers(ev, selector, view)
  guess, ranked = finder.guess(selector, (verb, kind, selector), check,
                               ev.get("expected"), ev.get("rubric_selectors") or [],
                               handlers, ACTION_EVENTS.get(verb, ()))
  note = {"selector": selector, "candidates": ranked,
          "guess": None if guess is None else ranked[0]["element"]}
  if guess is None:
    note["why"] = ("no element is plausible" if not ranked or ranked[0]["score"] < MIN_SCORE
                   else "several elements are equally plausible")
    return Blame(note=note)
  direct = [finder.attribute_span(guess.element, guess.attribute, guess.value)]
  context: list[Span] = []
  shared = guess.attribute == "class" and sum(
      guess.value in t.attributes.get("class", "").split() for t in finder.tags) > 1
  if not shared:
    for stmt in finder.references(guess.attribute, guess.value):
      callbacks = [f.span for f in view.index.functions if contains(stmt, f.span)
                   and f.span != stmt]
      direct.extend(subtract_spans([stmt], callbacks))
      context.extend(callbacks)
  bindings = finder.bindings_of(guess.element)
  context.extend(b.stmt for b in bindings)
  context.extend(finder.handler_spans(bindings))
  for sel in finder.selectors_for(guess.element):
    context.extend(view.index.element_writes(sel))
  context.append(guess.element.app_span)
  return Blame(tuple(direct), tuple(context), note)


def js_target_blame(ev: dict[str, Any], step: dsl.Step, view: AppView) -> Blame:
  """`expect js` reading an element that does not exist: its missing target."""
  for method, arg in _JS_LOOKUP.findall(str(step.value)):
    selector = "#" + arg if method == "getElementById" else arg
    if _creators(view, selector):
      continue
    absent = _absent_id(view, selector)
    if absent is not None:
      return missing_target_blame(ev, absent, step, view, as_expectation=True)
  return NOTHING


def _writes(view: AppView, selector: str) -> Blame:
  """Statements that change the element, and app functions computing what they write;
  the look-ups that fetch the element are context."""
  direct: list[Span] = []
  for stmt in view.index.element_writes(selector):
    direct.append(stmt)
    direct.extend(view.callees(stmt))
  return Blame(tuple(direct), tuple(view.index.element_lookup_statements(selector)))


def _markup(view: AppView, ev: dict[str, Any], selector: str) -> list[Span]:
  """Static markup of the element: the evaluator's `element_source` (the start tag,
  widened to the whole element when that is small), else by its id."""
  if not is_span(ev.get("element_source")):
    return view.markup_by_id(selector)
  tag = view.span_to_app(ev["element_source"])
  if tag is None:
    return []
  for t in view.id_elements:
    if t.app_span == tag:
      small = t.element_span[1] - t.element_span[0] <= SMALL_ELEMENT
      return [t.element_span if small else tag]
  return [tag]


def _creators(view: AppView, selector: str) -> list[Span]:
  """JS statements whose string literals name the selector's id or classes: the name
  alone, as a selector (`#x`, `.x`) or in markup (`id="x"`, `class="a x"`)."""
  names = re.findall(r"[#.]([\w-]+)", selector)
  if not names:
    return []
  pats = [re.compile(r"^[\"'`]\s*" + re.escape(n) + r"\s*[\"'`]$|[#.]" + re.escape(n)
                     + r"(?![\w-])|\b(?:id|class)\s*=\s*[\"'][^\"']*(?<![\w-])" + re.escape(n)
                     + r"(?![\w-])") for n in names]
  return sorted({stmt for text, stmt in view.index.strings if any(p.search(text) for p in pats)})


def _absent_id(view: AppView, selector: str) -> str | None:
  """`#x` for the first id in the selector that no static element has."""
  known = {t.attributes.get("id") for t in view.targets.tags}
  return next((f"#{i}" for i in re.findall(r"#([\w-]+)", selector) if i not in known), None)


def _action_handlers(ev: dict[str, Any], missing: str, view: AppView) -> Sequence[Span]:
  """Handler functions (and what they call) of the elements the rubric acted on."""
  spans = []
  for lst in ev.get("listeners") or []:
    pos = view.position(lst) if isinstance(lst, dict) else None
    func = view.index.function_at(pos) if pos is not None else None
    if func is not None:
      spans.append(func.span)
  finder = view.targets
  for action in steps(ev.get("path")):
    if action.selector and action.selector != missing:
      for tag in finder.tags:
        if last_compound(action.selector).matches(tag):
          spans.extend(finder.handler_spans(finder.bindings_of(tag)))
  return finder.closure(spans)
