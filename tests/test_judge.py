"""Judge backend against a real OpenAI-compatible HTTP server on loopback."""

import http.server
import json
import threading

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator


class FakeServer:
  """Answers POST /v1/chat/completions with scripted replies (str, or int = HTTP status),
  or with `respond(body)` -> the reply message (an AssertionError in it is answered with
  HTTP 500 and kept in `failures`)."""

  def __init__(self, replies):
    self.respond = replies if callable(replies) else None
    self.replies = [] if callable(replies) else list(replies)
    self.requests = []
    self.failures = []
    outer = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        outer.requests.append((self.path, body))
        reply = outer.reply(body)
        if isinstance(reply, int):
          self.send_response(reply)
          self.end_headers()
          return
        data = json.dumps({"choices": [{"message": {"role": "assistant", **reply}}],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data.encode())

      def log_message(self, *args):
        pass

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def reply(self, body):
    if self.respond is not None:
      try:
        return self.respond(body)
      except AssertionError as e:
        self.failures.append(str(e))
        return 500
    reply = self.replies.pop(0) if self.replies else "{}"
    return reply if isinstance(reply, int) else {"content": reply}

  def close(self):
    self.server.shutdown()
    self.server.server_close()


class ParseVerdictTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("bare", '{"passed": true, "severity": null, "evidence": [], "reason": "ok"}', True, None),
      ("fenced", 'Sure.\n```json\n{"passed": false, "severity": "Critical", "evidence": '
       '["x()"], "reason": "missing"}\n```', False, "critical"),
      ("in_prose", 'Verdict: {"passed": false, "severity": "minor", "evidence": "a {b}"} done',
       False, "minor"),
      ("bad_severity", '{"passed": false, "severity": "awful"}', False, "major"),
      ("no_json", "I think it passes.", None, None),
      ("no_passed", '{"verdict": "yes"}', None, None),
  )
  def test_parse(self, text, passed, severity):
    v = judge_lib.parse_verdict(text)
    self.assertEqual((v.passed, v.severity), (passed, severity))

  def test_quotes_are_kept(self):
    v = judge_lib.parse_verdict('{"passed": false, "severity": "major", '
                                '"evidence": ["let x = 1;", ""], "reason": "r"}')
    self.assertEqual(v.quotes, ["let x = 1;"])

  @parameterized.parameters(("http://h:1", "http://h:1/v1/chat/completions"),
                            ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
                            ("http://h:1/v1/chat/completions", "http://h:1/v1/chat/completions"))
  def test_chat_url(self, base, url):
    self.assertEqual(judge_lib.chat_url(base), url)


class JudgeHttpTest(absltest.TestCase):

  def test_request_shape_and_verdict(self):
    server = FakeServer(['```json\n{"passed": false, "severity": "major", "evidence": '
                         '["<h1>Hi</h1>"], "reason": "wrong heading"}\n```'])
    try:
      j = judge_lib.Judge(server.base + "/v1", "m-1", timeout=5, retries=0)
      v = j.grade("make a page", "The heading says Hello", "<h1>Hi</h1>")
    finally:
      server.close()
    self.assertEqual((v.passed, v.severity, v.quotes), (False, "major", ["<h1>Hi</h1>"]))
    path, body = server.requests[0]
    self.assertEqual(path, "/v1/chat/completions")
    self.assertEqual(body["model"], "m-1")
    self.assertIn("The heading says Hello", body["messages"][-1]["content"])
    self.assertIn("<h1>Hi</h1>", body["messages"][-1]["content"])

  def test_retries_server_errors_then_succeeds(self):
    server = FakeServer([500, 503, '{"passed": true}'])
    try:
      v = judge_lib.Judge(server.base, "m", timeout=5, retries=2).grade("r", "t", "<p>")
    finally:
      server.close()
    self.assertIs(v.passed, True)
    self.assertLen(server.requests, 3)

  def test_gives_up_after_bounded_retries(self):
    server = FakeServer([500, 500, 500, 500])
    try:
      v = judge_lib.Judge(server.base, "m", timeout=5, retries=1).grade("r", "t", "<p>")
    finally:
      server.close()
    self.assertIsNone(v.passed)
    self.assertIn("2 tries", v.reason)
    self.assertLen(server.requests, 2)

  def test_unreachable_server_is_ungraded(self):
    v = judge_lib.Judge("http://127.0.0.1:9", "m", timeout=2, retries=0).grade("r", "t", "<p>")
    self.assertIsNone(v.passed)

  def test_unparseable_reply_is_ungraded_with_reason(self):
    server = FakeServer(["no idea", "still no idea"])
    try:
      v = judge_lib.Judge(server.base, "m", timeout=5, retries=1).grade("r", "t", "<p>")
    finally:
      server.close()
    self.assertIsNone(v.passed)
    self.assertIn("unparseable", v.reason)


TASK = tasks_lib.parse_task({
    "id": "j", "request": "A greeting page",
    "rubrics": [
        {"id": "r1", "kind": "initial", "level": "core", "text": "Shows Hi",
         "check": 'expect text "h1" == "Hi"'},
        {"id": "r2", "kind": "initial", "level": "behavior", "text": "Looks friendly"},
        {"id": "r3", "kind": "initial", "level": "rendering", "text": "Nicely laid out"},
    ]})
RESPONSE = "```html\n<!DOCTYPE html><html><body><h1>Hi</h1></body></html>\n```"


@pytest.mark.browser
class EvaluatorWithJudgeTest(absltest.TestCase):

  def test_rubrics_without_check_go_to_the_judge(self):
    server = FakeServer(['{"passed": false, "severity": "major", "evidence": ["<h1>Hi</h1>"],'
                         ' "reason": "plain"}', "unparseable", "unparseable", "unparseable"])
    ev = Evaluator(EvalConfig(judge_url=server.base, judge_model="m", judge_retries=1,
                              judge_timeout=5))
    try:
      record = ev.evaluate(TASK, RESPONSE, 0).to_json()
    finally:
      ev.close()
      server.close()
    r1, r2, r3 = record["rubrics"]
    self.assertIs(r1["passed"], True)
    self.assertEqual((r2["passed"], r2["severity"]), (False, "major"))
    self.assertIsNone(r3["passed"])
    self.assertIn("unparseable", r3["detail"])
    self.assertAlmostEqual(record["reward"], 1 - 0.15)
    issue = [i for i in record["issues"] if i["rubric_id"] == "r2"][0]
    self.assertEqual(issue["evidence"]["quotes"], ["<h1>Hi</h1>"])

  def test_without_judge_they_are_ungraded_and_excluded(self):
    ev = Evaluator(EvalConfig())
    try:
      record = ev.evaluate(TASK, RESPONSE, 0).to_json()
    finally:
      ev.close()
    self.assertEqual(record["reward"], 1.0)
    self.assertEqual([r["passed"] for r in record["rubrics"]], [True, None, None])
    self.assertIn("ungraded", record["rubrics"][1]["detail"])


if __name__ == "__main__":
  absltest.main()
