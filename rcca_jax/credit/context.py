"""Context expansion (docs/method.md#4-code-localization): the code related to directly
blamed code.

`expand_context` turns direct spans into context spans through the four relations of the
app's JS index: enclosing function, event bindings, state reads/writes and calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rcca_jax.base.js_index import JsIndex
from rcca_jax.base.schema import Span, contains, merge_spans, subtract_spans


def expand_context(index: JsIndex, direct: Sequence[Span],
                   html_ids: Iterable[tuple[str, Span]] = ()) -> list[Span]:
  """Context spans (app coordinates) of the direct spans, never repeating them.

  Args:
    index: the app's JS index.
    direct: direct spans in app coordinates.
    html_ids: (id, span) of static elements; a direct span holding an element's start
      tag brings the JS that looks that element up.

  Returns:
    Sorted, merged spans: enclosing functions, event bindings of the blamed functions,
    other reads/writes of the state the direct code reads or writes, callees defined in
    the app and callers of the blamed functions.
  """
  direct = merge_spans(direct)
  ctx: list[Span] = []
  for d in direct:
    if not index.in_js(d):
      for elem_id, span in html_ids:
        if contains(d, span):
          ctx.extend(index.element_writes("#" + elem_id))
          ctx.extend(index.element_lookup_statements("#" + elem_id))
      continue
    func = index.innermost_function(d)
    whole = func is not None and (func.span == d or func.body == d)
    if func is not None and not whole:
      ctx.append(func.span)                                    # enclosing function
    if func is not None:
      for b in index.bindings:                                 # event bindings
        if b.handler_span == func.span or (func.name and b.handler_name == func.name):
          ctx.append(b.stmt)
      if func.name:                                            # callers
        ctx.extend(c.stmt for c in index.calls if c.name == func.name and not contains(func.span, c.span))
    inside = [r for r in index.refs if contains(d, r.span)]   # state reads/writes
    written = {(r.key, r.scope) for r in inside if r.write}
    read = {(r.key, r.scope) for r in inside if not r.write}
    for r in index.refs:
      if contains(d, r.span):
        continue
      if (r.key, r.scope) in written or (r.write and (r.key, r.scope) in read):
        ctx.append(r.stmt)
    for c in index.calls:                                      # callees
      if contains(d, c.span):
        ctx.extend(f.span for f in index.functions_named(c.name) if not contains(f.span, d))
  return subtract_spans(ctx, direct)
