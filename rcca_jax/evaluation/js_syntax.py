"""Where a script's syntax breaks: the construct left open and where parsing fails.

tree-sitter recovers from errors by wrapping whole regions in ERROR nodes, which says
little about what the author left open. `open_construct` lexes the script once (strings,
template literals, comments, regular expressions, brackets) and reports the first of:
  - a string that reaches the end of its line unclosed (the parser fails there);
  - a closer that does not match the innermost open block (the parser fails at it);
  - a bracket closed at another indentation than the line that opened it (the author's
    closer for it is missing; the parser fails later, usually at the end of the script);
  - a block or template literal still open at the end of the script.
Open parentheses and brackets, and stray closers, are left to the parser's own error.
"""

from __future__ import annotations

import dataclasses
import re

_PAIRS = {")": "(", "]": "[", "}": "{"}
_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_REGEX_KEYWORDS = frozenset({"return", "typeof", "case", "do", "else", "in", "of", "new",
                             "delete", "void", "throw", "instanceof", "yield", "await"})


@dataclasses.dataclass(frozen=True)
class OpenConstruct:
  kind: str          # block | string | template literal
  opener: int        # offset of the opening delimiter in the script text
  failure: int       # offset where the parser fails


def open_construct(text: str) -> OpenConstruct | None:
  """The construct left open in a script's text, or None when brackets and quotes pair."""
  stack: list[tuple[str, int]] = []      # (opener char, offset); "`" for a template
  suspect: OpenConstruct | None = None
  prev = ""                              # last significant token (for `/` = regex?)
  i, n = 0, len(text)
  while i < n:
    c = text[i]
    if stack and stack[-1][0] == "`":    # inside a template literal
      if c == "\\":
        i += 2
        continue
      if c == "`":
        stack.pop()
        prev = "x"
      elif c == "$" and text.startswith("${", i):
        stack.append(("${", i))
        i += 2
        continue
      i += 1
      continue
    if c in " \t\r\n":
      i += 1
      continue
    if text.startswith("//", i):
      i = _line_end(text, i)
      continue
    if text.startswith("/*", i):
      end = text.find("*/", i + 2)
      i = n if end < 0 else end + 2
      continue
    if c in "'\"":
      end = _string_end(text, i)
      if end is None:
        return OpenConstruct("string", i, i)
      i, prev = end, "x"
      continue
    if c == "`":
      stack.append(("`", i))
      i += 1
      continue
    if c == "/" and (prev == "" or prev in _REGEX_AFTER or prev in _REGEX_KEYWORDS):
      i, prev = _regex_end(text, i), "x"
      continue
    if c in "([{":
      stack.append((c, i))
    elif c in ")]}":
      if c == "}" and stack and stack[-1][0] == "${":
        stack.pop()                      # back inside the template literal
        i += 1
        continue
      if not stack or stack[-1][0] != _PAIRS[c]:
        if suspect or not stack or stack[-1][0] in "([":
          return suspect                 # a stray closer or an open paren: not ours
        return OpenConstruct(_kind(stack[-1][0]), stack[-1][1], i)
      _, at = stack.pop()
      if suspect is None and c == "}" and _first_on_line(text, i) and (
          _indent(text, i) != _indent(text, at)):
        suspect = OpenConstruct("block", at, n)
    m = _WORD.match(text, i)
    if m:
      prev, i = m.group(), m.end()
    else:
      prev, i = c, i + 1
  if suspect is not None:
    return suspect
  if stack and stack[-1][0] not in "([":
    char, at = stack[-1]
    return OpenConstruct(_kind(char), at, n)
  return None


def _kind(char: str) -> str:
  return "template literal" if char in ("`", "${") else "block"


def _line_end(text: str, i: int) -> int:
  end = text.find("\n", i)
  return len(text) if end < 0 else end


def _string_end(text: str, i: int) -> int | None:
  """Offset after the closing quote of the string at i, or None if the line ends first."""
  quote, j = text[i], i + 1
  while j < len(text):
    c = text[j]
    if c == "\\":
      j += 2
      continue
    if c == quote:
      return j + 1
    if c == "\n":
      return None
    j += 1
  return None


def _regex_end(text: str, i: int) -> int:
  j, in_class = i + 1, False
  while j < len(text) and text[j] != "\n":
    c = text[j]
    if c == "\\":
      j += 2
      continue
    if c == "[":
      in_class = True
    elif c == "]":
      in_class = False
    elif c == "/" and not in_class:
      j += 1
      while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
      return j
    j += 1
  return j


def _line_start(text: str, i: int) -> int:
  return text.rfind("\n", 0, i) + 1


def _indent(text: str, i: int) -> int:
  start = _line_start(text, i)
  return len(text[start:i]) - len(text[start:i].lstrip(" \t"))


def _first_on_line(text: str, i: int) -> bool:
  return not text[_line_start(text, i):i].strip()


def line_span(text: str, i: int) -> tuple[int, int]:
  """The trimmed line at offset i (the statement-sized unit blamed for a syntax error); at
  or after the end of the code, its last non-empty line."""
  last = len(text.rstrip()) - 1
  if last < 0:
    return 0, 0
  i = min(max(i, 0), last)
  start, end = _line_start(text, i), _line_end(text, i)
  line = text[start:end]
  return start + len(line) - len(line.lstrip()), start + len(line.rstrip())
