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
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable, Sequence

from rcca_jax.credit.context import FUNCTION_TYPES, JsIndex
from rcca_jax.evaluation.extract import Extraction, extract_app
from rcca_jax.evaluation.source import ParsedApp, parse_app

OPERATORS = ("handler_op", "drop_listener", "misspell_id", "break_css", "throw")
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


def mutants(response: str, *, seed: int = 0, per_operator: int | None = None,
            operators: Sequence[str] = OPERATORS) -> list[Mutant]:
  """Mutants of `response`, at most `per_operator` per operator (all when None).

  Deterministic: the same response, seed and arguments give the same mutants.
  """
  unknown = set(operators) - set(OPERATORS)
  if unknown:
    raise ValueError(f"unknown mutation operators {sorted(unknown)}; known: {OPERATORS}")
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
  spans = ext.span_to_response(site.start, site.end) if site.end > site.start else []
  if site.end > site.start and (len(spans) != 1 or spans[0][1] - spans[0][0] != site.end - site.start):
    return None
  if site.end == site.start:
    pos = ext.to_response(site.start)
    if pos is None:
      return None
    spans = [(pos, pos)]
  s, e = spans[0]
  text = response[:s] + site.replacement + response[e:]
  return Mutant(op, text, (s, s + len(site.replacement)), site.description)


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
    for node in _walk(block.tree.root_node):
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
    for node in _walk(block.tree.root_node):
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
    for node in _walk(block.tree.root_node):
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
    for node in _walk(block.tree.root_node):
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


def _function_label(node, html: str, block) -> str:
  name = node.child_by_field_name("name")
  if name is not None:
    return name.text.decode()
  start = block.node_app_span(node)[0]
  return f"the anonymous function at app line {html.count(chr(10), 0, start) + 1}"


def _walk(node) -> Iterable:
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
}
