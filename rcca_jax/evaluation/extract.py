"""Format stage (F of docs/method.md#2-gated-reward): find the HTML app in a model response.

Candidates are closed fenced blocks (```html / htm / xhtml, or an untagged fence whose
content is a full document) and raw `<!DOCTYPE html>` / `<html>` documents outside
fences that reach `</html>`. The last complete candidate is the app. When there is no
full document, separate html-fragment / css / js fences are inlined into one document
(ArtifactsBench style). Text up to the first `</think>` is reasoning and never the app
(nor is an unclosed `<think>` block).
A fence still open at the end of the response (a truncated generation) is not complete;
its content is only searched for a raw document that reaches `</html>`.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)
_DOC_START = re.compile(r"^[ \t]*(?:<!doctype\s+html\b|<html[\s>])", re.I | re.M)
_DOC_END = re.compile(r"</html\s*>", re.I)
_FULL_DOC = re.compile(r"^\s*(?:<!--.*?-->\s*)*(?:<!doctype\s+html\b|<html[\s>])", re.I | re.S)
_HAS_DOC = re.compile(r"<!doctype\s+html\b|<html[\s>]", re.I)
_HAS_TAG = re.compile(r"<[A-Za-z!/]")
_THINK_START = "<think>"
_THINK_END = "</think>"

HTML_LANGS = ("html", "htm", "xhtml")
CSS_LANGS = ("css",)
JS_LANGS = ("js", "javascript")


@dataclasses.dataclass(frozen=True)
class _Fence:
  lang: str            # lower-cased first word of the info string ("" if untagged)
  start: int           # response offset of the content start
  end: int             # response offset of the content end (before the closing line)
  closed: bool


def _fence_kind(lang: str) -> str | None:
  """html | css | js for a fence's language tag (or file name), else None."""
  name = lang.rsplit("/", 1)[-1]
  ext = name.rsplit(".", 1)[-1] if "." in name else name
  for kind, langs in (("html", HTML_LANGS), ("css", CSS_LANGS), ("js", JS_LANGS)):
    if name in langs or ext in langs:
      return kind
  return None


@dataclasses.dataclass(frozen=True)
class Extraction:
  """The extracted app and its mapping back to response offsets."""

  html: str
  html_span: tuple[int, int]
  segments: tuple[tuple[int, int, int], ...]
  inlined: bool
  _line_starts: tuple[int, ...] = dataclasses.field(init=False, repr=False, compare=False)
  _astral: bool = dataclasses.field(init=False, repr=False, compare=False)
  # (response start, app start, length) of the segments, by response offset.
  _by_response: tuple[tuple[int, int, int], ...] = dataclasses.field(
      init=False, repr=False, compare=False)

  def __post_init__(self):
    starts = [0] + [m.end() for m in re.finditer("\n", self.html)]
    object.__setattr__(self, "_line_starts", tuple(starts))
    object.__setattr__(self, "_astral", any(ord(c) > 0xFFFF for c in self.html))
    object.__setattr__(self, "_by_response", tuple(sorted(
        (resp_start, app_start, length) for app_start, resp_start, length in self.segments)))

  def to_app(self, response_offset: int) -> int | None:
    """App offset of a response character; None outside the extracted document."""
    i = bisect.bisect_right(self._by_response, (response_offset, float("inf"))) - 1
    if i < 0:
      return None
    resp_start, app_start, length = self._by_response[i]
    if response_offset < resp_start + length:
      return app_start + response_offset - resp_start
    return None

  def to_response(self, app_offset: int) -> int | None:
    """Response offset of an app character; None for characters created by inlining."""
    i = bisect.bisect_right(self.segments, (app_offset, float("inf"), 0)) - 1
    if i >= 0:
      app_start, resp_start, length = self.segments[i]
      if app_offset < app_start + length:
        return resp_start + app_offset - app_start
    return None

  def span_to_response(self, start: int, end: int) -> list[tuple[int, int]]:
    """Response spans covering the app span [start, end); inlining glue is dropped."""
    out: list[tuple[int, int]] = []
    for app_start, resp_start, length in self.segments:
      lo, hi = max(start, app_start), min(end, app_start + length)
      if lo >= hi:
        continue
      s, e = resp_start + lo - app_start, resp_start + hi - app_start
      if out and out[-1][1] == s:
        out[-1] = (out[-1][0], e)
      else:
        out.append((s, e))
    return out

  def line_col_to_app(self, line: int, column: int) -> int:
    """App offset of a 0-based line and 0-based UTF-16 column (V8 / CDP convention).

    Lines end at '\\n'. Positions past a line's end clamp to it; a column inside a
    surrogate pair maps to that character.
    """
    if line < 0 or column < 0:
      raise ValueError(f"negative line/column: {line}:{column}")
    if line >= len(self._line_starts):
      return len(self.html)
    start = self._line_starts[line]
    end = (self._line_starts[line + 1] - 1 if line + 1 < len(self._line_starts)
           else len(self.html))
    if not self._astral:
      return min(start + column, end)
    units = 0
    for i in range(start, end):
      units += 2 if ord(self.html[i]) > 0xFFFF else 1
      if units > column:
        return i
    return end


def extract_app(response: str) -> Extraction | None:
  """The app of a response, or None when there is none (the format gate fails)."""
  think = response.find(_THINK_END)
  if think < 0 and response.lstrip().startswith(_THINK_START):
    return None  # reasoning that never ended: no answer was given
  begin = think + len(_THINK_END) if think >= 0 else 0
  fences, raw_docs = _scan(response, begin)

  candidates: list[tuple[int, int]] = list(raw_docs)
  for f in fences:
    if not f.closed:
      continue
    content = response[f.start:f.end]
    kind = _fence_kind(f.lang)
    if (kind == "html" and _HAS_DOC.search(content)) or (not f.lang and _FULL_DOC.match(content)):
      candidates.append((f.start, f.end))
  if candidates:
    start, end = max(candidates, key=lambda s: s[1])
    return _whole(response, start, end)

  closed = [f for f in fences if f.closed and f.end > f.start]
  html = [f for f in closed if _fence_kind(f.lang) == "html"
          and _HAS_TAG.search(response[f.start:f.end])]
  if not html:
    return None
  css = [f for f in closed if _fence_kind(f.lang) == "css"]
  js = [f for f in closed if _fence_kind(f.lang) == "js"]
  if not css and not js:
    return _whole(response, html[-1].start, html[-1].end)
  return _inline(response, html[-1], css, js)


def _whole(response: str, start: int, end: int) -> Extraction:
  return Extraction(html=response[start:end], html_span=(start, end),
                    segments=((0, start, end - start),), inlined=False)


def _inline(response: str, html: _Fence, css: list[_Fence], js: list[_Fence]) -> Extraction:
  """One document: css fences in <style> in head, the fragment in body, js at its end."""
  parts: list[str] = []
  segments: list[tuple[int, int, int]] = []
  size = 0

  def glue(text: str):
    nonlocal size
    parts.append(text)
    size += len(text)

  def copy(f: _Fence):
    nonlocal size
    segments.append((size, f.start, f.end - f.start))
    parts.append(response[f.start:f.end])
    size += f.end - f.start

  glue('<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n')
  for f in css:
    glue("<style>\n")
    copy(f)
    glue("\n</style>\n")
  glue("</head>\n<body>\n")
  copy(html)
  glue("\n")
  for f in js:
    glue("<script>\n")
    copy(f)
    glue("\n</script>\n")
  glue("</body>\n</html>\n")
  used = [html, *css, *js]
  span = (min(f.start for f in used), max(f.end for f in used))
  return Extraction(html="".join(parts), html_span=span,
                    segments=tuple(sorted(segments)), inlined=True)


def _lang(fence: re.Match) -> str:
  info = fence.group("info").strip().lower()
  return info.split()[0].strip("{}.") if info else ""


def _scan(text: str, pos: int) -> tuple[list[_Fence], list[tuple[int, int]]]:
  """Fenced blocks and complete raw documents of text[pos:], in order."""
  fences: list[_Fence] = []
  raw: list[tuple[int, int]] = []
  while True:
    fence = _FENCE_OPEN.search(text, pos)
    doc = _DOC_START.search(text, pos)
    if doc and (not fence or doc.start() < fence.start()):
      start = doc.start() + len(doc.group(0)) - len(doc.group(0).lstrip())
      end = _DOC_END.search(text, start)
      if end and not (fence and fence.start() < end.start() and _fence_kind(_lang(fence))):
        raw.append((start, end.end()))
        pos = end.end()
      else:  # no end, or a code fence comes first: the "document" was prose
        pos = doc.end()
      continue
    if not fence:
      return fences, raw
    content_start = min(fence.end() + 1, len(text))
    mark = fence.group("fence")
    close = re.compile(rf"^[ \t]{{0,3}}{re.escape(mark[0])}{{{len(mark)},}}[ \t\r]*$", re.M)
    end = close.search(text, content_start)
    lang = _lang(fence)
    if end is None:
      fences.append(_Fence(lang, content_start, len(text), closed=False))
      doc = _DOC_START.search(text, content_start)
      if doc:
        start = doc.start() + len(doc.group(0)) - len(doc.group(0).lstrip())
        close_doc = _DOC_END.search(text, start)
        if close_doc:
          raw.append((start, close_doc.end()))
      return fences, raw
    content_end = end.start()
    if content_end > content_start:
      content_end -= 1  # the newline before the closing fence line
      if content_end > content_start and text[content_end - 1] == "\r":
        content_end -= 1
    fences.append(_Fence(lang, content_start, max(content_end, content_start), closed=True))
    pos = end.end()
