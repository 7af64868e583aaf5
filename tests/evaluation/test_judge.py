"""Judge backend against a real OpenAI-compatible HTTP server on loopback."""

import asyncio
import collections
import concurrent.futures
import http.server
import json
import threading
import time

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from rcca_jax.evaluation.record import JUDGE_FAILED, UNSCORABLE


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


class ChatClientTest(absltest.TestCase):
  """The one retrying client under both the rubric judge and the benchmark judges."""

  def serve(self, replies):
    server = FakeServer(replies)
    self.addCleanup(server.close)
    return server

  def client(self, server, **kw):
    return judge_lib.ChatClient(server.base + "/v1", "m", timeout=5, **kw)

  def test_retries_then_success_counts_usage(self):
    server = self.serve([500, 503, "fine"])
    client = self.client(server, retries=2, max_backoff=0.01)
    usage = collections.Counter()
    payload = client.payload([{"role": "user", "content": "hi"}], tools=[])
    message = client.complete(payload, usage)
    self.assertEqual(message, {"role": "assistant", "content": "fine"})
    self.assertEqual([body for _, body in server.requests], [payload] * 3)
    self.assertEqual(payload, {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                               "temperature": 0.0, "max_tokens": 2048, "tools": []})
    self.assertEqual(usage, {"requests": 3, "prompt_tokens": 100, "completion_tokens": 10})
    self.assertEqual(client.requests, 3)

  def test_all_tries_fail_with_the_last_error(self):
    server = self.serve([500, 502, 503])
    client = self.client(server, retries=2, max_backoff=0.2)
    start = time.monotonic()
    with self.assertRaisesRegex(judge_lib.JudgeError,
                                r"^judge unavailable after 3 tries: HTTPError: HTTP Error 503"):
      client.complete(client.payload([]))
    self.assertGreaterEqual(time.monotonic() - start, 0.4)  # two back-offs of min(0.5 * 2^k, 0.2)
    self.assertLen(server.requests, 3)

  def test_unreachable_server_is_a_transport_failure(self):
    client = judge_lib.ChatClient("http://127.0.0.1:9", "m", timeout=2, retries=1,
                                  max_backoff=0.01)
    with self.assertRaisesRegex(judge_lib.JudgeError, "after 2 tries: URLError"):
      client.complete(client.payload([]))
    self.assertEqual(client.requests, 2)

  def test_budget_is_checked_before_every_try(self):
    server = self.serve(["a", "b", 500, 500])
    client = self.client(server, retries=2, max_requests=3, max_backoff=0.01)
    usage = collections.Counter()
    self.assertEqual(client.complete(client.payload([]), usage)["content"], "a")
    self.assertEqual(client.complete(client.payload([]), usage)["content"], "b")
    with self.assertRaisesRegex(judge_lib.BudgetSpent, "^judge request budget of 3 spent$"):
      client.complete(client.payload([]), usage)  # one failed try, then the budget is spent
    self.assertLen(server.requests, 3)
    self.assertEqual(usage["requests"], 3)
    with self.assertRaises(judge_lib.BudgetSpent):
      client.complete(client.payload([]))
    self.assertLen(server.requests, 3)

  def test_budget_holds_across_threads(self):
    server = self.serve(lambda body: {"content": "ok"})
    client = self.client(server, retries=0, max_requests=5)

    def one(_):
      try:
        return client.complete(client.payload([]))["content"]
      except judge_lib.BudgetSpent:
        return "spent"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
      results = list(pool.map(one, range(12)))
    self.assertEqual(collections.Counter(results), {"ok": 5, "spent": 7})
    self.assertLen(server.requests, 5)

  def test_unusable_reply_is_asked_again_without_back_off(self):
    server = self.serve(["no", "yes"])
    client = self.client(server, retries=1, max_backoff=5.0)
    start = time.monotonic()
    message = client.complete(client.payload([]), usable=lambda m: m["content"] == "yes")
    self.assertEqual(message["content"], "yes")
    self.assertLess(time.monotonic() - start, 0.5)
    self.assertLen(server.requests, 2)

  def test_last_unusable_reply_is_returned(self):
    server = self.serve(["no", "still no"])
    client = self.client(server, retries=1)
    message = client.complete(client.payload([]), usable=lambda m: False)
    self.assertEqual(message["content"], "still no")
    self.assertLen(server.requests, 2)

  def test_failure_after_an_unusable_reply_names_the_failure(self):
    server = self.serve(["no", 500])
    client = self.client(server, retries=1)
    with self.assertRaisesRegex(judge_lib.JudgeError, "^judge unavailable after 2 tries: "
                                "HTTPError: HTTP Error 500"):
      client.complete(client.payload([]), usable=lambda m: False)

  def test_complete_async(self):
    server = self.serve(["async fine"])
    client = self.client(server)
    usage = collections.Counter()
    message = asyncio.run(client.complete_async(client.payload([]), usage))
    self.assertEqual(message["content"], "async fine")
    self.assertEqual(usage["requests"], 1)


class JudgeRetrySemanticsTest(absltest.TestCase):
  """The rubric judge on the shared client: an unparseable reply is asked again."""

  def grade(self, replies, retries=1):
    server = FakeServer(replies)
    self.addCleanup(server.close)
    verdict = judge_lib.Judge(server.base, "m", timeout=5, retries=retries).grade(
        "r", "t", "<p>")
    return verdict, server.requests

  def test_unparseable_then_parsed(self):
    v, requests = self.grade(["no idea", '{"passed": false, "severity": "minor"}'])
    self.assertEqual((v.passed, v.severity), (False, "minor"))
    self.assertLen(requests, 2)
    self.assertEqual(requests[0][1]["max_tokens"], 512)

  def test_failure_after_an_unparseable_reply_is_ungraded(self):
    v, _ = self.grade(["no idea", 500])
    self.assertIsNone(v.passed)
    self.assertEqual(v.reason, "judge unavailable after 2 tries: HTTPError: HTTP Error 500: "
                     "Internal Server Error")

  def test_reply_without_content_is_retried(self):
    replies = iter([{"role": "assistant"}, {"content": '{"passed": true}'}])
    v, requests = self.grade(lambda body: next(replies))
    self.assertIs(v.passed, True)
    self.assertLen(requests, 2)


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
class EvaluatorWithJudgeTest(parameterized.TestCase):

  @parameterized.parameters("unscorable", "drop")
  def test_rubrics_without_check_go_to_the_judge(self, partial_judge):
    server = FakeServer(['{"passed": false, "severity": "major", "evidence": ["<h1>Hi</h1>"],'
                         ' "reason": "plain"}', "unparseable", "unparseable", "unparseable"])
    ev = Evaluator(EvalConfig(judge_url=server.base, judge_model="m", judge_retries=1,
                              judge_timeout=5, partial_judge=partial_judge))
    try:
      record = ev.evaluate(TASK, RESPONSE, 0).to_json()
    finally:
      ev.close()
      server.close()
    r1, r2, r3 = record["rubrics"]
    self.assertIs(r1["passed"], True)
    self.assertEqual((r2["passed"], r2["severity"]), (False, "major"))
    self.assertIsNone(r3["passed"])
    self.assertTrue(r3["detail"].startswith(JUDGE_FAILED + "unparseable"), r3["detail"])
    if partial_judge == "unscorable":  # r3 got no verdict: neither does the response
      self.assertIsNone(record["reward"])
      self.assertIn("1 of 3 rubrics ungraded by the judge: unparseable", record[UNSCORABLE])
    else:  # scored on r1 and r2 alone
      self.assertAlmostEqual(record["reward"], 1 - 0.15)
      self.assertNotIn(UNSCORABLE, record)
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
