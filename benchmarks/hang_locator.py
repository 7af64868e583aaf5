"""Cost of locating hangs: Debugger paused near the deadline vs Profiler sampling.

    python benchmarks/hang_locator.py [--apps 10] [--rounds 3]

One evaluator per `hang_locator` setting (none = the baseline, debugger, profiler), in
this process, sequentially, on the same apps in the same run (rounds interleave the
settings so that machine load drifts hit all of them alike):
- hang-free loads: the reference apps of data/examples and the train split; seconds per
  app and the ratio to the baseline (acceptance: at most 1.05);
- hung apps (a loop at load and one in a click handler): seconds per app and whether the
  issue's direct span is the loop.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

from rcca_jax.credit.localize import localize_record
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.tasks import parse_task
from rcca_jax.evaluation.config import HANG_LOCATORS, EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from rcca_jax.data import chat

ROOT = pathlib.Path(__file__).resolve().parent.parent
_HUNG = """<!DOCTYPE html><html><body><span id="count">0</span><button id="inc">+</button>
<script>
let n = 0;
function spin(k) {
  let i = 0;
  while (i < k) { n += 0; }
}
document.getElementById('inc').addEventListener('click', () => { spin(3); });
%s
</script></body></html>"""
HUNG = {"handler": _HUNG % "", "load": _HUNG % "for (let j = 0; j < 5; j--) { n = j; }"}
LOOPS = {"handler": "while (i < k)", "load": "for (let j = 0; j < 5; j--)"}
HUNG_TASK = parse_task({"id": "hung", "request": "counter", "rubrics": [
    {"id": "r1", "kind": "dynamic", "level": "core", "text": "+ adds one",
     "check": 'click "#inc"; expect text "#count" == "1"'}]})


def _apps(n: int):
  tasks = [t for t in tasks_lib.load_tasks(ROOT / "data" / "examples" / "tasks.jsonl")
           if t.reference]
  tasks += [t for t in tasks_lib.load_tasks(ROOT / "data" / "tasks" / "dev.jsonl")
            if t.reference][:max(0, n - len(tasks))]
  return tasks[:n]


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--apps", type=int, default=10)
  p.add_argument("--rounds", type=int, default=3)
  args = p.parse_args()
  apps = _apps(args.apps)
  config = dict(load_timeout=2.0, step_timeout=1.0)
  evaluators = {k: Evaluator(EvalConfig(hang_locator=k, **config)) for k in HANG_LOCATORS}
  free = {k: [] for k in HANG_LOCATORS}
  hung = {k: [] for k in HANG_LOCATORS}
  found = {k: 0 for k in HANG_LOCATORS}
  try:
    for ev in evaluators.values():           # warm: browser start and first loads
      ev.evaluate(apps[0], chat.format_response(apps[0].reference), 0)
    for _ in range(args.rounds):
      for kind, ev in evaluators.items():
        start = time.perf_counter()
        for task in apps:
          ev.evaluate(task, chat.format_response(task.reference), 0)
        free[kind].append((time.perf_counter() - start) / len(apps))
        for where, html in HUNG.items():
          response = chat.format_response(html)
          start = time.perf_counter()
          record = ev.evaluate(HUNG_TASK, response, 0).to_json()
          hung[kind].append(time.perf_counter() - start)
          issues = localize_record(record, response)["issues"]
          direct = {response[s:e] for i in issues if i["stage"] == "runtime"
                    for s, e in i["direct"]}
          found[kind] += LOOPS[where] in direct
  finally:
    for ev in evaluators.values():
      ev.close()
  base = statistics.median(free["none"])
  print(f"{len(apps)} hang-free apps x {args.rounds} rounds; 2 hung apps x {args.rounds} rounds")
  print(f"{'locator':<10}{'s/app (hang-free)':>19}{'ratio':>8}{'s/hung app':>12}{'loop found':>12}")
  for kind in HANG_LOCATORS:
    med = statistics.median(free[kind])
    print(f"{kind:<10}{med:>19.3f}{med / base:>8.3f}{statistics.median(hung[kind]):>12.2f}"
          f"{found[kind]:>7}/{2 * args.rounds}")


if __name__ == "__main__":
  main()
