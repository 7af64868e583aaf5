"""Cost of locating hangs: Debugger paused near the deadline vs Profiler sampling.

    python benchmarks/hang_locator.py [--apps 10] [--rounds 3]

One evaluator per `hang_locator` setting (none = the baseline, debugger, profiler), in
this process, sequentially, on the same apps in the same run (each app is evaluated by
every setting in turn, the order alternating between rounds, so that machine load
drifts hit all of them alike):
- hang-free loads: the reference apps of data/examples and the dev split; seconds per
  app, the ratio of total time to the baseline (acceptance: at most 1.05), the median
  of per-app ratios, and the messages exchanged with the Playwright driver per app (calls
  and events: the protocol work, deterministic, unlike time on a shared machine);
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


class DriverTraffic:
  """Counts messages between Python and the Playwright driver (calls sent, events received):
  a deterministic measure of the protocol work an evaluation causes."""

  def __init__(self):
    from playwright._impl import connection  # pylint: disable=import-outside-toplevel
    self.count = 0
    self._connection = connection.Connection
    self._send = connection.Connection.send_message_to_server
    self._dispatch = connection.Connection.dispatch
    traffic = self

    def send(conn, *args, **kwargs):
      traffic.count += 1
      return traffic._send(conn, *args, **kwargs)

    def dispatch(conn, message):
      traffic.count += not message.get("id")
      return traffic._dispatch(conn, message)

    connection.Connection.send_message_to_server = send
    connection.Connection.dispatch = dispatch

  def close(self) -> None:
    self._connection.send_message_to_server = self._send
    self._connection.dispatch = self._dispatch


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
  free_msgs = {k: [] for k in HANG_LOCATORS}
  traffic = DriverTraffic()
  hung = {k: [] for k in HANG_LOCATORS}
  found = {k: 0 for k in HANG_LOCATORS}
  try:
    for ev in evaluators.values():           # warm: browser start and first loads
      ev.evaluate(apps[0], chat.format_response(apps[0].reference), 0)
    for r in range(args.rounds):
      for task in apps:                      # interleaved per app: load drifts cancel out
        kinds = list(evaluators) if r % 2 == 0 else list(evaluators)[::-1]
        for kind in kinds:
          start, messages = time.perf_counter(), traffic.count
          evaluators[kind].evaluate(task, chat.format_response(task.reference), 0)
          free[kind].append(time.perf_counter() - start)
          free_msgs[kind].append(traffic.count - messages)
      for kind, ev in evaluators.items():
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
    traffic.close()
    for ev in evaluators.values():
      ev.close()
  base, base_msgs = sum(free["none"]), sum(free_msgs["none"])
  print(f"{len(apps)} hang-free apps x {args.rounds} rounds; 2 hung apps x {args.rounds} rounds")
  print(f"{'locator':<10}{'s/app':>8}{'ratio':>8}{'median app ratio':>18}{'msgs/app':>10}"
        f"{'msgs ratio':>12}{'s/hung app':>12}{'loop found':>12}")
  for kind in HANG_LOCATORS:
    per_app = statistics.median(a / b for a, b in zip(free[kind], free["none"]))
    print(f"{kind:<10}{statistics.mean(free[kind]):>8.3f}{sum(free[kind]) / base:>8.3f}"
          f"{per_app:>18.3f}{statistics.mean(free_msgs[kind]):>10.1f}"
          f"{sum(free_msgs[kind]) / base_msgs:>12.3f}{statistics.median(hung[kind]):>12.2f}"
          f"{found[kind]:>7}/{2 * args.rounds}")


if __name__ == "__main__":
  main()
