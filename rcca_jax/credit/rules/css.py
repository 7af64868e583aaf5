"""CSS: the style rules the browser matched -> the rule, or the declarations of a property."""

from __future__ import annotations

from typing import Any

from rcca_jax.base.schema import Span, contains
from rcca_jax.credit.rules.view import AppView, Blame, is_span


def css_blame(ev: dict[str, Any], view: AppView) -> Blame:
  """Matched rules; with a property named, only its declarations are direct (the rule is
  then context)."""
  direct: list[Span] = []
  context: list[Span] = []
  for rule in ev.get("css_rules") or []:
    if not isinstance(rule, dict) or not is_span(rule.get("span")):
      continue
    span = view.span_to_app(rule["span"])
    if span is None:
      continue
    decls = declarations(view, span, rule["property"]) if rule.get("property") else []
    if decls:
      direct.extend(decls)
      context.append(span)
    else:
      direct.append(span)
  return Blame(tuple(direct), tuple(context))


def declarations(view: AppView, rule: Span, prop: str) -> list[Span]:
  """The declarations inside the rule's span that set `prop` (itself or by a shorthand)."""
  block = view.app.block_at(rule[0])
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
          and covers_property(name.text.decode(), prop)):
        out.append(span)
      continue
    stack.extend(node.named_children)
  return out


def covers_property(declared: str, prop: str) -> bool:
  """`declared` sets `prop` itself or as a shorthand (`border` for `border-color`)."""
  declared, prop = declared.strip().lower(), prop.strip().lower()
  return declared == prop or prop.startswith(declared + "-")
