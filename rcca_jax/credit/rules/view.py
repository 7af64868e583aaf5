"""What every localization rule reads: the `Blame` it returns and the `AppView` of one app.

A rule is a pure function `(evidence, view) -> Blame`; spans are app (extracted document)
coordinates. The view parses the app once, lazily, and answers the questions several
rules ask (statement at an offset, callees, markup of an element, parsed DSL steps).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

from rcca_jax.base import dsl
from rcca_jax.base.js_index import JsIndex, statement_span
from rcca_jax.base.schema import Span, contains
from rcca_jax.credit.targets import TargetFinder
from rcca_jax.evaluation.extract import Extraction, extract_app
from rcca_jax.evaluation.source import ParsedApp, StartTag, parse_app

# An element whose source is at most this long is blamed whole; a larger one by its start tag.
SMALL_ELEMENT = 300


@dataclasses.dataclass(frozen=True)
class Blame:
  """What one rule blames: `direct` and `context` app spans (unsorted, may overlap), and
  a `note` for the issue's evidence (the missing-target guess) or None."""

  direct: tuple[Span, ...] = ()
  context: tuple[Span, ...] = ()
  note: dict[str, Any] | None = None

  def __add__(self, other: Blame) -> Blame:
    """Both blames; the later note wins."""
    return Blame(self.direct + other.direct, self.context + other.context,
                 other.note if other.note is not None else self.note)


NOTHING = Blame()


class AppView:
  """The app of one response: its extraction, parse, JS index and target finder, and
  conversions between response and app offsets. Read-only; parsed on first use."""

  def __init__(self, response: str, ext: Extraction):
    self.response = response
    self.ext = ext

  @classmethod
  def of(cls, response: str, html_span: Sequence[int] | None) -> AppView | None:
    """The view of the app the record was graded on (None: no app, or another one)."""
    if html_span is None:
      return None
    ext = extract_app(response)
    if ext is None or tuple(ext.html_span) != tuple(html_span):
      return None
    return cls(response, ext)

  @functools.cached_property
  def app(self) -> ParsedApp:
    return parse_app(self.ext.html)

  @functools.cached_property
  def index(self) -> JsIndex:
    return JsIndex(self.app)

  @functools.cached_property
  def targets(self) -> TargetFinder:
    return TargetFinder(self.app, self.index)

  @functools.cached_property
  def id_elements(self) -> tuple[StartTag, ...]:
    """The static tags (self-closing ones included) that have an id, in document order."""
    tags = self.app.start_tags + self.app.self_closing_tags
    return tuple(sorted((t for t in tags if t.attributes.get("id")), key=lambda t: t.app_span))

  # -- coordinates -------------------------------------------------------------------
  def to_app(self, offset: int | None) -> int | None:
    """App offset of a response offset inside the extracted document."""
    return None if offset is None else self.ext.to_app(offset)

  def span_to_app(self, span: Sequence[int]) -> Span | None:
    s, e = self.to_app(span[0]), self.to_app(max(span[0], span[1] - 1))
    return (s, e + 1) if s is not None and e is not None and e >= s else None

  def to_response(self, spans: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in spans:
      out.extend(self.ext.span_to_response(s, e))
    return out

  def position(self, item: dict[str, Any]) -> int | None:
    """App offset of a stack frame / listener: its response `offset` (None: not in the
    app), or its document line:column when the record has no `offset` at all."""
    if "offset" in item:
      return self.to_app(item["offset"])
    if isinstance(item.get("line"), int) and isinstance(item.get("column"), int):
      return self.ext.line_col_to_app(item["line"], item["column"])
    return None

  # -- reading the source ------------------------------------------------------------
  def statement_at(self, app_offset: int) -> Span | None:
    block = self.app.block_at(app_offset)
    if block is None or block.language != "js":
      return None
    node = block.node_at(app_offset)
    return statement_span(block, node) if node is not None else None

  def callees(self, span: Span) -> list[Span]:
    """App functions called inside `span` (by name), other than those holding it."""
    return [f.span for call in self.index.calls if contains(span, call.span)
            for f in self.index.functions_named(call.name) if not contains(f.span, span)]

  def markup_by_id(self, selector: str) -> list[Span]:
    """The small static element with the selector's last id (at most one)."""
    ids = re.findall(r"#([\w-]+)", selector)
    return [t.element_span for t in self.id_elements if ids and t.attributes["id"] == ids[-1]
            and t.element_span[1] - t.element_span[0] <= SMALL_ELEMENT][:1]


def steps(texts: Any, keep_expect: bool = False) -> list[dsl.Step]:
  """Parsed DSL steps (a list of step texts or one text); unparsable ones are skipped;
  expectations and waits only with `keep_expect`."""
  if isinstance(texts, str):
    texts = [texts]
  out = []
  for text in texts or []:
    try:
      parsed = dsl.parse_check(text) if isinstance(text, str) else ()
    except dsl.DslSyntaxError:
      continue
    out.extend(s for s in parsed if keep_expect or s.verb not in ("expect", "wait"))
  return out


def is_span(x: Any) -> bool:
  return (isinstance(x, (list, tuple)) and len(x) == 2
          and all(isinstance(v, int) for v in x) and x[0] <= x[1])
