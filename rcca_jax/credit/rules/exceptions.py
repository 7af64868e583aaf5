"""Exceptions and hangs: the stack the browser reported -> the statement (or loop) at fault."""

from __future__ import annotations

import re
from typing import Any

from rcca_jax.base.js_index import FUNCTION_TYPES
from rcca_jax.base.schema import Span, contains, subtract_spans
from rcca_jax.credit.rules.view import NOTHING, AppView, Blame

_LOOPS = frozenset({"for_statement", "for_in_statement", "while_statement", "do_statement"})
_NULL_ACCESS = re.compile(
    r"Cannot (?:read|set) propert(?:y|ies) (?:of (?:null|undefined) )?\((?:reading|setting) "
    r"'([^']+)'\)|(?:null|undefined) is not an object \(evaluating '([^']+)'\)")


def exception_blame(ev: dict[str, Any], view: AppView) -> Blame:
  """An exception: the innermost in-app frame's statement (without the callbacks it
  passes, which are context) and where a null/undefined object came from; a hang: the
  loop the paused script was in (`hang_blame`). Outer frames' statements are context."""
  frames = [f for f in ev.get("stack") or [] if isinstance(f, dict)]
  positions = [pos for pos in (view.position(f) for f in frames) if pos is not None]
  exc = ev.get("exception") if isinstance(ev.get("exception"), dict) else {}
  if not positions and exc and view.to_app(exc.get("offset")) is not None:
    positions = [view.to_app(exc["offset"])]
  stmts = [(pos, stmt) for pos in positions if (stmt := view.statement_at(pos)) is not None]
  if not stmts:
    return NOTHING
  (pos, stmt), outer = stmts[0], tuple(s for _, s in stmts[1:])
  if ev.get("hang"):
    return hang_blame(view, pos) + Blame(context=outer)
  callbacks = [f.span for f in view.index.functions
               if contains(stmt, f.span) and not f.span[0] <= pos < f.span[1]
               and f.span != stmt]
  direct = subtract_spans([stmt], callbacks)
  m = _NULL_ACCESS.search(str(exc.get("message", "")))
  if m:
    direct.extend(_null_sources(view, stmt, m.group(1) or m.group(2)))
  return Blame(tuple(direct), tuple(callbacks) + outer)


def hang_blame(view: AppView, pos: int) -> Blame:
  """The header of the innermost loop around the position where the script was paused
  (the statement itself when no loop encloses it in its function); the loop is context."""
  html = view.app.html
  while pos < len(html) - 1 and html[pos].isspace():   # a line position (profiler)
    pos += 1
  stmt = view.statement_at(pos) or (pos, pos + 1)
  block = view.app.block_at(pos)
  node = block.node_at(pos) if block is not None else None
  while node is not None and node.type not in _LOOPS and node.type not in FUNCTION_TYPES:
    node = node.parent
  if node is None or node.type not in _LOOPS:
    return Blame((stmt,))
  start, end = block.node_app_span(node)
  body = node.child_by_field_name("body")
  if body is not None and node.type == "do_statement":
    start = block.node_app_span(body)[1]          # `while (cond);` after the body
  elif body is not None:
    end = block.node_app_span(body)[0]            # `while (cond)` / `for (...)`
  text = html[start:end]
  header = (start + len(text) - len(text.lstrip()), end - len(text) + len(text.rstrip()))
  direct = (header,) if contains(header, stmt) or contains(stmt, header) else (header, stmt)
  return Blame(direct, (block.node_app_span(node),))


def _null_sources(view: AppView, stmt: Span, prop: str) -> list[Span]:
  """Where the null/undefined object whose `prop` the statement accessed was assigned."""
  refs = view.index.refs
  if "." in prop:                      # Safari-style 'a.b.c': the object is 'a.b'
    keys = {prop.rsplit(".", 1)[0]}
  else:
    keys = {r.key.rsplit(".", 1)[0] for r in refs
            if stmt[0] <= r.span[0] and r.span[1] <= stmt[1] and r.key.endswith("." + prop)}
  scoped = {(r.key, r.scope) for r in refs
            if r.key in keys and stmt[0] <= r.span[0] and r.span[1] <= stmt[1]}
  return sorted({r.stmt for r in refs
                 if r.write and (r.key, r.scope) in scoped and not contains(stmt, r.span)})
