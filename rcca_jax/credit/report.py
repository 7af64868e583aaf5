"""A self-contained HTML page showing what credit assignment blamed, token by token.

Each response is rendered with its tokens shaded by diagnostic weight; beside it the
issues (stage, rubric, severity, message, links to their direct/context spans) and the
rubrics. Hovering an issue outlines its tokens (solid: direct, dashed: context).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from typing import Any

import numpy as np

from rcca_jax.credit.align import overlaps

_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
section{border-top:2px solid #999;margin-top:2em;padding-top:.5em}
.cols{display:flex;gap:1.5em;align-items:flex-start}
pre.code{flex:3;white-space:pre-wrap;word-break:break-all;font:12px/1.45 ui-monospace,monospace;
 background:#fafafa;border:1px solid #ddd;padding:.8em;max-height:80vh;overflow:auto;margin:0}
aside{flex:2;max-height:80vh;overflow:auto}
.t{border-radius:2px}
.t.hl-d{outline:2px solid #c00}
.t.hl-c{outline:1px dashed #06c}
li.issue{margin-bottom:.8em}
li.issue:hover{background:#fff6e0}
.sev-critical{color:#b00;font-weight:bold}.sev-major{color:#c60}.sev-minor{color:#777}
.pass{color:#080}.fail{color:#b00}.none{color:#777}
.legend span{padding:0 .5em;margin-right:.3em}
.note{color:#b00}
code{font-size:12px}
"""

_SCRIPT = """
document.addEventListener('mouseover', (ev) => {
  const li = ev.target.closest('li.issue');
  document.querySelectorAll('.hl-d,.hl-c').forEach((t) => t.classList.remove('hl-d', 'hl-c'));
  if (!li) return;
  const sec = li.closest('section');
  const k = li.dataset.issue;
  sec.querySelectorAll('.t').forEach((t) => {
    if ((t.dataset.d || '').split(' ').includes(k)) t.classList.add('hl-d');
    else if ((t.dataset.c || '').split(' ').includes(k)) t.classList.add('hl-c');
  });
});
"""


@dataclasses.dataclass
class ReportItem:
  task_id: str
  sample_id: int
  response: str
  offsets: np.ndarray             # [T, 2]
  weights: np.ndarray             # [T]
  record: dict[str, Any] | None   # the (localized) evaluation record
  note: str | None = None         # why the weights are all 1.0, when they are


def _shade(w: float, cap: float) -> str:
  if w <= 1.0:
    return ""
  alpha = 0.15 + 0.7 * min(1.0, (w - 1.0) / max(1e-9, cap - 1.0))
  return f"background:rgba(255,110,0,{alpha:.2f})"


def _tokens_html(n: int, item: ReportItem, issues: Sequence[dict], cap: float) -> str:
  offs = np.asarray(item.offsets, dtype=np.int64).reshape(-1, 2)
  direct = [overlaps(offs, iss.get("direct") or []) for iss in issues]
  context = [overlaps(offs, iss.get("context") or []) for iss in issues]
  parts, cursor = [], 0
  text = item.response
  for t, (s, e) in enumerate(offs.tolist()):
    if s > cursor:
      parts.append(html.escape(text[cursor:s]))
    piece = text[max(s, cursor):e]
    cursor = max(cursor, e)
    d = " ".join(str(k) for k in range(len(issues)) if direct[k][t])
    c = " ".join(str(k) for k in range(len(issues)) if context[k][t] and not direct[k][t])
    w = float(item.weights[t])
    attrs = [f'class="t" id="r{n}-t{t}"', f'title="token {t} [{s}, {e}) w={w:g}"']
    if _shade(w, cap):
      attrs.append(f'style="{_shade(w, cap)}"')
    if d:
      attrs.append(f'data-d="{d}"')
    if c:
      attrs.append(f'data-c="{c}"')
    parts.append(f"<span {' '.join(attrs)}>{html.escape(piece)}</span>")
  if cursor < len(text):
    parts.append(html.escape(text[cursor:]))
  return "".join(parts)


def _span_links(n: int, offs: np.ndarray, spans: Sequence[Sequence[int]]) -> str:
  links = []
  for s, e in spans:
    hit = np.nonzero(overlaps(offs, [(s, e)]))[0]
    label = f"[{int(s)}, {int(e)})"
    links.append(f'<a href="#r{n}-t{int(hit[0])}">{label}</a>' if len(hit) else label)
  return " ".join(links) or "none"


def _issues_html(n: int, item: ReportItem, issues: Sequence[dict], rubric_ids: set[str]) -> str:
  offs = np.asarray(item.offsets, dtype=np.int64).reshape(-1, 2)
  rows = []
  for k, iss in enumerate(issues):
    rid = iss.get("rubric_id")
    rubric = (f'<a href="#r{n}-rub-{html.escape(str(rid), quote=True)}">{html.escape(str(rid))}</a>'
              if rid in rubric_ids else html.escape(str(rid)) if rid else "")
    sev = html.escape(str(iss.get("severity") or ""))
    ev = iss.get("evidence") or {}
    step = f"<br>step: <code>{html.escape(str(ev['step']))}</code>" if ev.get("step") else ""
    rows.append(
        f'<li class="issue" id="r{n}-i{k}" data-issue="{k}">'
        f"<b>{html.escape(str(iss.get('stage', '')))}</b> {rubric} "
        f'<span class="sev-{sev}">{sev}</span><br>{html.escape(str(iss.get("message", "")))}{step}'
        f"<br>direct: {_span_links(n, offs, iss.get('direct') or [])}"
        f"<br>context: {_span_links(n, offs, iss.get('context') or [])}</li>")
  return "<ol>" + "".join(rows) + "</ol>" if rows else "<p>no issues</p>"


def _rubrics_html(n: int, record: dict, issues: Sequence[dict]) -> str:
  rows = []
  for r in record.get("rubrics") or []:
    rid = str(r.get("id"))
    passed = r.get("passed")
    cls, word = ("pass", "passed") if passed else ("none", "ungraded") if passed is None else ("fail", "failed")
    back = " ".join(f'<a href="#r{n}-i{k}">issue {k + 1}</a>'
                    for k, iss in enumerate(issues) if iss.get("rubric_id") == rid)
    rows.append(f'<li id="r{n}-rub-{html.escape(rid, quote=True)}"><b>{html.escape(rid)}</b> '
                f'<span class="{cls}">{word}</span> {html.escape(str(r.get("severity") or ""))} '
                f"{html.escape(str(r.get('detail') or ''))} {back}</li>")
  return "<ul>" + "".join(rows) + "</ul>" if rows else ""


def render_report(items: Sequence[ReportItem], *, cap: float = 4.0, title: str = "RCCA credit") -> str:
  """The report page for `items`, as one self-contained HTML string."""
  body = []
  for n, item in enumerate(items):
    record = item.record or {}
    issues = list(record.get("issues") or [])
    rubric_ids = {str(r.get("id")) for r in record.get("rubrics") or []}
    w = np.asarray(item.weights, dtype=np.float64)
    blamed = float(np.mean(w > 1.0)) if len(w) else 0.0
    reward = record.get("reward")
    head = (f"{html.escape(str(item.task_id))} #{item.sample_id} &mdash; reward "
            f"{html.escape(str(reward))} &mdash; {len(w)} tokens, {100 * blamed:.1f}% weighted")
    note = f'<p class="note">{html.escape(item.note)}</p>' if item.note else ""
    body.append(
        f'<section id="r{n}"><h2>{head}</h2>{note}<div class="cols">'
        f'<pre class="code">{_tokens_html(n, item, issues, cap)}</pre>'
        f"<aside><h3>Issues</h3>{_issues_html(n, item, issues, rubric_ids)}"
        f"<h3>Rubrics</h3>{_rubrics_html(n, record, issues)}</aside></div></section>")
  legend = "".join(f'<span style="{_shade(w, cap) or "background:#fafafa"}">w={w:g}</span>'
                   for w in (1.0, 1.5, 3.0, cap))
  index = " ".join(f'<a href="#r{n}">{html.escape(str(i.task_id))}#{i.sample_id}</a>'
                   for n, i in enumerate(items))
  return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
          f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>"
          f"<h1>{html.escape(title)}</h1><p class=\"legend\">{legend}</p><p>{index}</p>"
          + "".join(body) + "</body></html>")
