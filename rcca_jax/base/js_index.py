"""The JS index of an app: statements, functions, references, calls, bindings, look-ups.

`JsIndex` walks the tree-sitter trees of an app's code blocks (inline scripts and
on*="..." attributes; a block has `tree`, `kind`, `app_start`, `app_end` and
`node_app_span`, as `evaluation.source.CodeBlock`) once and records functions,
variable/field references with a light scope resolution, calls, event bindings and
element look-ups, all in app coordinates. `is_statement` and `statement_span` are the one
rule for "the JS statement at an offset" that the source stage and the localizer share.
"""

from __future__ import annotations

import dataclasses
import re

from rcca_jax.base.schema import Span, contains

FUNCTION_TYPES = frozenset({
    "function_declaration", "function_expression", "function", "arrow_function",
    "method_definition", "generator_function_declaration", "generator_function"})
_MEMBERS = frozenset({"field_definition", "method_definition", "class_static_block"})
# Statements with a header and a body: a reference in the header blames the header only.
_COMPOUND = frozenset({
    "if_statement", "for_statement", "for_in_statement", "while_statement", "do_statement",
    "switch_statement", "try_statement", "with_statement", "labeled_statement",
    "function_declaration", "generator_function_declaration", "class_declaration",
    "method_definition"})
_LOOKUPS = frozenset({"getElementById", "querySelector", "querySelectorAll",
                      "getElementsByClassName", "getElementsByName", "getElementsByTagName",
                      "closest"})
_MEMBER_KEY = re.compile(r"(?:[A-Za-z_$][\w$]*|this)(?:\.[A-Za-z_$][\w$]*)+\Z")
_ATTR_EVENT = re.compile(r"\bon([a-z]+)\s*=\s*[\"']?\Z", re.IGNORECASE)


def _text(node) -> str:
  return node.text.decode("utf-8", "replace")


def is_statement(node) -> bool:
  """A JS statement, declaration or class member: the unit blamed for code at an offset."""
  t = node.type
  return t.endswith(("_statement", "_declaration")) or t in _MEMBERS


@dataclasses.dataclass(frozen=True)
class Function:
  span: Span                  # the whole function node
  body: Span
  name: str | None
  statements: int             # statements directly in the body (1 for an expression body)


@dataclasses.dataclass(frozen=True)
class Ref:
  key: str                    # `count`, `state.count`, `this.items`
  scope: Span | None          # function declaring the root name; None = global
  write: bool
  span: Span
  stmt: Span                  # innermost statement (header only for compound ones)


@dataclasses.dataclass(frozen=True)
class Call:
  name: str                   # callee identifier, or the property of a method call
  span: Span
  stmt: Span


@dataclasses.dataclass(frozen=True)
class Binding:
  event: str | None
  target: str                 # source text of the object the listener is put on
  handler_name: str | None
  handler_span: Span | None   # function literal bound directly
  stmt: Span


@dataclasses.dataclass(frozen=True)
class Lookup:
  method: str                 # getElementById, querySelector, ...
  arg: str                    # the literal selector / id / class
  stmt: Span
  var: tuple[str, Span | None] | None   # (key, scope) the element is stored in
  writes: bool                # the look-up is changed in place: `$('#x').textContent = 1`


class JsIndex:
  """Functions, references, calls, bindings and element look-ups of an app's JS."""

  def __init__(self, app):
    self.functions: list[Function] = []
    self.refs: list[Ref] = []
    self.calls: list[Call] = []
    self.bindings: list[Binding] = []
    self.lookups: list[Lookup] = []
    self.strings: list[tuple[str, Span]] = []   # (literal text, statement)
    self.js_spans: list[Span] = []
    for block in app.js_blocks():
      self.js_spans.append((block.app_start, block.app_end))
      _BlockWalker(block, app.html, self).run()
    self.functions.sort(key=lambda f: (f.span[0], -f.span[1]))
    self._by_name: dict[str, list[Function]] = {}
    for f in self.functions:
      if f.name:
        self._by_name.setdefault(f.name, []).append(f)

  def in_js(self, span: Span) -> bool:
    return any(a <= span[0] < b for a, b in self.js_spans)

  def innermost_function(self, span: Span) -> Function | None:
    """The smallest function whose node contains `span`."""
    best = None
    for f in self.functions:
      if f.span[0] > span[0]:
        break
      if contains(f.span, span) and (best is None or f.span[1] - f.span[0] <= best.span[1] - best.span[0]):
        best = f
    return best

  def function_at(self, offset: int) -> Function | None:
    """The function starting at `offset`, else the innermost one containing it."""
    starting = [f for f in self.functions if f.span[0] == offset]
    if starting:
      return max(starting, key=lambda f: f.span[1] - f.span[0])
    return self.innermost_function((offset, offset))

  def functions_named(self, name: str) -> list[Function]:
    return self._by_name.get(name, [])

  def element_lookups(self, selector: str) -> list[Lookup]:
    """Look-ups in the JS that can return the element(s) `selector` names."""
    ids, classes = set(), set()
    for m in re.finditer(r"#([\w-]+)", selector):
      ids.add(m.group(1))
    for m in re.finditer(r"\.([\w-]+)", selector):
      classes.add(m.group(1))
    plain = selector.strip()
    out = []
    for lk in self.lookups:
      arg = lk.arg.strip()
      if (arg == plain
          or (lk.method == "getElementById" and arg in ids)
          or (lk.method in ("getElementsByClassName",) and arg in classes)
          or (lk.method in ("querySelector", "querySelectorAll", "closest")
              and (ids & set(re.findall(r"#([\w-]+)", arg))
                   or classes & set(re.findall(r"\.([\w-]+)", arg))))):
        out.append(lk)
    return out

  def element_writes(self, selector: str) -> list[Span]:
    """Statements that change the element: through the variable holding it, or on the
    look-up itself (`document.getElementById('x').textContent = ...`)."""
    out = set()
    for lk in self.element_lookups(selector):
      if lk.writes:
        out.add(lk.stmt)
      if lk.var is None:
        continue
      key, scope = lk.var
      for r in self.refs:
        if (r.write and r.scope == scope and r.key != key and r.key.startswith(key + ".")
            and r.stmt != lk.stmt):
          out.add(r.stmt)
    return sorted(out)

  def unused_functions(self) -> list[Function]:
    """Named functions that nothing calls, binds or otherwise mentions outside themselves."""
    out = []
    for f in self.functions:
      if f.name and not any(r.key == f.name and not r.write and not contains(f.span, r.span)
                            for r in self.refs):
        if not any(b.handler_name == f.name or b.handler_span == f.span for b in self.bindings):
          out.append(f)
    return out

  def unread_variables(self) -> list[Span]:
    """Statements that write a variable which nothing reads."""
    read = {(r.key, r.scope) for r in self.refs if not r.write}
    return sorted({r.stmt for r in self.refs
                   if r.write and "." not in r.key and (r.key, r.scope) not in read})

  def element_lookup_statements(self, selector: str) -> list[Span]:
    """Statements that look the element up and store it in a variable."""
    return sorted({lk.stmt for lk in self.element_lookups(selector) if lk.var is not None})


def enclosing_statement(node):
  """The innermost statement holding `node` (itself included), or None."""
  while node is not None and not is_statement(node):
    node = node.parent
  return node


def statement_span(block, node) -> Span:
  """App span of the innermost statement holding `node`; only the header of a compound
  statement (`if (...)`, `for (...)`, a function's signature) when `node` is not in its body."""
  cur = enclosing_statement(node)
  if cur is None:
    return tuple(block.node_app_span(node))
  start, end = block.node_app_span(cur)
  if cur.type in _COMPOUND:
    body = cur.child_by_field_name("body") or cur.child_by_field_name("consequence")
    if body is not None and not body.start_byte <= node.start_byte < body.end_byte:
      end = block.node_app_span(body)[0]
  return (start, end)


class _BlockWalker:
  """Fills a JsIndex from one code block's tree."""

  def __init__(self, block, html: str, index: JsIndex):
    self.block = block
    self.html = html
    self.ix = index
    self.declared: dict[tuple[int, int], set[str]] = {}

  def span(self, node) -> Span:
    return tuple(self.block.node_app_span(node))

  def run(self) -> None:
    root = self.block.tree.root_node
    self._collect_declarations(root, None)
    self._walk(root, [])
    if self.block.kind == "attr":
      m = _ATTR_EVENT.search(self.html[max(0, self.block.app_start - 40):self.block.app_start])
      names = [c.name for c in self.ix.calls if contains((self.block.app_start, self.block.app_end), c.span)]
      for name in names or [None]:
        self.ix.bindings.append(Binding(
            event=m.group(1).lower() if m else None, target="<attribute>", handler_name=name,
            handler_span=None, stmt=(self.block.app_start, self.block.app_end)))

  # Pass 1: names declared by each function (params, var/let/const, inner declarations).
  def _collect_declarations(self, node, func) -> None:
    key = (node.start_byte, node.end_byte)
    if node.type in FUNCTION_TYPES:
      if node.type in ("function_declaration", "generator_function_declaration"):
        name = node.child_by_field_name("name")
        if name is not None:
          self.declared.setdefault(func, set()).add(_text(name))
      func = key
      params = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
      if params is not None:
        self.declared.setdefault(func, set()).update(_pattern_names(params))
    elif node.type == "variable_declarator":
      name = node.child_by_field_name("name")
      if name is not None:
        self.declared.setdefault(func, set()).update(_pattern_names(name))
    elif node.type == "catch_clause":
      param = node.child_by_field_name("parameter")
      if param is not None:
        self.declared.setdefault(func, set()).update(_pattern_names(param))
    for child in node.named_children:
      self._collect_declarations(child, func)

  def _scope(self, name: str, funcs: list) -> Span | None:
    for func in reversed(funcs):
      if name in self.declared.get(func[0], ()):
        return func[1]
    return None

  def _stmt(self, node) -> Span:
    return statement_span(self.block, node)

  # Pass 2: everything else.
  def _walk(self, node, funcs: list) -> None:
    t = node.type
    if t in FUNCTION_TYPES:
      span = self.span(node)
      body = node.child_by_field_name("body")
      count = (len(body.named_children) if body is not None and body.type == "statement_block"
               else 1)
      self.ix.functions.append(Function(span, self.span(body) if body is not None else span,
                                        _function_name(node), count))
      funcs = funcs + [((node.start_byte, node.end_byte), span)]
    elif t == "identifier":
      self._identifier(node, funcs)
    elif t == "member_expression":
      self._member(node, funcs)
    elif t == "call_expression":
      self._call(node, funcs)
    elif t == "assignment_expression":
      self._on_assignment(node)
    elif t in ("string", "template_string"):
      self.ix.strings.append((_text(node), self._stmt(node)))
    for child in node.named_children:
      self._walk(child, funcs)

  def _identifier(self, node, funcs) -> None:
    parent = node.parent
    if parent is None:
      return
    pt = parent.type
    if pt in FUNCTION_TYPES or pt in ("formal_parameters", "catch_clause", "class_declaration"):
      return    # function names and parameters are declarations, not state accesses
    if pt == "member_expression" and parent.child_by_field_name("object") != node:
      return
    write = _is_write_target(node) or _is_mutating_receiver(node)
    name = _text(node)
    self.ix.refs.append(Ref(name, self._scope(name, funcs), write, self.span(node), self._stmt(node)))

  def _member(self, node, funcs) -> None:
    key = _text(node)
    if len(key) > 80 or not _MEMBER_KEY.match(key):
      return
    root = key.split(".", 1)[0]
    scope = None if root == "this" else self._scope(root, funcs)
    write = _is_write_target(node) or _is_mutating_receiver(node)
    self.ix.refs.append(Ref(key, scope, write, self.span(node), self._stmt(node)))

  def _call(self, node, funcs) -> None:
    fn = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    if fn is None:
      return
    if fn.type == "identifier":
      name = _text(fn)
    elif fn.type == "member_expression":
      prop = fn.child_by_field_name("property")
      name = _text(prop) if prop is not None else ""
    else:
      return
    stmt = self._stmt(node)
    self.ix.calls.append(Call(name, self.span(node), stmt))
    argv = list(args.named_children) if args is not None else []
    if fn.type == "member_expression" and name == "addEventListener" and len(argv) >= 2:
      obj = fn.child_by_field_name("object")
      handler = argv[1]
      self.ix.bindings.append(Binding(
          event=_string_value(argv[0]), target=_text(obj) if obj is not None else "",
          handler_name=_callee_name(handler),
          handler_span=self.span(handler) if handler.type in FUNCTION_TYPES else None,
          stmt=stmt))
    if name in _LOOKUPS and argv and _string_value(argv[0]) is not None:
      self.ix.lookups.append(Lookup(name, _string_value(argv[0]), stmt,
                                    self._stored_in(node, funcs), _changed_in_place(node)))

  def _stored_in(self, call, funcs) -> tuple[str, Span | None] | None:
    parent = call.parent
    target = None
    if parent is not None and parent.type == "variable_declarator":
      target = parent.child_by_field_name("name")
    elif parent is not None and parent.type == "assignment_expression":
      target = parent.child_by_field_name("left")
    if target is None:
      return None
    key = _text(target)
    if not (target.type == "identifier" or _MEMBER_KEY.match(key)):
      return None
    root = key.split(".", 1)[0]
    return key, (None if root == "this" else self._scope(root, funcs))

  def _on_assignment(self, node) -> None:
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    if left is None or right is None or left.type != "member_expression":
      return
    prop = left.child_by_field_name("property")
    if prop is None or not re.fullmatch(r"on[a-z]+", _text(prop)):
      return
    obj = left.child_by_field_name("object")
    self.ix.bindings.append(Binding(
        event=_text(prop)[2:], target=_text(obj) if obj is not None else "",
        handler_name=_callee_name(right),
        handler_span=self.span(right) if right.type in FUNCTION_TYPES else None,
        stmt=self._stmt(node)))


def _pattern_names(node) -> set[str]:
  """Identifiers bound by a parameter list or a (destructuring) pattern."""
  if node.type in ("identifier", "shorthand_property_identifier_pattern"):
    return {_text(node)}
  out: set[str] = set()
  for child in node.named_children:
    if node.type in ("assignment_pattern", "object_assignment_pattern") and child != node.named_children[0]:
      continue
    if node.type == "pair_pattern" and child == node.child_by_field_name("key"):
      continue
    out |= _pattern_names(child)
  return out


def _function_name(node) -> str | None:
  name = node.child_by_field_name("name")
  if name is not None:
    return _text(name)
  parent = node.parent
  if parent is None:
    return None
  if parent.type == "variable_declarator":
    n = parent.child_by_field_name("name")
    return _text(n) if n is not None and n.type == "identifier" else None
  if parent.type == "assignment_expression":
    left = parent.child_by_field_name("left")
    if left is not None and left.type == "identifier":
      return _text(left)
    if left is not None and left.type == "member_expression":
      prop = left.child_by_field_name("property")
      return _text(prop) if prop is not None else None
  if parent.type == "pair":
    key = parent.child_by_field_name("key")
    return _text(key).strip("'\"") if key is not None else None
  return None


def _callee_name(node) -> str | None:
  if node.type == "identifier":
    return _text(node)
  if node.type == "member_expression":
    prop = node.child_by_field_name("property")
    return _text(prop) if prop is not None else None
  return None


def _string_value(node) -> str | None:
  if node.type == "string":
    return _text(node)[1:-1]
  if node.type == "template_string" and not any(
      c.type == "template_substitution" for c in node.named_children):
    return _text(node)[1:-1]
  return None


def _is_write_target(node) -> bool:
  parent = node.parent
  if parent is None:
    return False
  if parent.type in ("assignment_expression", "augmented_assignment_expression"):
    return parent.child_by_field_name("left") == node
  if parent.type == "update_expression":
    return True
  if parent.type == "variable_declarator":
    return parent.child_by_field_name("name") == node
  if parent.type in ("for_in_statement",):
    return parent.child_by_field_name("left") == node
  return False


_MUTATORS = frozenset({"push", "pop", "shift", "unshift", "splice", "sort", "reverse", "fill",
                       "set", "add", "delete", "clear", "append", "appendChild", "remove",
                       "removeChild", "replaceChildren", "insertBefore", "setAttribute",
                       "removeAttribute", "toggle", "replace", "prepend", "before", "after",
                       "insertAdjacentHTML", "replaceWith"})


def _changed_in_place(call) -> bool:
  """`call(...).prop = v` or `call(...).mutator(...)`."""
  parent = call.parent
  if parent is None or parent.type != "member_expression":
    return False
  return _is_write_target(parent) or _is_mutating_receiver(call)


def _is_mutating_receiver(node) -> bool:
  """`node` is the receiver of a mutating method call: `items.push(x)`, `el.classList.add(c)`."""
  parent = node.parent
  if parent is None or parent.type != "member_expression" or parent.child_by_field_name("object") != node:
    return False
  prop = parent.child_by_field_name("property")
  grand = parent.parent
  return (prop is not None and _text(prop) in _MUTATORS and grand is not None
          and grand.type == "call_expression" and grand.child_by_field_name("function") == parent)
