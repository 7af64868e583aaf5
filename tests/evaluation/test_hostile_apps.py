"""Acceptance: hostile apps each get one record within a bounded time, and the run goes on."""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from tests.fixtures.app_fixtures import app

CONFIG = EvalConfig(load_timeout=2.0, step_timeout=1.0, rubric_timeout=5.0)
# Per-app bound: load deadline + one step deadline per rubric + a crash retry + slack.
BOUND_S = 12.0

TASK = tasks_lib.parse_task({
    "id": "hostile", "request": "A button that says hi.",
    "rubrics": [
        {"id": "r1", "kind": "initial", "level": "core", "text": "A button exists",
         "check": 'expect exists "#b"'},
        {"id": "r2", "kind": "dynamic", "level": "behavior", "text": "Clicking shows hi",
         "check": 'click "#b"; expect text "#out" == "hi"'},
    ]})

GOOD = ('<button id="b">go</button><p id="out"></p><script>'
        'document.getElementById("b").onclick = () => { '
        'document.getElementById("out").textContent = "hi"; };</script>')


class _Counter(http.server.BaseHTTPRequestHandler):
  hits = 0

  def _hit(self):
    type(self).hits += 1
    self.send_response(200)
    self.send_header("Content-Type", "text/plain")
    self.end_headers()
    self.wfile.write(b"ok")

  do_GET = do_POST = do_HEAD = _hit

  def log_message(self, *args):
    pass


class LoopbackServer:
  """A loopback HTTP server that counts every request it receives."""

  def __enter__(self):
    self.handler = type("Handler", (_Counter,), {"hits": 0})
    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
    self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
    self.thread.start()
    return self

  @property
  def hits(self) -> int:
    return self.handler.hits

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()


@pytest.mark.browser
class HostileAppTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.ev = Evaluator(CONFIG)
    cls.server = LoopbackServer().__enter__()

  @classmethod
  def tearDownClass(cls):
    cls.ev.close()
    cls.server.__exit__(None, None, None)
    super().tearDownClass()

  def _evaluate(self, body: str):
    start = time.monotonic()
    record = self.ev.evaluate(TASK, app(body), 0).to_json()
    elapsed = time.monotonic() - start
    self.assertLess(elapsed, BOUND_S)
    # The run goes on: the same evaluator still grades a good app correctly afterwards.
    after = self.ev.evaluate(TASK, app(GOOD), 1).to_json()
    self.assertEqual(after["reward"], 1.0, after)
    return record

  def test_infinite_loop_at_load(self):
    record = self._evaluate("<button id=b>x</button><script>while (true) {}</script>")
    self.assertIs(record["gates"]["runtime"], False)
    self.assertEqual(record["reward"], 0.10)
    self.assertIn("did not finish", record["issues"][0]["message"])

  def test_infinite_loop_in_click_handler(self):
    record = self._evaluate('<button id="b" onclick="for (;;) {}">x</button><p id="out"></p>')
    self.assertIs(record["gates"]["runtime"], False)
    r2 = record["rubrics"][1]
    self.assertEqual((r2["passed"], r2["severity"]), (False, "critical"))
    self.assertEqual(record["rubrics"][0]["passed"], True)

  def test_memory_bomb(self):
    record = self._evaluate("<button id=b>x</button><script>const a = []; "
                            "for (;;) a.push(new Array(1e6).fill(1.5));</script>")
    self.assertIs(record["gates"]["runtime"], False)
    # The tab dies of the heap cap, or (on a very busy machine) the load deadline hits first.
    self.assertRegex(record["issues"][-1]["message"], "crash|did not finish")

  def test_timer_memory_bomb_after_load(self):
    record = self._evaluate('<button id="b">x</button><p id="out"></p><script>'
                            'document.getElementById("b").onclick = () => { const a = []; '
                            'for (;;) a.push("x".repeat(1e6) + Math.random()); };</script>')
    self.assertIs(record["gates"]["runtime"], False)

  def test_network_never_leaves(self):
    url = self.server.url
    before = self.server.hits
    body = (f'<button id="b">x</button><p id="out"></p><img src="{url}/img.png">'
            f'<iframe src="{url}/frame"></iframe><link rel="stylesheet" href="{url}/s.css">'
            f'<script>fetch("{url}/fetch").catch(() => {{}});'
            f'navigator.sendBeacon("{url}/beacon", "x");'
            f'try {{ new WebSocket("{url.replace("http", "ws")}/ws"); }} catch (e) {{}}'
            f'const x = new XMLHttpRequest(); x.open("GET", "{url}/xhr"); x.send();'
            f'document.getElementById("b").onclick = () => {{ location.href = "{url}/nav"; }};'
            f'</script>')
    record = self._evaluate(body)
    time.sleep(0.5)
    self.assertEqual(self.server.hits - before, 0)
    contained = [i for i in record["issues"] if i["severity"] == "minor"]
    self.assertTrue(contained and contained[0]["evidence"]["blocked"], record["issues"])
    self.assertIn(f"{url}/nav", contained[0]["evidence"]["navigations"])

  def test_dialogs_are_answered(self):
    record = self._evaluate('<button id="b">x</button><p id="out"></p><script>'
                            'alert("a"); const ok = confirm("c"); const name = prompt("p");'
                            'document.getElementById("b").onclick = () => {'
                            'document.getElementById("out").textContent = ok ? "hi" : "no"; };'
                            '</script>')
    self.assertEqual(record["reward"], 1.0)
    dialogs = record["issues"][-1]["evidence"]["dialogs"]
    self.assertEqual([d["type"] for d in dialogs[:3]], ["alert", "confirm", "prompt"])

  def test_window_open_is_closed(self):
    record = self._evaluate('<button id="b">x</button><p id="out"></p><script>'
                            'window.open("http://example.com/"); window.open("about:blank");'
                            'document.getElementById("b").onclick = () => {'
                            'document.getElementById("out").textContent = "hi"; };</script>')
    self.assertEqual(record["reward"], 1.0)
    self.assertTrue(record["issues"][-1]["evidence"]["popups"])

  def test_huge_dom(self):
    record = self._evaluate('<button id="b">x</button><p id="out"></p><div id="big"></div>'
                            '<script>let s = ""; for (let i = 0; i < 200000; i++) '
                            's += "<span>" + i + "</span>"; '
                            'document.getElementById("big").innerHTML = s;</script>')
    self.assertIn(record["gates"]["runtime"], (True, False))
    self.assertLen(record["rubrics"], 2)

  def test_throws_on_load(self):
    record = self._evaluate("<button id=b>x</button><script>\nnull.boom();\n</script>")
    self.assertIs(record["gates"]["runtime"], False)
    issue = record["issues"][0]
    self.assertIn("TypeError", issue["message"])
    stack = issue["evidence"]["stack"]
    self.assertIsNotNone(stack[0]["offset"])
    response = app("<button id=b>x</button><script>\nnull.boom();\n</script>")
    s, e = issue["direct"][0]
    self.assertEqual(response[s:e], "null.boom();")

  def test_unhandled_rejection_gates(self):
    record = self._evaluate('<button id="b">x</button><script>'
                            'Promise.reject(new Error("nope"));</script>')
    self.assertIs(record["gates"]["runtime"], False)
    self.assertIn("in promise", record["issues"][0]["message"])

  def test_storage_does_not_leak_between_apps(self):
    writer = ('<button id="b">x</button><p id="out"></p><script>'
              'localStorage.setItem("k", "hi"); sessionStorage.setItem("k", "hi");</script>')
    reader = ('<button id="b">x</button><p id="out"></p><script>'
              'document.getElementById("b").onclick = () => { document.getElementById("out")'
              '.textContent = localStorage.getItem("k") || sessionStorage.getItem("k") || "hi"; };'
              '</script>')
    self.ev.evaluate(TASK, app(writer), 0)
    record = self.ev.evaluate(TASK, app(reader), 0).to_json()
    self.assertEqual(record["reward"], 1.0)


@pytest.mark.browser
@pytest.mark.slow
class HostileRunThroughCliTest(absltest.TestCase):
  """All hostile apps plus malformed lines through the CLI with 2 workers."""

  def test_every_response_gets_a_record_in_bounded_time(self):
    with LoopbackServer() as server, tempfile.TemporaryDirectory() as tmp:
      url = server.url
      bodies = [
          GOOD,
          "<button id=b>x</button><script>while (true) {}</script>",
          '<button id="b" onclick="for (;;) {}">x</button><p id="out"></p>',
          "<button id=b>x</button><script>const a = []; for (;;) a.push(new Array(1e6).fill(1));"
          "</script>",
          f'<button id="b">x</button><img src="{url}/i.png"><script>fetch("{url}/f")'
          f'.catch(() => 0); location.href = "{url}/nav";</script>',
          '<button id="b">x</button><script>alert(1); confirm(2); prompt(3); '
          'window.open("http://example.com");</script>',
          "<button id=b>x</button><script>null.boom();</script>",
          GOOD,
      ]
      tasks_path = os.path.join(tmp, "tasks.jsonl")
      with open(tasks_path, "w") as f:
        f.write(json.dumps(TASK.to_json()) + "\n")
      lines = [json.dumps({"task_id": "hostile", "sample_id": i, "response": app(b)})
               for i, b in enumerate(bodies)]
      lines.insert(3, "{not json")
      lines.insert(5, json.dumps({"task_id": "nope", "sample_id": 0, "response": "x"}))
      responses_path = os.path.join(tmp, "responses.jsonl")
      with open(responses_path, "w") as f:
        f.write("\n".join(lines) + "\n")
      config_path = os.path.join(tmp, "config.json")
      with open(config_path, "w") as f:
        json.dump({"load_timeout": 2.0, "step_timeout": 1.0, "response_deadline": 20.0}, f)
      out = os.path.join(tmp, "out.jsonl")
      start = time.monotonic()
      proc = subprocess.run(
          [sys.executable, "-m", "rcca_jax.evaluate", "--tasks", tasks_path, "--responses",
           responses_path, "--out", out, "--workers", "2", "--no-localize", "--config",
           config_path], capture_output=True, text=True, timeout=300, check=False)
      elapsed = time.monotonic() - start
      self.assertEqual(proc.returncode, 0, proc.stderr)
      records = [json.loads(l) for l in open(out)]
      self.assertLen(records, len(lines))
      self.assertLess(elapsed, 15.0 * len(lines))
      self.assertEqual(server.hits, 0)
      self.assertEqual(records[0]["reward"], 1.0)
      self.assertEqual(records[-1]["reward"], 1.0)
      self.assertIn("error", records[3])
      self.assertIn("unknown task id", records[5]["error"])
      self.assertIn("evaluated 10 responses", proc.stdout)


if __name__ == "__main__":
  absltest.main()
