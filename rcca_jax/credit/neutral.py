"""Neutral rewrites of a web-app response: edits no rubric can see (controlled setting).

Each rewrite is one contiguous edit of the response (a `sites.Site` of kind "neutral":
span of the response and the text that replaces it) that keeps the program's behaviour,
or changes only what the task's rubrics do not read. They are candidates: the
controlled setting keeps one only when the browser gives the rewritten response exactly
the reference's reward and rubric outcomes.

Kinds:
  statement_form  an equivalent statement: `x op= y` <-> `x = x op y`, `x++;` -> `x += 1;`,
                  an arrow's expression body -> a block with `return`
  declaration     `const` -> `let` (a const is never reassigned, so `let` behaves the same)
  equality        `===` / `!==` -> `==` / `!=` against a string literal
  element_text    the text of a static element without an id (p, h2-h6, small, footer,
                  figcaption), when the request and the rubric checks do not quote it
  style_value     a number or font list of a CSS declaration whose property no rubric
                  check names (margin, padding, gap, border-radius, font-family, ...)
  comment         a line comment inserted before a statement of a script
  rename          a function parameter or a `let`/`const` declared directly in a function
                  body, renamed at all its uses; only where every use lies inside one span
                  of at most `MAX_RENAME_SPAN` characters (a Site is one contiguous edit:
                  renames whose uses are spread further are skipped)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from rcca_jax.base.js_index import FUNCTION_TYPES
from rcca_jax.credit.mutations import response_span, walk
from rcca_jax.credit.sites import Site
from rcca_jax.evaluation.extract import extract_app
from rcca_jax.evaluation.source import CodeBlock, ParsedApp, parse_app

KINDS = ("statement_form", "declaration", "equality", "element_text", "style_value",
         "comment", "rename")
MAX_RENAME_SPAN = 240
_TEXT_TAGS = frozenset({"p", "h2", "h3", "h4", "h5", "h6", "small", "footer", "figcaption"})
_STYLE_PROPERTIES = frozenset({
    "margin", "margin-top", "margin-bottom", "margin-left", "margin-right", "padding",
    "padding-top", "padding-bottom", "padding-left", "padding-right", "gap",
    "border-radius", "font-family", "line-height", "letter-spacing", "max-width"})
_COMMENTS = ("sync the view", "update the view", "read the values", "handle input",
             "set up the page")
_RENAMES = {"e": "evt", "ev": "evt", "event": "evt", "el": "elem", "i": "idx", "n": "num",
            "x": "val", "v": "val", "s": "str", "t": "txt", "k": "key", "btn": "button"}
# Names a fresh identifier must not take (keywords and globals a script may use).
_RESERVED = frozenset({
    "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
    "do", "else", "export", "extends", "false", "finally", "for", "function", "if", "import",
    "in", "instanceof", "let", "new", "null", "return", "super", "switch", "this", "throw",
    "true", "try", "typeof", "var", "void", "while", "with", "yield", "await", "async",
    "of", "event", "name", "status", "window", "document", "self", "top", "parent",
    "length", "key", "undefined", "NaN", "Infinity", "arguments", "eval"})


def rewrites(response: str, *, protected: Sequence[str] = (),
             kinds: Sequence[str] = KINDS) -> list[Site]:
  """Neutral rewrite candidates of `response`, in response order within each kind.

  `protected`: texts the task reads (its request, its rubric checks); an element text
  or a CSS property found in one of them is left alone. Sites are named
  `KIND@START` (rename them when chosen); `operator` is the kind.
  """
  unknown = set(kinds) - set(KINDS)
  if unknown:
    raise ValueError(f"unknown neutral rewrite kinds {sorted(unknown)}; known: {KINDS}")
  ext = extract_app(response)
  if ext is None:
    return []
  app = parse_app(ext.html)
  out = []
  for kind in kinds:
    for start, end, text, description in _FINDERS[kind](app, protected):
      span = response_span(ext, start, end)
      if span is None or ext.html[start:end] == text:
        continue
      out.append(Site(name=f"{kind}@{span[0]}", kind="neutral", start=span[0], end=span[1],
                      variant=text, operator=kind, description=description))
  return out


_Edit = tuple[int, int, str, str]  # app start, app end, replacement, description


def _statement_form(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  del protected
  for block, node in _script_nodes(app):
    if node.type == "expression_statement" and node.named_children:
      expr = node.named_children[0]
      if expr.type == "augmented_assignment_expression":
        left, op = expr.child_by_field_name("left"), expr.child_by_field_name("operator")
        right = expr.child_by_field_name("right")
        if _plain_target(left) and op.type in ("+=", "-=", "*=", "/="):
          lhs, rhs = block.node_text(left), block.node_text(right)
          if right.type not in ("identifier", "number", "string", "member_expression"):
            rhs = f"({rhs})"
          s, e = block.node_app_span(expr)
          yield s, e, f"{lhs} = {lhs} {op.type[0]} {rhs}", f"{lhs} {op.type} -> {lhs} = {lhs} ..."
      elif expr.type == "update_expression":
        arg, op = expr.child_by_field_name("argument"), expr.child_by_field_name("operator")
        if _plain_target(arg):
          name = block.node_text(arg)
          s, e = block.node_app_span(expr)
          yield s, e, f"{name} {op.type[0]}= 1", f"{name}{op.type} -> {name} {op.type[0]}= 1"
      elif expr.type == "assignment_expression":
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        if _plain_target(left) and right.type == "binary_expression":
          op = right.child_by_field_name("operator")
          inner_left = right.child_by_field_name("left")
          if (op.type in ("+", "-", "*", "/")
              and block.node_text(inner_left) == block.node_text(left)):
            lhs = block.node_text(left)
            rhs = block.node_text(right.child_by_field_name("right"))
            s, e = block.node_app_span(expr)
            yield s, e, f"{lhs} {op.type}= {rhs}", f"{lhs} = {lhs} {op.type} ... -> {op.type}="
    elif node.type == "arrow_function":
      body = node.child_by_field_name("body")
      if body is not None and body.type != "statement_block":
        s, e = block.node_app_span(body)
        yield s, e, f"{{ return {block.node_text(body)}; }}", "arrow body -> block with return"


def _plain_target(node) -> bool:
  """An identifier or a chain of property reads (`a.b.c`, `this.n`): safe to repeat."""
  if node is None:
    return False
  if node.type in ("identifier", "this"):
    return True
  return (node.type == "member_expression"
          and node.child_by_field_name("property").type == "property_identifier"
          and _plain_target(node.child_by_field_name("object")))


def _declaration(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  del protected
  for block, node in _script_nodes(app):
    if node.type == "lexical_declaration" and node.children[0].type == "const":
      s, e = block.node_app_span(node.children[0])
      yield s, e, "let", f"const -> let at {block.node_text(node)[:40]!r}"


def _equality(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  del protected
  for block, node in _script_nodes(app):
    if node.type != "binary_expression":
      continue
    op = node.child_by_field_name("operator")
    sides = (node.child_by_field_name("left"), node.child_by_field_name("right"))
    if op.type in ("===", "!==") and any(x.type == "string" for x in sides):
      s, e = block.node_app_span(op)
      yield s, e, op.type[:2], f"{op.type} -> {op.type[:2]} in {block.node_text(node)[:40]!r}"


def _element_text(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  for node in walk(app.html_tree.root_node):
    if node.type != "element" or not node.children or node.children[0].type != "start_tag":
      continue
    tag = next((c for c in node.children[0].children if c.type == "tag_name"), None)
    if tag is None or tag.text.decode().lower() not in _TEXT_TAGS:
      continue
    if any(c.type == "attribute" and c.named_children
           and c.named_children[0].text.decode().lower() == "id"
           for c in node.children[0].children):
      continue
    for child in node.children:
      if child.type != "text":
        continue
      s, e = app.element_span(child)
      text = app.html[s:e]
      if any(text.strip() in p for p in protected) or "&" in text:
        continue
      if " the " in text:
        k = s + text.index(" the ")
        yield k, k + 5, " this ", f"element text: 'the' -> 'this' in {text[:40]!r}"
      elif text.rstrip().endswith("."):
        k = s + len(text.rstrip()) - 1
        yield k, k + 1, "!", f"element text: '.' -> '!' in {text[:40]!r}"


def _style_value(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  for block in app.css_blocks():
    if block.kind != "style":
      continue
    for node in walk(block.tree.root_node):
      if node.type != "declaration" or len(node.named_children) < 2:
        continue
      prop = block.node_text(node.named_children[0])
      if prop not in _STYLE_PROPERTIES or any(prop in p for p in protected):
        continue
      values = node.named_children[1:]
      s, e = block.node_app_span(values[0])[0], block.node_app_span(values[-1])[1]
      text = app.html[s:e]
      if prop == "font-family":
        if "," in text:
          rest = text[text.index(",") + 1:].lstrip()
          yield s, e, rest, f"font-family {text!r} -> {rest!r}"
        continue
      m = re.search(r"(\d*)\.?(\d+)", text)
      if m is None or float(m.group()) == 0:
        continue
      number = m.group()
      last = int(number[-1])
      bumped = number[:-1] + str(last + 1 if last < 9 else last - 1)
      yield (s + m.start(), s + m.end(), bumped,
             f"css {prop}: {text!r} -> {text[:m.start()] + bumped + text[m.end():]!r}")


def _comment(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  del protected
  k = 0
  for block, node in _script_nodes(app):
    if node.parent is None or node.parent.type not in ("program", "statement_block"):
      continue
    if node.type in ("comment", "{", "}") or not node.is_named:
      continue
    s, _ = block.node_app_span(node)
    line = app.html.rfind("\n", 0, s) + 1
    indent = app.html[line:s]
    if indent.strip():
      continue  # not first on its line
    words = _COMMENTS[k % len(_COMMENTS)]
    k += 1
    yield line, line, f"{indent}// {words}\n", f"comment '// {words}' before line {app.html.count(chr(10), 0, s) + 1}"


def _rename(app: ParsedApp, protected: Sequence[str]) -> Iterator[_Edit]:
  del protected
  words = set(re.findall(r"[A-Za-z_$][\w$]*", app.html))
  for block, node in _script_nodes(app):
    if node.type not in FUNCTION_TYPES:
      continue
    for name in sorted(_locals(block, node)):
      uses = [n for n in walk(node) if n.type == "identifier" and block.node_text(n) == name]
      if any(n.type in ("shorthand_property_identifier", "shorthand_property_identifier_pattern")
             and block.node_text(n) == name for n in walk(node)):
        continue
      new = _fresh(name, words)
      if new is None or not uses:
        continue
      spans = [block.node_app_span(n) for n in uses]
      s, e = spans[0][0], spans[-1][1]
      if e - s > MAX_RENAME_SPAN:
        continue
      text, pos = [], s
      for a, b in spans:
        text += [app.html[pos:a], new]
        pos = b
      text.append(app.html[pos:e])
      yield s, e, "".join(text), f"rename {name!r} -> {new!r} ({len(uses)} uses)"


def _locals(block: CodeBlock, func) -> set[str]:
  """Plain-identifier parameters of a function and `let`/`const` names declared directly
  in its body (their scope is the whole function)."""
  names = set()
  params = func.child_by_field_name("parameters") or func.child_by_field_name("parameter")
  if params is not None:
    if params.type == "identifier":
      names.add(block.node_text(params))
    names.update(block.node_text(p) for p in params.named_children if p.type == "identifier")
  body = func.child_by_field_name("body")
  if body is not None and body.type == "statement_block":
    for stmt in body.named_children:
      if stmt.type == "lexical_declaration":
        for decl in stmt.named_children:
          target = decl.child_by_field_name("name")
          if decl.type == "variable_declarator" and target is not None and \
              target.type == "identifier":
            names.add(block.node_text(target))
  return names


def _fresh(name: str, taken: set[str]) -> str | None:
  """A new name for `name` that the app does not use anywhere."""
  options = [_RENAMES.get(name, ""), name[0] + re.sub(r"[aeiou]", "", name[1:]),
             name + "Value", "the" + name[:1].upper() + name[1:]]
  for new in options:
    if len(new) >= 2 and new != name and new not in taken and new not in _RESERVED:
      return new
  return None


def _script_nodes(app: ParsedApp) -> Iterator[tuple[CodeBlock, object]]:
  """Every node of every inline <script> (attribute code is left alone)."""
  for block in app.js_blocks():
    if block.kind == "script":
      for node in walk(block.tree.root_node):
        yield block, node


_FINDERS = {
    "statement_form": _statement_form,
    "declaration": _declaration,
    "equality": _equality,
    "element_text": _element_text,
    "style_value": _style_value,
    "comment": _comment,
    "rename": _rename,
}
