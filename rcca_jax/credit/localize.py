"""Code localization: issue evidence -> direct and context spans of the response.

`localize_record(record, response)` recomputes `direct` and `context` of every issue of
an evaluation record (docs/contracts.md#4-evaluation) from its evidence (its keys:
docs/contracts.md#issue-evidence), by the rules of docs/method.md#4-code-localization.
What the running browser reported (stack frames, listener locations, matched CSS rules)
comes first; reading the source (element look-ups, bindings) fills in where the browser
had nothing to say. All work is in app coordinates, converted to response spans
at the end; the result is deterministic.

`localize_record` is the graders' post-process: the trainer (`train/programs.py`) and
`python -m rcca_jax.evaluate` pass it to `evaluation.grader.make_grader`, whose workers
import it by name and run it on every record; the grading cache hashes this module's
sources and those it imports.

Each kind of evidence has its rule in `rcca_jax.credit.rules` (exceptions and hangs,
listeners and bindings, CSS, elements and missing targets), a pure function of the
evidence and the app's `AppView` returning a `Blame`; `localize_issue` composes them.

Where the policy fails most: a selector that matches nothing blames the element the app
most plausibly meant (`targets`; `evidence.target_guess` says which, or why none); a
listener or binding for an event the action does not fire blames the binding; a hang
blames the loop the paused script was in; a syntax error blames the construct left open
and where parsing fails (`evidence.syntax_spans`).
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

from rcca_jax.base.schema import Span, merge_spans, subtract_spans
from rcca_jax.credit.context import expand_context
from rcca_jax.credit.rules.css import css_blame
from rcca_jax.credit.rules.elements import element_blame
from rcca_jax.credit.rules.events import listener_blame
from rcca_jax.credit.rules.exceptions import exception_blame
from rcca_jax.credit.rules.view import AppView, is_span

QUOTE_THRESHOLD = 0.8
_MIN_QUOTE = 8


def localize_record(record: dict[str, Any], response: str) -> dict[str, Any]:
  """A copy of `record` whose issues' `direct`/`context` are recomputed from evidence.

  An issue for which the evidence yields nothing keeps the evaluator's `direct`.
  `context` never repeats `direct`; both are sorted, merged response spans.
  """
  out = dict(record)
  view = AppView.of(response, record.get("html_span"))
  issues = []
  for issue in record.get("issues") or []:
    new = copy.deepcopy(issue)
    direct, context, note = localize_issue(issue, response, view)
    if note is not None:
      new.setdefault("evidence", {})["target_guess"] = note
    if not direct:
      direct = merge_spans(issue.get("direct") or [])
    new["direct"] = [list(s) for s in direct]
    new["context"] = [list(s) for s in subtract_spans(context, direct)]
    issues.append(new)
  out["issues"] = issues
  return out


def localize_issue(issue: dict[str, Any], response: str, view: AppView | None
                   ) -> tuple[list[Span], list[Span], dict[str, Any] | None]:
  """(direct, context) response spans of one issue, and its missing-target note.

  Precedence: an exception the browser saw is the most specific evidence (what the
  rubric's target and path point at is then context); a guessed missing target makes the
  acted-on handlers context (they did their work on an element under another name).
  Source-error nodes and judge quotes are direct whatever else is found."""
  ev = issue.get("evidence") or {}
  direct_resp = _response_spans(ev, response)
  if view is None:
    return merge_spans(direct_resp), [], None
  thrown = exception_blame(ev, view)
  handlers = listener_blame(ev, view)
  css = css_blame(ev, view)
  element = element_blame(ev, view)
  found = list(css.direct + element.direct)
  context = list(thrown.context + handlers.context + css.context + element.context)
  if (element.note or {}).get("guess"):
    context.extend(handlers.direct)
  else:
    found.extend(handlers.direct)
  direct = list(thrown.direct) if thrown.direct else found
  if thrown.direct:
    context.extend(found)
  direct.extend(s for s in map(view.span_to_app, direct_resp) if s is not None)
  html_ids = [(t.attributes["id"], t.app_span) for t in view.id_elements]
  context.extend(expand_context(view.index, direct, html_ids))
  direct_out = merge_spans(view.to_response(merge_spans(direct)) + direct_resp)
  context_out = subtract_spans(view.to_response(merge_spans(context)), direct_out)
  return direct_out, context_out, element.note


def _response_spans(ev: dict[str, Any], response: str) -> list[Span]:
  """Response spans the evidence names itself: the construct left open and where parsing
  fails (`syntax_spans`), else the parse-error node; and judge quotes matched back."""
  spans = [tuple(x) for x in ev.get("syntax_spans") or [] if is_span(x)]
  if not spans and is_span(ev.get("node_span")):
    spans.append(tuple(ev["node_span"]))
  for quote in ev.get("quotes") or []:
    if isinstance(quote, str):
      spans.extend(match_quote(response, quote))
  return spans


def match_quote(response: str, quote: str, threshold: float = QUOTE_THRESHOLD) -> list[Span]:
  """Response spans of a quoted code excerpt: exact up to whitespace, else the best
  difflib match over windows of as many lines, if its ratio reaches `threshold`."""
  norm_q = " ".join(quote.split())
  if len(norm_q) < _MIN_QUOTE:
    return []
  norm, where = _normalize(response)
  spans = []
  start = norm.find(norm_q)
  while start >= 0 and len(spans) < 3:
    spans.append((where[start], where[start + len(norm_q) - 1] + 1))
    start = norm.find(norm_q, start + 1)
  if spans:
    return spans
  lines = [(m.start(), m.end()) for m in re.finditer(r"[^\n]*\S[^\n]*", response)]
  n = max(1, sum(1 for l in quote.splitlines() if l.strip()))
  best, best_span = threshold, None
  for width in sorted({max(1, n - 1), n, n + 1}):
    for i in range(len(lines) - width + 1):
      s, e = lines[i][0], lines[i + width - 1][1]
      window = " ".join(response[s:e].split())
      matcher = difflib.SequenceMatcher(None, norm_q, window, autojunk=False)
      if matcher.real_quick_ratio() < best or matcher.quick_ratio() < best:
        continue
      ratio = matcher.ratio()
      if ratio > best or (ratio == best and best_span is None):
        best, best_span = ratio, (s + len(response[s:e]) - len(response[s:e].lstrip()), e)
  return [best_span] if best_span else []


def _normalize(text: str) -> tuple[str, list[int]]:
  """`text` with whitespace runs collapsed to one space, and each char's source index."""
  chars, where = [], []
  for m in re.finditer(r"\S+|\s+", text):
    if m.group().isspace():
      if chars:
        chars.append(" ")
        where.append(m.start())
    else:
      chars.extend(m.group())
      where.extend(range(m.start(), m.end()))
  return "".join(chars), where
