"""Source stage (S of docs/method.md#2-gated-reward) and the shared tree-sitter parse of an
app.

The document is parsed with tree-sitter-html; every inline `<script>` (JavaScript
types only, no `src`), every `<style>` and every `on*="..."` attribute value is parsed
on its own with tree-sitter-javascript / -css. tree-sitter works in UTF-8 bytes; each
block keeps the tables that turn its byte offsets into app `str` offsets.

Fatal errors (they gate the reward): JS syntax errors in scripts, and a `<script>` or
`<style>` without its end tag. CSS errors, errors in `on*` attribute code and HTML
error nodes are reported but do not gate.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import html as html_lib
import re
from typing import Iterator

import tree_sitter
import tree_sitter_css
import tree_sitter_html
import tree_sitter_javascript

from rcca_jax.base import js_index
from rcca_jax.evaluation import extract, js_syntax, record

JS_TYPES = frozenset({
    "", "module", "text/javascript", "application/javascript", "application/ecmascript",
    "application/x-ecmascript", "application/x-javascript", "text/ecmascript",
    "text/javascript1.0", "text/javascript1.1", "text/javascript1.2", "text/javascript1.3",
    "text/javascript1.4", "text/javascript1.5", "text/jscript", "text/livescript",
    "text/x-ecmascript", "text/x-javascript"})
MAX_ERRORS_PER_BLOCK = 10
_EXCERPT = 40
_RAW_TEXT_END = {tag: re.compile(rb"</" + tag.encode() + rb"[\t\n\f\r />]", re.I)
                 for tag in ("script", "style")}
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")


@functools.cache
def _parser(language: str) -> tree_sitter.Parser:
  module = {"html": tree_sitter_html, "js": tree_sitter_javascript, "css": tree_sitter_css}
  return tree_sitter.Parser(tree_sitter.Language(module[language].language()))


class _Text:
  """A str with its UTF-8 encoding and byte <-> char offset conversion."""

  def __init__(self, text: str):
    self.text = text
    self.data = text.encode("utf-8")
    # Byte offset of each char start, plus the end; None when ASCII (identity).
    self._starts: list[int] | None = None
    if len(self.data) != len(text):
      starts, b = [], 0
      for ch in text:
        starts.append(b)
        b += len(ch.encode("utf-8"))
      starts.append(b)
      self._starts = starts

  def char(self, byte: int) -> int:
    return byte if self._starts is None else bisect.bisect_left(self._starts, byte)

  def byte(self, char: int) -> int:
    return char if self._starts is None else self._starts[char]


@dataclasses.dataclass(frozen=True)
class SourceError:
  """One parse problem; `app_span` is in app (extracted document) coordinates."""

  language: str        # html | css | js
  message: str
  app_span: tuple[int, int]
  fatal: bool
  spans: tuple[tuple[int, int], ...] = ()   # what to blame when not `app_span` alone


@dataclasses.dataclass(frozen=True)
class StartTag:
  """A start tag of the static markup: lower-cased tag name, decoded attributes, the
  tag's span and the span of the element it opens (the tag's own when the parser put it
  in no element)."""

  tag: str
  attributes: dict[str, str]
  app_span: tuple[int, int]
  element_span: tuple[int, int]


@dataclasses.dataclass
class CodeBlock:
  """An inline <script>, <style> or on*="..." attribute value, parsed on its own.

  `text` is what the browser's JS/CSS engine sees (attribute values entity-decoded);
  `char_map[i]` is the app offset of text[i] (plus one entry for the end) when decoding
  changed lengths, else None and text[i] sits at app_start + i.
  """

  kind: str            # script | style | attr
  language: str        # js | css
  app_start: int
  app_end: int
  text: str
  tree: tree_sitter.Tree
  char_map: list[int] | None = None
  _text: _Text | None = dataclasses.field(default=None, repr=False)

  def __post_init__(self):
    if self._text is None:
      self._text = _Text(self.text)

  def byte_to_app(self, byte: int) -> int:
    i = self._text.char(byte)
    return self.char_map[i] if self.char_map is not None else self.app_start + i

  def app_to_byte(self, app_offset: int) -> int:
    if self.char_map is not None:
      i = bisect.bisect_right(self.char_map, app_offset) - 1
    else:
      i = app_offset - self.app_start
    return self._text.byte(min(max(i, 0), len(self.text)))

  def node_app_span(self, node: tree_sitter.Node) -> tuple[int, int]:
    """UTF-8 byte offsets of a node of this block's tree -> app str offsets."""
    return self.byte_to_app(node.start_byte), self.byte_to_app(node.end_byte)

  def node_text(self, node: tree_sitter.Node) -> str:
    """The (decoded) block text of a node."""
    return self.text[self._text.char(node.start_byte):self._text.char(node.end_byte)]

  def node_at(self, app_offset: int) -> tree_sitter.Node | None:
    """The smallest named node covering the app offset (None outside the block)."""
    if not self.app_start <= app_offset < self.app_end:
      return None
    b = self.app_to_byte(app_offset)
    return self.tree.root_node.named_descendant_for_byte_range(b, b + 1)


class ParsedApp:
  """An app document parsed with tree-sitter: HTML tree, code blocks and parse errors."""

  def __init__(self, html: str):
    self.html = html
    # `<tag ... />`: not in `start_tags` (nor are their on* attributes parsed as code).
    self.self_closing_tags: list[StartTag] = []
    self._doc = _Text(html)
    self.html_tree: tree_sitter.Tree = _parser("html").parse(self._doc.data)
    self.blocks: list[CodeBlock] = []
    self.errors: list[SourceError] = []
    self.start_tags: list[StartTag] = []
    self._collect()
    self.blocks.sort(key=lambda b: b.app_start)
    self._block_starts = [b.app_start for b in self.blocks]

  def js_blocks(self) -> list[CodeBlock]:
    return [b for b in self.blocks if b.language == "js"]

  def css_blocks(self) -> list[CodeBlock]:
    return [b for b in self.blocks if b.language == "css"]

  def block_at(self, app_offset: int) -> CodeBlock | None:
    i = bisect.bisect_right(self._block_starts, app_offset) - 1
    if i >= 0 and app_offset < self.blocks[i].app_end:
      return self.blocks[i]
    return None

  def statement_at(self, app_offset: int) -> tuple[int, int] | None:
    """App span of the JS statement at the offset (`js_index.statement_span`'s rule)."""
    block = self.block_at(app_offset)
    if block is None or block.language != "js":
      return None
    node = block.node_at(app_offset)
    if node is None or js_index.enclosing_statement(node) is None:
      return None
    return js_index.statement_span(block, node)

  def element_span(self, node: tree_sitter.Node) -> tuple[int, int]:
    """App span of a node of the HTML tree (an element, a start tag, ...)."""
    return self._doc.char(node.start_byte), self._doc.char(node.end_byte)

  def start_tag_for_id(self, element_id: str) -> tuple[int, int] | None:
    """App span of the start tag with this id attribute, if exactly one has it."""
    found = [t.app_span for t in self.start_tags if t.attributes.get("id") == element_id]
    return found[0] if len(found) == 1 else None

  @property
  def fatal(self) -> bool:
    return any(e.fatal for e in self.errors)

  # -- building --------------------------------------------------------------------

  def _text_of(self, node: tree_sitter.Node) -> str:
    return self._doc.data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

  def _collect(self):
    unterminated: list[tree_sitter.Node] = []
    for node in _walk(self.html_tree.root_node, into_errors=True):
      if node.type == "start_tag":
        self._start_tag(node, unterminated)
      elif node.type == "self_closing_tag":
        self.self_closing_tags.append(self._tag(node, code=False))
    html_errors = [n for n in _walk(self.html_tree.root_node) if n.is_error or n.is_missing]
    for node in unterminated:
      tag = _tag_name(node)
      self.errors.append(SourceError("html", f"unterminated <{tag}>: no </{tag}> before the "
                                     "end of the document", self.element_span(node), True))
    reported = 0
    for node in html_errors:
      if any(_contains(node, u) for u in unterminated):
        continue  # explained by the unterminated script/style
      if reported == MAX_ERRORS_PER_BLOCK:
        break
      reported += 1
      span = _widen(self.element_span(node), len(self.html))
      what = (f"missing {node.type!r}" if node.is_missing
              else f"unexpected {_excerpt(self._text_of(node))!r}")
      self.errors.append(SourceError("html", f"HTML parse error: {what}", span, False))

  def _start_tag(self, node: tree_sitter.Node, unterminated: list[tree_sitter.Node]):
    start_tag = self._tag(node, code=True)
    self.start_tags.append(start_tag)
    if start_tag.tag in ("script", "style"):
      self._raw_text(node, start_tag.tag, start_tag.attributes, unterminated)

  def _tag(self, node: tree_sitter.Node, code: bool) -> StartTag:
    """The tag's decoded attributes (the first of a repeated name); `code`: parse its
    on* attribute values as JS blocks."""
    attributes: dict[str, str] = {}
    for attr in node.named_children:
      if attr.type != "attribute":
        continue
      name_node = next((c for c in attr.named_children if c.type == "attribute_name"), None)
      if name_node is None:
        continue
      name = self._text_of(name_node).lower()
      value_node = _attribute_value(attr)
      value = html_lib.unescape(self._text_of(value_node)) if value_node is not None else ""
      attributes.setdefault(name, value)
      if code and name.startswith("on") and value_node is not None:
        self._attribute_code(value_node)
    parent = node.parent
    element = parent if parent is not None and parent.type == "element" else node
    return StartTag(_tag_name(node), attributes, self.element_span(node),
                    self.element_span(element))

  def _raw_text(self, start_tag: tree_sitter.Node, tag: str, attributes: dict[str, str],
                unterminated: list[tree_sitter.Node]):
    """The content of a <script> or <style>: up to the end tag, by the HTML tokenizer's rule
    (tree-sitter-html's own raw-text scanner misses end tags after a stray '<')."""
    if any(p.type == "element" and _tag_name(p.child(0)) == "template"
           for p in _ancestors(start_tag)):
      return  # template content is inert
    end = _RAW_TEXT_END[tag].search(self._doc.data, start_tag.end_byte)
    if end is None:
      unterminated.append(start_tag)
      return
    kind = attributes.get("type", "").strip().lower()
    if tag == "script" and ("src" in attributes or kind not in JS_TYPES):
      return
    if tag == "style" and kind not in ("", "text/css"):
      return
    app_start, app_end = self._doc.char(start_tag.end_byte), self._doc.char(end.start())
    language = "js" if tag == "script" else "css"
    self._add_block("script" if tag == "script" else "style", language, app_start, app_end,
                    self.html[app_start:app_end], None)

  def _attribute_code(self, value_node: tree_sitter.Node):
    app_start, app_end = self.element_span(value_node)
    raw = self.html[app_start:app_end]
    if "&" not in raw:
      self._add_block("attr", "js", app_start, app_end, raw, None)
      return
    parts, char_map, pos = [], [], 0
    for m in _ENTITY.finditer(raw):
      parts.append(raw[pos:m.start()])
      char_map.extend(range(app_start + pos, app_start + m.start()))
      decoded = html_lib.unescape(m.group(0))
      parts.append(decoded)
      char_map.extend([app_start + m.start()] * len(decoded))
      pos = m.end()
    parts.append(raw[pos:])
    char_map.extend(range(app_start + pos, app_end))
    char_map.append(app_end)
    self._add_block("attr", "js", app_start, app_end, "".join(parts), char_map)

  def _add_block(self, kind: str, language: str, app_start: int, app_end: int, text: str,
                 char_map: list[int] | None):
    coded = _Text(text)
    tree = _parser(language).parse(coded.data)
    block = CodeBlock(kind, language, app_start, app_end, text, tree, char_map, coded)
    self.blocks.append(block)
    self.errors.extend(_block_errors(block))


def _walk(node: tree_sitter.Node, into_errors: bool = False) -> Iterator[tree_sitter.Node]:
  """Pre-order traversal; by default it does not descend into error or missing nodes."""
  cursor = node.walk()
  while True:
    current = cursor.node
    yield current
    stop = not into_errors and (current.is_error or current.is_missing)
    if not stop and cursor.goto_first_child():
      continue
    while not cursor.goto_next_sibling():
      if not cursor.goto_parent():
        return


def _ancestors(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
  node = node.parent
  while node is not None:
    yield node
    node = node.parent


def _contains(outer: tree_sitter.Node, inner: tree_sitter.Node) -> bool:
  return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def _tag_name(start_tag: tree_sitter.Node | None) -> str:
  if start_tag is None:
    return ""
  name = next((c for c in start_tag.named_children if c.type == "tag_name"), None)
  return name.text.decode("utf-8", errors="replace").lower() if name is not None else ""


def _attribute_value(attr: tree_sitter.Node) -> tree_sitter.Node | None:
  for child in attr.named_children:
    if child.type == "attribute_value":
      return child
    if child.type == "quoted_attribute_value":
      return next((c for c in child.named_children if c.type == "attribute_value"), None)
  return None


def _excerpt(text: str) -> str:
  line = text.strip().split("\n", 1)[0]
  return line if len(line) <= _EXCERPT else line[:_EXCERPT] + "..."


def _widen(span: tuple[int, int], limit: int) -> tuple[int, int]:
  """At least one character wide (zero-width positions of MISSING nodes)."""
  s, e = span
  if e > s:
    return span
  if s < limit:
    return s, s + 1
  return max(s - 1, 0), s


def _js_error_message(node: tree_sitter.Node, text: str) -> str:
  if node.is_missing:
    return f"missing {node.type!r}"
  first = node
  while first.child_count:
    first = first.child(0)
  if first.type in ("'", '"', "`") or text[:1] in ("'", '"', "`"):
    return f"unterminated string: {_excerpt(text)!r}"
  return f"unexpected {_excerpt(text)!r}" if text.strip() else "unexpected end of input"


def _open_construct_error(block: CodeBlock) -> SourceError | None:
  """One error for a script whose block, string or template literal is left open: the
  line that opens it and the line where parsing fails (js_syntax)."""
  found = js_syntax.open_construct(block.text)
  if found is None:
    return None
  spans = []
  for offset in (found.opener, found.failure):
    s, e = js_syntax.line_span(block.text, offset)
    span = (block.app_start + s, block.app_start + e) if block.char_map is None else (
        block.char_map[s], block.char_map[e])
    if span not in spans:
      spans.append(span)
  line = block.text.count("\n", 0, found.opener) + 1
  what = {"block": "missing '}': block", "string": "unterminated string",
          "template literal": "unterminated template literal"}[found.kind]
  return SourceError("js", f"JS syntax error: {what} opened at script line {line} left open: "
                     f"{_excerpt(block.text[found.opener:])!r}", spans[0], True, tuple(spans))


def _block_errors(block: CodeBlock) -> list[SourceError]:
  """Error and missing nodes of one block as SourceErrors (spans at least 1 char); for a
  script, one error naming the construct left open when there is one."""
  if block.kind == "script" and block.tree.root_node.has_error:
    error = _open_construct_error(block)
    if error is not None:
      return [error]
  errors = []
  for node in _walk(block.tree.root_node):
    if not (node.is_error or node.is_missing):
      continue
    if len(errors) == MAX_ERRORS_PER_BLOCK:
      break
    span = block.node_app_span(node)
    if span[0] == span[1]:
      if block.language == "js":
        span = js_index.statement_span(block, node)
      span = _widen(span, block.app_end)
    node_text = block.node_text(node)
    if block.language == "js":
      what = _js_error_message(node, node_text)
      where = " in an event-handler attribute" if block.kind == "attr" else ""
      errors.append(SourceError("js", f"JS syntax error{where}: {what}", span,
                                block.kind == "script"))
    else:
      what = f"missing {node.type!r}" if node.is_missing else f"unexpected {_excerpt(node_text)!r}"
      errors.append(SourceError("css", f"CSS parse error: {what}", span, False))
  return errors


def parse_app(html: str) -> ParsedApp:
  """Parses an app document (HTML, inline scripts, styles and on* handlers)."""
  return ParsedApp(html)


def check_source(extraction: extract.Extraction) -> list[SourceError]:
  """Source-stage errors of an extracted app; the gate passes iff none is fatal."""
  return parse_app(extraction.html).errors


def source_issues(extraction: extract.Extraction,
                  parsed: ParsedApp | None = None) -> list[record.Issue]:
  """Source-stage issues in response coordinates.

  `direct` is the error node; `context` the rest of the enclosing JS statement (for JS
  errors), never overlapping `direct`. Evidence: `node_span` (response span of the
  node), `language`, `fatal`, `excerpt`.
  """
  parsed = parsed if parsed is not None else parse_app(extraction.html)
  issues = []
  for err in parsed.errors:
    s, e = err.app_span
    direct = [r for span in (err.spans or (err.app_span,))
              for r in extraction.span_to_response(*span)]
    context: list[tuple[int, int]] = []
    if err.language == "js":
      statement = parsed.statement_at(s)
      if statement is not None:
        for cs, ce in ((statement[0], s), (e, statement[1])):
          if ce > cs:
            context.extend(extraction.span_to_response(cs, ce))
    node_span = [direct[0][0], direct[-1][1]] if direct else None
    evidence = {"node_span": node_span, "language": err.language, "fatal": err.fatal,
                "excerpt": _excerpt(parsed.html[s:e])}
    if err.spans:
      evidence["syntax_spans"] = [list(r) for r in direct]
    issues.append(record.Issue(
        stage="source", message=err.message, severity=None, direct=direct, context=context,
        evidence=evidence))
  return issues
