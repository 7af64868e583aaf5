"""Records of this checkout on fixed sets of apps, and a field-by-field diff of two runs.

  .venv/bin/python benchmarks/record_parity.py grade OUT.jsonl
      [--sets examples,hostile,corpus,mutants]
      [--workers 2] [--corpus-range A:B]
  .venv/bin/python benchmarks/record_parity.py compare BEFORE.jsonl AFTER.jsonl

What a change to the evaluator must not change: grade the sets before and after it (two
checkouts, or `RCCA_CHROMIUM` naming two browsers), then compare. Sets: `examples` (the
responses and references of data/examples), `hostile` (apps that loop, bomb memory, reach
for the network, open dialogs and pop-ups, navigate away, throw), `dev` and `corpus` (the
reference of every task of data/tasks, train + dev + test; `--corpus-range` slices it),
`mutants` (of every dev reference one mutant per bug operator, seed 0, the default
operators and `rename_id`, `wrong_event`: their rubrics fail, which references never do).
Rows hold each record without its timing. A load's URL numbers the page's loads
(app-<n>), so it is compared as app-N. Some evidence depends on races inside Chromium
(which blocked request arrives first, where a terminated loop was stopped): grade the
same checkout twice to see which fields vary on their own.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import time

from rcca_jax.credit import mutations
from rcca_jax.data import chat
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import browser
from rcca_jax.evaluation import grader as grader_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.pool import Job

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "data" / "examples"
HOSTILE_CONFIG = EvalConfig(load_timeout=2.0, step_timeout=1.0, rubric_timeout=5.0)
HOSTILE_TASK = tasks_lib.parse_task({
    "id": "hostile", "request": "A button that says hi.",
    "rubrics": [
        {"id": "r1", "kind": "initial", "level": "core", "text": "A button exists",
         "check": 'expect exists "#b"'},
        {"id": "r2", "kind": "dynamic", "level": "behavior", "text": "Clicking shows hi",
         "check": 'click "#b"; expect text "#out" == "hi"'}]})
_DEAD = "http://127.0.0.1:9"
_SAYS_HI = 'document.getElementById("b").onclick = () => { out.textContent = "hi"; };'
HOSTILE = {
    "good": f'<button id="b">go</button><p id="out"></p><script>{_SAYS_HI}</script>',
    "loop_at_load": "<button id=b>x</button><script>while (true) {}</script>",
    "loop_in_click": '<button id="b" onclick="for (;;) {}">x</button><p id="out"></p>',
    "memory_bomb": ("<button id=b>x</button><script>const a = []; "
                    "for (;;) a.push(new Array(1e6).fill(1.5));</script>"),
    "memory_bomb_on_click": ('<button id="b">x</button><p id="out"></p><script>'
                             'document.getElementById("b").onclick = () => { const a = []; '
                             'for (;;) a.push("x".repeat(1e6) + Math.random()); };</script>'),
    "network": (f'<button id="b">x</button><p id="out"></p><img src="{_DEAD}/i.png">'
                f'<iframe src="{_DEAD}/frame"></iframe><link rel="stylesheet" href="{_DEAD}/s.css">'
                f'<script>fetch("{_DEAD}/fetch").catch(() => {{}});'
                f'navigator.sendBeacon("{_DEAD}/beacon", "x");'
                f'try {{ new WebSocket("ws://127.0.0.1:9/ws"); }} catch (e) {{}}'
                f'const x = new XMLHttpRequest(); x.open("GET", "{_DEAD}/xhr"); x.send();'
                f'document.getElementById("b").onclick = () => {{ location.href = "{_DEAD}/nav"; }};'
                f'</script>'),
    "dialogs": ('<button id="b">x</button><p id="out"></p><script>alert("a"); '
                'const ok = confirm("c"); prompt("p"); document.getElementById("b").onclick = '
                '() => { out.textContent = ok ? "hi" : "no"; };</script>'),
    "popups": ('<button id="b">x</button><p id="out"></p><script>'
               f'window.open("http://example.com/"); window.open("about:blank"); {_SAYS_HI}'
               '</script>'),
    "huge_dom": ('<button id="b">x</button><p id="out"></p><div id="big"></div><script>'
                 'let s = ""; for (let i = 0; i < 200000; i++) s += "<span>" + i + "</span>";'
                 'document.getElementById("big").innerHTML = s;</script>'),
    "throws_at_load": "<button id=b>x</button><script>\nnull.boom();\n</script>",
    "rejection": '<button id="b">x</button><script>Promise.reject(new Error("no"));</script>',
    "storage_write": ('<button id="b">x</button><p id="out"></p><script>'
                      'localStorage.setItem("k", "hi"); sessionStorage.setItem("k", "hi");</script>'),
    "storage_read": ('<button id="b">x</button><p id="out"></p><script>'
                     'document.getElementById("b").onclick = () => { out.textContent = '
                     'localStorage.getItem("k") || sessionStorage.getItem("k") || "hi"; };</script>'),
    "navigates_at_load": (f'<button id="b">x</button><img src="{_DEAD}/i.png"><script>'
                          f'fetch("{_DEAD}/f").catch(() => 0); location.href = "{_DEAD}/nav";'
                          f'</script>'),
}
SETS = ("examples", "hostile", "dev", "corpus", "mutants")
MUTANT_OPERATORS = (*mutations.OPERATORS, "rename_id", "wrong_event")


def _jobs(sets: list[str], corpus_range: tuple[int, int] | None):
  """(set, key, config, Job) in a fixed order."""
  out = []
  if "examples" in sets:
    tasks = {t.id: t for t in tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl")}
    for r in responses_lib.load_responses(EXAMPLES / "responses.jsonl"):
      out.append(("examples", f"{r.task_id}/{r.sample_id}", Job(tasks[r.task_id], r.response,
                                                                  r.sample_id)))
    out += [("examples", f"{t.id}/reference", Job(t, chat.format_response(t.reference), 0))
            for t in tasks.values() if t.reference]
  if "hostile" in sets:
    out += [("hostile", name, Job(HOSTILE_TASK, "```html\n<!DOCTYPE html><html><body>"
                                  f"{body}</body></html>\n```", 0))
            for name, body in HOSTILE.items()]
  for name, splits in (("dev", ("dev",)), ("corpus", ("train", "dev", "test"))):
    if name in sets:
      tasks = [t for s in splits for t in tasks_lib.load_tasks(ROOT / f"data/tasks/{s}.jsonl")]
      if name == "corpus" and corpus_range:
        tasks = tasks[corpus_range[0]:corpus_range[1]]
      out += [(name, t.id, Job(t, chat.format_response(t.reference), 0)) for t in tasks]
  if "mutants" in sets:
    for t in tasks_lib.load_tasks(ROOT / "data/tasks/dev.jsonl"):
      found = mutations.mutants(chat.format_response(t.reference), seed=0, per_operator=1,
                                operators=MUTANT_OPERATORS)
      out += [("mutants", f"{t.id}/{k}:{m.operator}", Job(t, m.response, 0))
              for k, m in enumerate(found)]
  return out


def grade(out_path: str, sets: list[str], workers: int,
          corpus_range: tuple[int, int] | None) -> None:
  jobs = _jobs(sets, corpus_range)
  start = time.monotonic()
  with open(out_path, "w", encoding="utf-8") as f:
    for hostile in (False, True):
      chosen = [(s, k, j) for s, k, j in jobs if (s == "hostile") == hostile]
      if not chosen:
        continue
      pool = grader_lib.make_grader(HOSTILE_CONFIG if hostile else EvalConfig(), workers=workers)
      try:
        for (kind, key, _), record in zip(chosen, pool.run([j for _, _, j in chosen])):
          record.pop("timing", None)
          f.write(json.dumps({"set": kind, "key": key, "record": record}, sort_keys=True) + "\n")
      finally:
        pool.close()
  print(f"{len(jobs)} records in {time.monotonic() - start:.0f} s with "
        f"{browser.find_chromium()} -> {out_path}", file=sys.stderr)


def _flat(value, prefix=""):
  if isinstance(value, dict):
    for k, v in value.items():
      yield from _flat(v, f"{prefix}.{k}")
  elif isinstance(value, list):
    for i, v in enumerate(value):
      yield from _flat(v, f"{prefix}[{i}]")
    if not value:
      yield prefix, "[]"
  elif isinstance(value, str):
    yield prefix, re.sub(r"app-\d+\.rcca\.invalid", "app-N.rcca.invalid", value)
  else:
    yield prefix, value


def compare(before_path: str, after_path: str) -> int:
  """Prints the records that differ and their fields; returns how many differ."""
  rows = []
  for path in (before_path, after_path):
    with open(path, encoding="utf-8") as f:
      rows.append([json.loads(line) for line in f])
  before, after = rows
  keys = [(r["set"], r["key"]) for r in before]
  if keys != [(r["set"], r["key"]) for r in after]:
    raise SystemExit(f"{before_path} and {after_path} hold different apps")
  differ = 0
  for a, b in zip(before, after):
    fa, fb = dict(_flat(a["record"])), dict(_flat(b["record"]))
    fields = [k for k in sorted(set(fa) | set(fb)) if fa.get(k, "<absent>") != fb.get(k, "<absent>")]
    if fields:
      differ += 1
      print(f"{a['set']} {a['key']}: {len(fields)} field(s) differ")
      for k in fields[:12]:
        print(f"  {k}: {str(fa.get(k, '<absent>'))[:120]!r} -> {str(fb.get(k, '<absent>'))[:120]!r}")
  print(f"{len(before)} records compared: {len(before) - differ} identical, {differ} differ")
  return differ


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = parser.add_subparsers(dest="command", required=True)
  g = sub.add_parser("grade")
  g.add_argument("out")
  g.add_argument("--sets", default="examples,hostile,corpus,mutants")
  g.add_argument("--workers", type=int, default=2)
  g.add_argument("--corpus-range", default=None, help="A:B, a slice of the corpus set")
  c = sub.add_parser("compare")
  c.add_argument("before")
  c.add_argument("after")
  args = parser.parse_args()
  if args.command == "compare":
    sys.exit(1 if compare(args.before, args.after) else 0)
  sets = [s for s in args.sets.split(",") if s]
  unknown = sorted(set(sets) - set(SETS))
  if unknown:
    parser.error(f"unknown set(s) {', '.join(unknown)}; choose from {', '.join(SETS)}")
  rng = tuple(int(v) for v in args.corpus_range.split(":")) if args.corpus_range else None
  grade(args.out, sets, args.workers, rng)


if __name__ == "__main__":
  main()
