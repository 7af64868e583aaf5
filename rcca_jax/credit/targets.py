"""Missing targets: the element an app most plausibly meant by a selector that matches nothing.

A policy often builds the requested element under another name (`<button id="toggle">`
where the request says `#theme-toggle`, `id="plus"` for `#inc`). `TargetFinder.guess`
ranks the static elements by
  - role: the step must be able to act on it (`fill` needs an editable field, `check` a
    checkbox, ...; anything can be clicked, elements made for it rank a little higher),
    and a tag the selector names must match;
  - name: the most similar id / class / name attribute or text (edit distance, shared
    words, a few common synonyms such as inc/plus/add/'+');
  - wiring: the element whose handler writes what the rubric's expectation reads (for
    a missing action target), or the element the rubric's actions write (for a missing
    expectation target); and static text equal to an expected text.
Elements that other selectors of the task name are taken. A guess needs enough score
and a clear lead over the runner-up; otherwise there is none (no blame beats wrong blame).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence

from rcca_jax.base import dsl
from rcca_jax.base.js_index import JsIndex
from rcca_jax.base.schema import Span, contains
from rcca_jax.evaluation import actions
from rcca_jax.evaluation.source import ParsedApp, StartTag

MIN_SCORE = 0.7        # a guess needs at least this score ...
MIN_LEAD = 0.15        # ... and this lead over the next candidate
WIRING_WEIGHT = 0.7    # a unique element wired to the rubric's other steps is plausible
MIN_SIMILARITY = 0.5   # names less alike than this count as unrelated
TEXT_BONUS = 0.4
ROLE_BONUS = 0.1       # made for the action (a button for a click): breaks near ties

_SYNONYMS = [set(g.split()) for g in (
    "inc increment increase plus add up more next +",
    "dec decrement decrease minus subtract sub down less prev previous - −",
    "count counter value display num number total score result output screen readout sum",
    "toggle switch flip", "reset clear restart", "delete remove del trash × ✕",
    "submit send save go ok confirm apply enter", "list items entries",
    "input field box entry text", "btn button", "start play begin run", "stop pause halt",
    "close dismiss hide cancel", "open show expand", "message msg status info notice feedback",
    "error err warning", "search filter query find", "name title label heading",
    "theme mode dark", "timer clock time", "color colour", "img image picture photo",
    "nav menu", "modal dialog popup")]
_SKIP_TAGS = frozenset({"html", "head", "body", "script", "style", "meta", "link", "title",
                        "br", "hr", "template", "noscript", "base"})
_CLICKABLE = frozenset({"button", "a", "summary", "label", "select", "option", "details"})
_BUTTON_TYPES = frozenset({"button", "submit", "reset", "checkbox", "radio", "image", "file",
                           "color", "range"})


@dataclasses.dataclass(frozen=True)
class Compound:
  """The last compound selector of a selector: `button#inc.big[name=x]`."""

  tag: str | None
  ids: tuple[str, ...]
  classes: tuple[str, ...]
  attrs: tuple[str, ...]          # attribute values named by [attr=value]
  attr_names: tuple[str, ...] = ()  # attributes the element must have ([attr], [attr=v])

  @property
  def names(self) -> tuple[str, ...]:
    return self.ids + self.classes + self.attrs

  def matches(self, tag: StartTag) -> bool:
    classes = tag.attributes.get("class", "").split()
    return ((self.tag is None or self.tag == tag.tag)
            and all(tag.attributes.get("id") == i for i in self.ids)
            and all(c in classes for c in self.classes)
            and all(a in tag.attributes for a in self.attr_names))


@dataclasses.dataclass(frozen=True)
class Guess:
  element: StartTag
  attribute: str                  # the identifying attribute to blame: id, class or name
  value: str                      # its value in the app


def last_compound(selector: str) -> Compound:
  """The compound after the last combinator (the element the selector returns)."""
  depth, start = 0, 0
  for i, ch in enumerate(selector):
    if ch in "[(":
      depth += 1
    elif ch in "])":
      depth -= 1
    elif depth == 0 and ch in " >+~":
      start = i + 1
  part = selector[start:].strip()
  tag = re.match(r"[A-Za-z][\w-]*", part)
  return Compound(tag.group().lower() if tag else None,
                  tuple(re.findall(r"#([\w-]+)", part)),
                  tuple(re.findall(r"\.([\w-]+)", part)),
                  tuple(re.findall(r"\[[\w-]+\s*[~|^$*]?=\s*[\"']?([^\"'\]]+)", part)),
                  tuple(a.lower() for a in re.findall(r"\[\s*([\w-]+)", part)))


def words(name: str) -> list[str]:
  """`themeToggle`, `theme-toggle`, `theme_toggle` -> ['theme', 'toggle']; symbols kept."""
  spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
  return [w.lower() for w in re.findall(r"[A-Za-z]+|\d+|[^\w\s-]", spaced)]


def _word_match(a: str, b: str) -> float:
  if a == b:
    return 1.0
  if min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)):
    return 0.9
  if any(a in g and b in g for g in _SYNONYMS):
    return 0.8
  if _abbreviates(a, b) or _abbreviates(b, a):
    return 0.8
  return 0.0


def _abbreviates(short: str, long: str) -> bool:
  """`ppl` for `people`, `btn` for `button`: same first letter, the rest in order."""
  if not short.isalpha() or len(short) < 2 or len(short) >= len(long) or short[0] != long[0]:
    return False
  rest = iter(long[1:])
  return all(c in rest for c in short[1:])


def numbers(name: str) -> tuple[str, ...]:
  return tuple(re.findall(r"\d+", name))


def name_similarity(a: str, b: str) -> float:
  """How alike two names are, in [0, 1]: edit-distance ratio or shared (synonym,
  abbreviated) words. Names that differ in their numbers (`item-3`, `item-4`) name
  different members of a family: 0."""
  if numbers(a) and numbers(b) and numbers(a) != numbers(b):
    return 0.0
  ratio = difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio()
  wa, wb = words(a), words(b)
  if not wa or not wb:
    return ratio
  best_a = sum(max(_word_match(x, y) for y in wb) for x in wa) / len(wa)
  best_b = sum(max(_word_match(x, y) for y in wa) for x in wb) / len(wb)
  return max(ratio, (max(best_a, best_b) + min(best_a, best_b)) / 2)


def can_act(verb: str, tag: StartTag) -> bool:
  """Whether a DSL action can work on this element at all (anything can be clicked)."""
  a = tag.attributes
  kind = a.get("type", "").lower()
  if verb == "fill":
    return (tag.tag == "textarea" or "contenteditable" in a
            or (tag.tag == "input" and kind in actions.TEXT_INPUTS))
  if verb == "select":
    return tag.tag == "select"
  if verb in ("check", "uncheck"):
    return tag.tag == "input" and kind in ("checkbox", "radio")
  return True


def looks_interactive(verb: str, tag: StartTag, bound: bool) -> bool:
  """Whether the element is made for the action (a button for a click, a field for keys)."""
  a = tag.attributes
  kind = a.get("type", "").lower()
  if bound or any(k.startswith("on") for k in a):
    return True
  if verb in ("click", "dblclick"):
    return (tag.tag in _CLICKABLE or (tag.tag == "input" and kind in _BUTTON_TYPES)
            or a.get("role") in ("button", "tab", "link", "checkbox", "switch", "menuitem"))
  if verb == "press":
    return tag.tag in ("input", "textarea", "button", "select") or "tabindex" in a
  return verb in ("fill", "select", "check", "uncheck")


def _selects(selector: str, tag: StartTag) -> bool:
  """Whether one of a selector list's last compounds (tag, classes, [attr]) matches."""
  for part in selector.split(","):
    want = last_compound(part)
    if (want.tag or want.classes or want.attr_names) and want.matches(tag):
      return True
  return False


class TargetFinder:
  """Ranks an app's static elements as the intended target of a missing selector."""

  def __init__(self, app: ParsedApp, index: JsIndex):
    self.app = app
    self.index = index
    self.tags = [t for t in app.start_tags if t.tag not in _SKIP_TAGS]

  def element_text(self, tag: StartTag) -> str:
    end = self.app.html.find("<", tag.app_span[1])
    return " ".join(self.app.html[tag.app_span[1]:end if end >= 0 else None].split())[:80]

  def selectors_for(self, tag: StartTag) -> list[str]:
    out = ["#" + tag.attributes["id"]] if tag.attributes.get("id") else []
    return out + ["." + c for c in tag.attributes.get("class", "").split()]

  def bindings_of(self, tag: StartTag, events: Sequence[str] | None = None) -> list:
    """Event bindings put on the element: on* attributes, and listeners on its look-ups."""
    lookups = [lk for sel in self.selectors_for(tag) for lk in self.index.element_lookups(sel)]
    lookups += [lk for lk in self.index.lookups if lk.method in ("querySelector",
                "querySelectorAll") and "#" not in lk.arg and _selects(lk.arg, tag)]
    keys = {lk.var[0] for lk in lookups if lk.var}
    chained = {lk.stmt for lk in lookups if lk.var is None}
    return [b for b in self.index.bindings
            if (events is None or b.event in events)
            and ((b.target == "<attribute>" and contains(tag.app_span, b.stmt))
                 or b.target in keys or b.stmt in chained)]

  def closure(self, spans: Iterable[Span]) -> list[Span]:
    """Function spans reachable from `spans` through calls of app functions."""
    todo, seen = list(spans), set()
    while todo:
      span = todo.pop()
      if span in seen:
        continue
      seen.add(span)
      for call in self.index.calls:
        if contains(span, call.span):
          todo.extend(f.span for f in self.index.functions_named(call.name))
    return sorted(seen)

  def handler_spans(self, bindings: Iterable) -> list[Span]:
    spans = []
    for b in bindings:
      if b.handler_span is not None:
        spans.append(b.handler_span)
      elif b.target == "<attribute>":
        spans.append(b.stmt)
      spans.extend(f.span for f in self.index.functions_named(b.handler_name or ""))
    return self.closure(spans)

  def odd_one_out(self, tag: StartTag, want: Compound) -> bool:
    """`#slide-4` wanted, `slide-1..3` present: an element of the same tag and class as
    those whose own id breaks their pattern is the one renamed."""
    pattern = [re.sub(r"\d+", "#", i) for i in want.ids if numbers(i)]
    own = tag.attributes.get("id", "")
    if not pattern or re.sub(r"\d+", "#", own) in pattern:
      return False
    classes = set(tag.attributes.get("class", "").split())
    return bool(classes) and any(
        t is not tag and t.tag == tag.tag and classes & set(t.attributes.get("class", "").split())
        and re.sub(r"\d+", "#", t.attributes.get("id", "")) in pattern for t in self.tags)

  def reads_in(self, tag: StartTag, spans: Sequence[Span]) -> bool:
    """Whether code in `spans` looks the element up or uses the variable holding it."""
    for sel in self.selectors_for(tag):
      for lk in self.index.element_lookups(sel):
        if any(contains(s, lk.stmt) for s in spans):
          return True
        if lk.var is not None and any(
            r.scope == lk.var[1] and (r.key == lk.var[0] or r.key.startswith(lk.var[0] + "."))
            and any(contains(s, r.span) for s in spans) for r in self.index.refs):
          return True
    return False

  def writes_in(self, selector: str, spans: Sequence[Span]) -> bool:
    return any(contains(s, w) for w in self.index.element_writes(selector) for s in spans)

  def guess(self, selector: str, failing: tuple[str, str | None, str | None],
            check: Sequence[dsl.Step], expected: object,
            taken: Iterable[str], action_handlers: Sequence[Span],
            events: Sequence[str]) -> tuple[Guess | None, list[dict]]:
    """The plausible target of `selector` (None when nothing is plausible) and the
    ranked candidates (for the evidence)."""
    want = last_compound(selector)
    verb, kind, _ = failing
    taken_ids = {i for sel in taken if sel != selector for i in last_compound(sel).ids}
    expect_sels = [s.selector for s in check
                   if s.verb == "expect" and s.selector and s.selector != selector]
    others = self.handler_spans([b for s in check if s.verb != "expect"
                                 and s.selector is not None and s.selector != selector
                                 for t in self.tags if last_compound(s.selector).matches(t)
                                 for b in self.bindings_of(t)])
    ranked = []
    for tag in self.tags:
      if tag.attributes.get("id") in taken_ids:
        continue
      if want.tag is not None and tag.tag != want.tag:
        continue
      bound = self.bindings_of(tag, events) if verb != "expect" else []
      if verb != "expect" and not can_act(verb, tag):
        continue
      if kind == "value" and tag.tag not in ("input", "textarea", "select"):
        continue
      score, attr, value, why = self._score(tag, want, verb, kind, expected, bound,
                                            expect_sels, action_handlers, others)
      if score > 0:
        ranked.append((score, tag.app_span, tag, attr, value, why))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    shown = [{"element": self.app.html[r[1][0]:r[1][1]][:120], "score": round(r[0], 3),
              "why": r[5]} for r in ranked[:3]]
    if not ranked or ranked[0][0] < MIN_SCORE:
      return None, shown
    if len(ranked) > 1 and ranked[0][0] - ranked[1][0] < MIN_LEAD:
      return None, shown
    _, _, tag, attr, value, _ = ranked[0]
    return Guess(tag, attr, value), shown

  def _score(self, tag: StartTag, want: Compound, verb: str, kind: str | None,
             expected: object, bound: list, expect_sels: Sequence[str],
             action_handlers: Sequence[Span],
             others: Sequence[Span]) -> tuple[float, str, str, str]:
    """(score, identifying attribute, its value, why) of one candidate."""
    sim, attr, value = self._name_score(tag, want)
    why = [f"name {sim:.2f}"]
    if verb != "expect":
      wiring = 0.5 if bound else 0.0
      if bound and any(self.writes_in(sel, self.handler_spans(bound)) for sel in expect_sels):
        wiring = 1.0                                 # its handler writes what is expected
      if others and self.reads_in(tag, others):    # e.g. a field read by the submit handler
        wiring = 1.0
    else:
      own = self.selectors_for(tag)
      wiring = 0.0
      if action_handlers and any(self.writes_in(sel, action_handlers) for sel in own):
        wiring = 1.0                                 # what the rubric's actions write
      elif any(self.index.element_writes(sel) for sel in own):
        wiring = 0.5
    if self.odd_one_out(tag, want):
      wiring = max(wiring, 1.0)
      why.append("the odd one of its family")
    if wiring:
      why.append(f"wiring {wiring:g}")
    bonus = 0.0
    if verb not in ("expect", "hover") and looks_interactive(verb, tag, bool(bound)):
      bonus += ROLE_BONUS
      why.append("interactive")
    text = self.element_text(tag)
    if (kind in ("text", "number") and isinstance(expected, (str, int, float)) and text
        and text == " ".join(str(expected).split())):
      bonus += TEXT_BONUS
      why.append("text equal")
    return sim + WIRING_WEIGHT * wiring + bonus, attr, value, ", ".join(why)

  def _name_score(self, tag: StartTag, want: Compound) -> tuple[float, str, str]:
    """The best similarity of the wanted names to the element's id / classes / name (or
    short text), and the attribute that achieves it (the id when none does)."""
    attrs = [("id", tag.attributes.get("id", ""))]
    attrs += [("class", c) for c in tag.attributes.get("class", "").split()]
    attrs += [("name", tag.attributes.get("name", ""))]
    attrs = [(a, v) for a, v in attrs if v]
    text = self.element_text(tag)
    sim, attr, value = 0.0, *(attrs[0] if attrs else ("", ""))
    for name in want.names:
      for a, v in attrs:
        s = name_similarity(name, v)
        if s > sim:
          sim, attr, value = s, a, v
      if text and len(text) <= 20:
        sim = max(sim, 0.9 * name_similarity(name, text))
    # The attribute to blame is the one of the kind the selector named, when it has it.
    kind = "id" if want.ids else "class" if want.classes else None
    if kind and attr != kind and kind in tag.attributes:
      attr, value = kind, (tag.attributes[kind] if kind == "id" else max(
          tag.attributes[kind].split(), key=lambda c: max(
              name_similarity(n, c) for n in want.names)))
    return (sim if sim >= MIN_SIMILARITY else 0.0), attr, value

  def attribute_span(self, tag: StartTag, attr: str, value: str) -> Span:
    """The `attr="value"` text in the start tag (the whole start tag when not found)."""
    s, e = tag.app_span
    m = re.search(r"\b" + re.escape(attr) + r"\s*=\s*([\"']?)[^\"'>]*?\b" + re.escape(value)
                  + r"\b[^\"'>]*?\1(?=[\s/>])", self.app.html[s:e]) if attr else None
    return (s + m.start(), s + m.end()) if m else (s, e)

  def references(self, attr: str, value: str) -> list[Span]:
    """JS statements whose string literals name `value` as an id / class / name."""
    if not attr:
      return []
    pat = re.compile(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])")
    return sorted({stmt for text, stmt in self.index.strings if pat.search(text)})
