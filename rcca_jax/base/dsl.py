"""The rubric check DSL (docs/contracts.md#2-rubric-check-dsl): parsing into `Step`s and
canonical printing.

Grammar: `rubric_dsl.lark` (lark, LALR). Operators are validated per step kind here so
that `expect count "li" contains "3"` gets a message that names the allowed operators.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pathlib
import re

import lark

ACTIONS = ("click", "dblclick", "hover", "fill", "press", "select", "check", "uncheck", "wait")
EXPECTATIONS = ("exists", "visible", "hidden", "count", "text", "value", "attr", "style",
                "number", "js", "no_errors")
VERBS = ACTIONS + ("expect",)
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
STR_OPS = ("==", "!=", "contains", "matches")
NUMERIC_EXPECTATIONS = ("count", "number")
SELECTOR_VERBS = ("click", "dblclick", "hover", "fill", "select", "check", "uncheck")

_GRAMMAR = pathlib.Path(__file__).with_name("rubric_dsl.lark")
_NAME_RE = re.compile(r"[A-Za-z_-][A-Za-z0-9_:.-]*\Z")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_QUOTE = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_TERMINAL_NAMES = {
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "OP": "an operator",
    "NAME": "a name",
    "_SEMI": "';'",
    "_NL": "a newline",
    "$END": "the end of the check",
    "NUMBER_KW": "'number'",
}


class DslSyntaxError(ValueError):
  """A check that does not parse; `message` shows the offending line and a caret."""

  def __init__(self, text: str, line: int, column: int, reason: str):
    self.line = line
    self.column = column
    self.reason = reason
    lines = text.split("\n")
    self.source_line = lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else ""
    where = f"column {column}" if len(lines) == 1 else f"line {line}, column {column}"
    self.message = (f"syntax error at {where}: {reason}\n"
                    f"  {self.source_line}\n  {' ' * (column - 1)}^")
    super().__init__(self.message)
    self._init_args = (text, line, column, reason)

  def __reduce__(self):
    return type(self), self._init_args


@dataclasses.dataclass(frozen=True)
class Step:
  """One action or expectation of a rubric check."""

  verb: str
  selector: str | None = None
  expect: str | None = None
  name: str | None = None
  op: str | None = None
  value: str | float | None = None
  column: int = dataclasses.field(default=1, compare=False)
  line: int = dataclasses.field(default=1, compare=False)

  @property
  def is_expectation(self) -> bool:
    return self.verb == "expect"

  def __str__(self) -> str:
    if self.verb == "wait":
      return f"wait {_format_number(self.value)}"
    if self.verb == "press":
      key = _quote(self.value)
      return f"press {_quote(self.selector)} {key}" if self.selector is not None else f"press {key}"
    if self.verb in ("fill", "select"):
      return f"{self.verb} {_quote(self.selector)} {_quote(self.value)}"
    if self.verb != "expect":
      return f"{self.verb} {_quote(self.selector)}"
    kind = self.expect
    if kind == "no_errors":
      return "expect no_errors"
    if kind == "js":
      return f"expect js {_quote(self.value)}"
    head = f"expect {kind} {_quote(self.selector)}"
    if kind in ("exists", "visible", "hidden"):
      return head
    if kind in NUMERIC_EXPECTATIONS:
      return f"{head} {self.op} {_format_number(self.value)}"
    if kind in ("attr", "style"):
      name = self.name if _NAME_RE.match(self.name) else _quote(self.name)
      return f"{head} {name} {self.op} {_quote(self.value)}"
    return f"{head} {self.op} {_quote(self.value)}"


def format_steps(steps) -> str:
  """Canonical one-line DSL text of a sequence of steps."""
  return "; ".join(str(s) for s in steps)


@functools.lru_cache(maxsize=1 << 16)
def parse_check(text: str) -> tuple[Step, ...]:
  """Parses a check into steps; raises DslSyntaxError (with line and column).

  Memoised (steps are immutable): task files repeat checks, and a job or a test process
  loads the same files many times.
  """
  try:
    tree = _parser().parse(text)
  except lark.exceptions.UnexpectedInput as e:
    raise _syntax_error(text, e) from None
  return tuple(_build_step(text, t) for t in tree.children)


@functools.cache
def _parser() -> lark.Lark:
  return lark.Lark(_GRAMMAR.read_text(), parser="lalr", lexer="contextual")


def _quote(s: str) -> str:
  return '"' + "".join(_QUOTE.get(ch, ch) for ch in s) + '"'


def _unquote(token: str) -> str:
  body = token[1:-1]
  return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), body)


def _format_number(x: float) -> str:
  if float(x).is_integer() and abs(x) < 1e15:
    return str(int(x))
  return repr(float(x))


def _build_step(text: str, tree: lark.Tree) -> Step:
  """Turns one step subtree (named by its grammar alias) into a Step."""
  toks: list[lark.Token] = tree.children
  kind = tree.data
  pos = {"line": toks[0].line, "column": toks[0].column}

  def string(tok: lark.Token, what: str) -> str:
    if tok.type != "STRING":
      raise _error_at(text, tok, f"{what} must be a quoted string, got {tok.value}")
    return _unquote(tok.value)

  def number(tok: lark.Token, what: str) -> float:
    if tok.type != "NUMBER":
      raise _error_at(text, tok, f"{what} must be a number, got {tok.value}")
    x = float(tok.value)
    if not math.isfinite(x):
      raise _error_at(text, tok, f"{what} is out of range: {tok.value}")
    return x

  if kind in ("click", "dblclick", "hover", "check", "uncheck"):
    return Step(kind, selector=string(toks[1], "selector"), **pos)
  if kind in ("fill", "select"):
    what = "text to fill" if kind == "fill" else "option value"
    return Step(kind, selector=string(toks[1], "selector"), value=string(toks[2], what), **pos)
  if kind == "press":
    return Step("press", value=string(toks[1], "key"), **pos)
  if kind == "press_on":
    return Step("press", selector=string(toks[1], "selector"), value=string(toks[2], "key"),
                **pos)
  if kind == "wait":
    ms = number(toks[1], "wait time (ms)")
    if ms < 0:
      raise _error_at(text, toks[1], f"wait time must not be negative, got {toks[1].value}")
    return Step("wait", value=ms, **pos)

  expect = kind.removeprefix("expect_")
  if expect == "no_errors":
    return Step("expect", expect=expect, **pos)
  if expect == "js":
    return Step("expect", expect=expect, value=string(toks[2], "JS expression"), **pos)
  selector = string(toks[2], "selector")
  if expect in ("exists", "visible", "hidden"):
    return Step("expect", selector=selector, expect=expect, **pos)
  name = None
  rest = toks[3:]
  if expect in ("attr", "style"):
    name = _unquote(rest[0].value) if rest[0].type == "STRING" else rest[0].value
    if not name:
      raise _error_at(text, rest[0], f"the {expect} name must not be empty")
    rest = rest[1:]
  op_tok, value_tok = rest
  allowed = CMP_OPS if expect in NUMERIC_EXPECTATIONS else STR_OPS
  if op_tok.value not in allowed:
    raise _error_at(text, op_tok,
                    f"operator '{op_tok.value}' is not allowed in 'expect {expect}'; "
                    f"use one of {' '.join(allowed)}")
  if expect in NUMERIC_EXPECTATIONS:
    value = number(value_tok, f"'expect {expect}' operand")
    if expect == "count" and (value < 0 or not value.is_integer()):
      raise _error_at(text, value_tok,
                      f"'expect count' needs a non-negative integer, got {value_tok.value}")
  else:
    value = string(value_tok, f"'expect {expect}' operand")
  return Step("expect", selector=selector, expect=expect, name=name, op=op_tok.value,
              value=value, **pos)


def _error_at(text: str, tok: lark.Token, reason: str) -> DslSyntaxError:
  return DslSyntaxError(text, tok.line, tok.column, reason)


def _describe_expected(names) -> str:
  names = set(names)
  if names >= {n.upper() for n in VERBS}:
    return "a step (" + ", ".join(VERBS) + ")"
  if names >= {"EXISTS", "NO_ERRORS", "JS"}:
    return "an expectation (" + ", ".join(EXPECTATIONS) + ")"
  described = sorted(_TERMINAL_NAMES.get(n, f"'{n.lower()}'") for n in names)
  return described[0] if len(described) == 1 else "one of " + ", ".join(described)


def _end_position(text: str) -> tuple[int, int]:
  lines = text.split("\n")
  return len(lines), len(lines[-1]) + 1


def _syntax_error(text: str, e: lark.exceptions.UnexpectedInput) -> DslSyntaxError:
  """Turns a lark error into a DslSyntaxError with a readable reason."""
  if isinstance(e, lark.exceptions.UnexpectedCharacters):
    if e.char == '"':
      return DslSyntaxError(text, e.line, e.column, "unterminated string")
    word = re.match(r"[^\s;]*", text[e.pos_in_stream:]).group(0)
    if "NUMBER" in e.allowed and re.match(r"-?[\d.]", word):
      return DslSyntaxError(text, e.line, e.column, f"malformed number {word!r}")
    return DslSyntaxError(text, e.line, e.column,
                          f"unexpected character {e.char!r}; expected "
                          f"{_describe_expected(e.allowed)}")
  if isinstance(e, lark.exceptions.UnexpectedToken):
    tok = e.token
    expected = _describe_expected(e.expected)
    if tok.type == "$END":
      line, column = _end_position(text)
      return DslSyntaxError(text, line, column, f"check ends too early; expected {expected}")
    if tok.type in ("_NL", "_SEMI"):
      reason = f"the step is incomplete; expected {expected}"
    elif "EXPECT" in e.expected:
      reason = f"unknown step {tok.value!r}; expected {expected}"
    elif "_NL" in e.expected:
      reason = f"unexpected {tok.value!r}; missing ';' between steps, or an extra operand?"
    else:
      reason = f"unexpected {tok.value!r}; expected {expected}"
    return DslSyntaxError(text, tok.line, tok.column, reason)
  line, column = _end_position(text)
  return DslSyntaxError(text, line, column, str(e))
