"""Bug operators on a web-app response, for measuring localization (mutation testing).

Each mutant is the response with one small bug and the response span of the bug (the
characters that were changed; an empty span where text was deleted). Sites are found on
the tree-sitter trees of `ParsedApp`; which sites are used is fixed by the seed.

Operators:
  handler_op     change an operator or a number/string/boolean constant in an event handler
                 (or in an app function that a handler calls)
  drop_listener  delete an event binding (addEventListener call, el.onX =, on*="...")
  misspell_id    misspell an element id that the JS looks up
  break_css      misspell the property of a CSS declaration
  throw          throw an error at the start of a function body
Failures a trained policy makes (`EXTRA_OPERATORS`, not in the default set; `hang`
mutants cost a deadline each):
  rename_id      rename an element id consistently in HTML, CSS and JS (suffix, dropped
                 word, camel/kebab case, no vowels, or an opaque name): no runtime error,
                 only the rubrics that name the id fail; the bug is the id attribute
                 (ids the JS builds from pieces, `"vote-" + key`, are left alone)
  wrong_event    bind a listener to a misspelt or wrong event (`clik`, `dblclick` for
                 `click`, `change` for `input`); the bug is the event name
  syntax         leave a block, string or template literal unclosed (its closer deleted);
                 the bug is the construct left open (its opening delimiter)
  hang           an endless loop at load (top level of a script) or first thing in an
                 event handler; the bug is the inserted loop
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
from collections.abc import Iterable, Sequence

from rcca_jax.base.js_index import FUNCTION_TYPES, JsIndex
from rcca_jax.evaluation.extract import Extraction, extract_app
from rcca_jax.evaluation.source import ParsedApp, parse_app

OPERATORS = ("handler_op", "drop_listener", "misspell_id", "break_css", "throw")
EXTRA_OPERATORS = ("rename_id", "wrong_event", "syntax", "hang")
ALL_OPERATORS = OPERATORS + EXTRA_OPERATORS
_SWAPS = {"+": "-", "-": "+", "*": "/", "/": "*", "<": "<=", "<=": "<", ">": ">=", ">=": ">",
          "===": "!==", "!==": "===", "==": "!=", "!=": "==", "&&": "||", "||": "&&",
          "+=": "-=", "-=": "+=", "*=": "/=", "/=": "*=", "++": "--", "--": "++", "%": "*",
          "true": "false", "false": "true"}
_THROW = 'throw new Error("injected fault");'


@dataclasses.dataclass(frozen=True)
class Mutant:
  operator: str
  response: str
  bug_span: tuple[int, int]     # response span of the mutated characters (in `response`)
  description: str


@dataclasses.dataclass(frozen=True)
class _Site:
  start: int                    # app span replaced
  end: int
  replacement: str
  description: str
  also: tuple[tuple[int, int, str], ...] = ()   # further edits of the same mutant
  bug: tuple[int, int] | None = None            # app span of the bug, when not the edit


def mutants(response: str, *, seed: int = 0, per_operator: int | None = None,
            operators: Sequence[str] = OPERATORS) -> list[Mutant]:
  """Mutants of `response`, at most `per_operator` per operator (all when None).

  Deterministic: the same response, seed and arguments give the same mutants.
  """
  unknown = set(operators) - set(ALL_OPERATORS)
  if unknown:
    raise ValueError(f"unknown mutation operators {sorted(unknown)}; known: {ALL_OPERATORS}")
  ext = extract_app(response)
  if ext is None:
    return []
  app = parse_app(ext.html)
  index = JsIndex(app)
  out = []
  for op in operators:
    sites = _FINDERS[op](app, index)
    if per_operator is not None and len(sites) > per_operator:
      sites = sorted(random.Random(f"{seed}:{op}").sample(sites, per_operator),
                     key=lambda s: (s.start, s.end))
    for site in sites:
      mutant = _apply(response, ext, op, site)
      if mutant is not None:
        out.append(mutant)
  return out


def _apply(response: str, ext: Extraction, op: str, site: _Site) -> Mutant | None:
  edits = []
  for start, end, text in ((site.start, site.end, site.replacement), *site.also):
    span = response_span(ext, start, end)
    if span is None:
      return None
    edits.append((span[0], span[1], text))
  if len({(s, e) for s, e, _ in edits}) != len(edits):
    return None
  bug = site.bug or (site.start, site.start + len(site.replacement))
  anchor = response_span(ext, bug[0], bug[0]) if site.bug else None
  out = response
  for s, e, text in sorted(edits, reverse=True):
    out = out[:s] + text + out[e:]
  def shifted(pos: int, edits) -> int:   # a response position before the edits -> after
    return pos + sum(len(t) - (e - s) for s, e, t in edits if e <= pos)
  if site.bug:
    start = shifted(anchor[0], edits)
    return Mutant(op, out, (start, start + bug[1] - bug[0]), site.description)
  s = shifted(edits[0][0], edits[1:])
  return Mutant(op, out, (s, s + len(site.replacement)), site.description)


def response_span(ext: Extraction, start: int, end: int) -> tuple[int, int] | None:
  """The one response span of an app span (a position for an empty one), or None."""
  if end == start:
    pos = ext.to_response(start)
    return None if pos is None else (pos, pos)
  spans = ext.span_to_response(start, end)
  if len(spans) != 1 or spans[0][1] - spans[0][0] != end - start:
    return None
  return spans[0]


def _handler_spans(index: JsIndex) -> list[tuple[int, int]]:
  """Bound handlers and the app functions they call, transitively."""
  spans = set()
  for b in index.bindings:
    if b.handler_span is not None:
      spans.add(b.handler_span)
    spans.update(f.span for f in index.functions_named(b.handler_name or ""))
  todo = sorted(spans)
  while todo:
    a, b = todo.pop()
    for call in index.calls:
      if a <= call.span[0] and call.span[1] <= b:
        for f in index.functions_named(call.name):
          if f.span not in spans:
            spans.add(f.span)
            todo.append(f.span)
  return sorted(spans)


def _handler_op_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  handlers = _handler_spans(index)
  sites = []
  for block in app.js_blocks():
    for node in walk(block.tree.root_node):
      site = None
      if node.type in ("binary_expression", "augmented_assignment_expression", "update_expression"):
        op = node.child_by_field_name("operator")
        if op is not None and op.type in _SWAPS:
          s, e = block.node_app_span(op)
          site = _Site(s, e, _SWAPS[op.type], f"operator {op.type} -> {_SWAPS[op.type]}")
      elif node.type == "number":
        text = node.text.decode()
        if re.fullmatch(r"\d+", text):
          s, e = block.node_app_span(node)
          for value in sorted({int(text) + 1, max(0, int(text) - 1)} - {int(text)}):
            sites.append(_Site(s, e, str(value), f"constant {text} -> {value}"))
      elif node.type == "string_fragment" and node.parent.type == "string":
        text = node.text.decode()
        s, e = block.node_app_span(node)
        site = _Site(s, e, text + "x", f"constant {text!r} -> {text + 'x'!r}")
      elif node.type in ("true", "false"):
        s, e = block.node_app_span(node)
        site = _Site(s, e, _SWAPS[node.type], f"constant {node.type} -> {_SWAPS[node.type]}")
      if site is not None:
        sites.append(site)
  return [x for x in sites if any(a <= x.start and x.end <= b for a, b in handlers)]


def _drop_listener_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  sites = {}
  for b in index.bindings:
    s, e = b.stmt
    if b.target == "<attribute>":
      m = re.search(r"\s+on[a-z]+\s*=\s*[\"']?\Z", app.html[max(0, s - 40):s], re.IGNORECASE)
      if m is None:
        continue
      s = s - len(m.group())
      if e < len(app.html) and app.html[e] in "\"'":
        e += 1
    sites[(s, e)] = _Site(s, e, "", f"drop {b.event or 'event'} binding at {app.html[s:e][:40]!r}")
  # Deleting a statement that holds another binding's statement would drop two.
  spans = sorted(sites)
  return [sites[k] for k in spans
          if not any(o != k and o[0] <= k[0] and k[1] <= o[1] for o in spans)]


def _misspell_id_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  static_ids = set(re.findall(r"\bid\s*=\s*[\"']([\w-]+)[\"']", app.html))
  sites = []
  for block in app.js_blocks():
    for node in walk(block.tree.root_node):
      if node.type != "call_expression":
        continue
      fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
      if fn is None or args is None or fn.type != "member_expression" or not args.named_children:
        continue
      prop = fn.child_by_field_name("property")
      arg = args.named_children[0]
      if prop is None or arg.type != "string" or not arg.named_children:
        continue
      method, frag = prop.text.decode(), arg.named_children[0]
      value = frag.text.decode()
      if method == "getElementById":
        name, offset = value, 0
      elif method in ("querySelector", "querySelectorAll") and re.fullmatch(r"#[\w-]+", value):
        name, offset = value[1:], 1
      else:
        continue
      if name not in static_ids or len(name) < 2:
        continue
      s, e = block.node_app_span(frag)
      swapped = name[:-2] + name[-1] + name[-2] if name[-1] != name[-2] else name + "x"
      for typo in (swapped, name[:-1]):
        sites.append(_Site(s + offset, e, typo, f"id {name!r} -> {typo!r} in {method}"))
  return sites


def _break_css_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  del index
  sites = []
  for block in app.css_blocks():
    if block.kind != "style":
      continue
    for node in walk(block.tree.root_node):
      if node.type != "declaration" or len(node.named_children) < 2:
        continue
      prop, value = node.named_children[0], node.named_children[1]
      name = prop.text.decode()
      if prop.type == "property_name" and len(name) >= 3:
        s, e = block.node_app_span(prop)
        typo = name[:1] + name[2:]
        sites.append(_Site(s, e, typo, f"css property {name!r} -> {typo!r}"))
      text = value.text.decode()
      if text:
        s, e = block.node_app_span(value)
        sites.append(_Site(s, e, text + "q", f"css value {text!r} -> {text + 'q'!r}"))
  return sites


def _throw_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  """Before each statement directly in a function body."""
  del index
  sites = []
  for block in app.js_blocks():
    for node in walk(block.tree.root_node):
      body = node.child_by_field_name("body") if node.type in FUNCTION_TYPES else None
      if body is None or body.type != "statement_block":
        continue
      for k, stmt in enumerate(body.named_children):
        if stmt.type == "comment":
          continue
        pos = block.node_app_span(stmt)[0]
        sites.append(_Site(pos, pos, _THROW + " ", f"throw before statement {k + 1} of "
                           f"{_function_label(node, app.html, block)}"))
  return sorted(set(sites), key=lambda s: (s.start, s.end))


def _rename_id_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  """Each static id renamed in its attribute, `for=` labels, CSS `#id` and JS strings."""
  del index
  ids = collections.Counter(t.attributes.get("id") for t in app.start_tags)
  taken = set(ids)
  pieces = {f for block in app.js_blocks() for node in walk(block.tree.root_node)
            if node.type == "string_fragment" for f in [node.text.decode()]}
  sites = []
  for tag in app.start_tags:
    name = tag.attributes.get("id", "")
    if not re.fullmatch(r"[A-Za-z][\w-]*", name) or ids[name] != 1:
      continue
    if any(p != name and len(p) >= 2 and ((name.startswith(p) and p[-1] in "-_")
                                          or (name.endswith(p) and p[0] in "-_"))
           for p in pieces):
      continue                          # built in the JS ("vote-" + key): not renamed there
    value = _attribute_value_span(app.html, tag.app_span, "id", name)
    if value is None:
      continue
    refs = _name_references(app, name)
    for style, new in _renames(name, tag.tag):
      if new in taken:
        continue
      sites.append(_Site(value[0], value[1], new, f"id {name!r} -> {new!r} ({style}, "
                         f"{len(refs)} more places)", also=tuple((a, b, new) for a, b in refs)))
  return sites


def _renames(name: str, tag: str) -> list[tuple[str, str]]:
  """(style, new name) renames of an id, as a policy might have written it."""
  parts = [p for p in re.split(r"[-_]|(?<=[a-z0-9])(?=[A-Z])", name) if p]
  out = [("suffix", name + {"button": "-btn", "input": "-field", "select": "-menu"}
          .get(tag, "-box"))]
  if len(parts) > 1:
    out.append(("dropped word", "-".join(parts[1:]).lower()))
    camel = parts[0].lower() + "".join(p.capitalize() for p in parts[1:])
    out.append(("case", camel if camel != name else "-".join(parts).lower()))
  stripped = name[0] + re.sub(r"[aeiou]", "", name[1:])
  if len(name) >= 5 and stripped != name:
    out.append(("no vowels", stripped))
  out.append(("opaque", f"{tag[:3]}{sum(map(ord, name)) % 90 + 10}"))
  return out


def _attribute_value_span(html: str, tag_span, attr: str, value: str) -> tuple[int, int] | None:
  s, e = tag_span
  m = re.search(r"\b" + attr + r"\s*=\s*([\"']?)(" + re.escape(value) + r")\1(?=[\s/>])",
                html[s:e])
  return (s + m.start(2), s + m.end(2)) if m else None


def _name_references(app: ParsedApp, name: str) -> list[tuple[int, int]]:
  """App spans naming an id elsewhere: `for=` attributes, `#id` in CSS and in JS strings,
  JS strings equal to the id (getElementById)."""
  out = []
  for tag in app.start_tags:
    if tag.attributes.get("for") == name:
      span = _attribute_value_span(app.html, tag.app_span, "for", name)
      if span:
        out.append(span)
  hash_ref = re.compile(r"#" + re.escape(name) + r"(?![\w-])")
  for block in app.css_blocks():
    for m in hash_ref.finditer(block.text):
      if block.char_map is None:
        out.append((block.app_start + m.start() + 1, block.app_start + m.end()))
  for block in app.js_blocks():
    for node in walk(block.tree.root_node):
      if node.type != "string_fragment" and not (
          node.type == "template_string" and not node.named_children):
        continue
      s, e = block.node_app_span(node)
      text = app.html[s:e]
      if node.type == "template_string":
        s, e, text = s + 1, e - 1, text[1:-1]
      if text == name:
        out.append((s, e))
      else:
        out.extend((s + m.start() + 1, s + m.end()) for m in hash_ref.finditer(text))
  return out


_EVENT_SWAPS = {"click": "dblclick", "input": "change", "keyup": "keydown"}


def _wrong_event_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  """The event name of each binding, misspelt (a letter dropped) or swapped."""
  sites = []
  for b in index.bindings:
    if not b.event or len(b.event) < 3:
      continue
    span = _event_name_span(app, b)
    if span is None:
      continue
    wrong = [b.event[:-2] + b.event[-1]] + ([_EVENT_SWAPS[b.event]]
                                           if b.event in _EVENT_SWAPS else [])
    for event in wrong:
      sites.append(_Site(span[0], span[1], event, f"event {b.event!r} -> {event!r} at "
                         f"{app.html[b.stmt[0]:b.stmt[1]][:40]!r}"))
  return sites


def _event_name_span(app: ParsedApp, b) -> tuple[int, int] | None:
  """App span of the event name in a binding: the string, `onX` or the attribute name."""
  s, e = b.stmt
  if b.target == "<attribute>":
    base = max(0, s - 40)
    m = re.search(r"\bon(" + re.escape(b.event) + r")\s*=\s*[\"']?\Z", app.html[base:s],
                  re.IGNORECASE)
    return (base + m.start(1), base + m.end(1)) if m else None
  text = app.html[s:e]
  m = (re.search(r"addEventListener\(\s*([\"'`])(" + re.escape(b.event) + r")\1", text)
       or re.search(r"\.on(" + re.escape(b.event) + r")\s*=", text))
  if m is None:
    return None
  group = m.lastindex
  return s + m.start(group), s + m.end(group)


def _syntax_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  """Delete the closer of a block, string or template literal in a <script>."""
  del index
  sites = []
  for block in app.js_blocks():
    if block.kind != "script":
      continue
    for node in walk(block.tree.root_node):
      if node.type == "statement_block" and node.parent is not None and (
          node.parent.type in FUNCTION_TYPES or node.parent.type.endswith("_statement")):
        what = "block"
      elif node.type in ("string", "template_string") and node.end_byte - node.start_byte > 2:
        what = "template literal" if node.type == "template_string" else "string"
      else:
        continue
      s, e = block.node_app_span(node)
      if node.type == "statement_block" and app.html[e - 1] != "}":
        continue
      sites.append(_Site(e - 1, e, "", f"unclosed {what} at app offset {s}: "
                         f"{app.html[s:min(e, s + 30)]!r}", bug=(s, s + 1)))
  return sites


_LOOPS = ("while (true) {}", "for (;;) {}")


def _hang_sites(app: ParsedApp, index: JsIndex) -> list[_Site]:
  """An endless loop before a top-level statement of a script (a hang at load) or as the
  first statement of a bound handler."""
  sites = []
  for block in app.js_blocks():
    if block.kind != "script":
      continue
    for k, stmt in enumerate(block.tree.root_node.named_children):
      if stmt.type != "comment":
        pos = block.node_app_span(stmt)[0]
        loop = _LOOPS[k % 2]
        sites.append(_Site(pos, pos, loop + " ", f"loop at load before top-level statement {k + 1}"))
  for span in sorted({b.handler_span for b in index.bindings if b.handler_span}
                     | {f.span for b in index.bindings
                        for f in index.functions_named(b.handler_name or "")}):
    func = next((f for f in index.functions if f.span == span), None)
    if func is None or func.body == func.span or app.html[func.body[0]] != "{":
      continue
    pos = func.body[0] + 1
    sites.append(_Site(pos, pos, " " + _LOOPS[0], f"loop in the handler at app offset {span[0]}"))
  return sorted(set(sites), key=lambda s: (s.start, s.end))


def _function_label(node, html: str, block) -> str:
  name = node.child_by_field_name("name")
  if name is not None:
    return name.text.decode()
  start = block.node_app_span(node)[0]
  return f"the anonymous function at app line {html.count(chr(10), 0, start) + 1}"


def walk(node) -> Iterable:
  """Every node of a tree-sitter subtree, pre-order, error nodes included."""
  stack = [node]
  while stack:
    n = stack.pop()
    yield n
    stack.extend(reversed(n.children))


_FINDERS = {
    "handler_op": _handler_op_sites,
    "drop_listener": _drop_listener_sites,
    "misspell_id": _misspell_id_sites,
    "break_css": _break_css_sites,
    "throw": _throw_sites,
    "rename_id": _rename_id_sites,
    "wrong_event": _wrong_event_sites,
    "syntax": _syntax_sites,
    "hang": _hang_sites,
}
