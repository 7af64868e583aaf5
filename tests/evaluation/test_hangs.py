"""Hangs are blamed on the statement that loops (at load and in handlers)."""

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.credit.localize import localize_record
from rcca_jax.data.tasks import parse_task
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from rcca_jax.evaluation.extract import extract_app

_APP = """<!DOCTYPE html><html><body><span id="count">0</span><button id="inc">+</button>
<script>
let n = 0;
function spin(k) {
  let i = 0;
  while (i < k) {
    n += 0;
  }
}
function settle() {
  do { n = n + 0; } while (n >= 0);
}
document.getElementById('inc').addEventListener('click', () => { spin(3); });
%s
</script></body></html>"""
TASK = parse_task({"id": "hung", "request": "counter", "rubrics": [
    {"id": "r1", "kind": "dynamic", "level": "core", "text": "+ adds one",
     "check": 'click "#inc"; expect text "#count" == "1"'}]})


def _response(extra=""):
  return "```html\n" + _APP % extra + "\n```"


def _hang_issue(response, pos, stage="runtime"):
  ext = extract_app(response)
  record = {"html_span": list(ext.html_span), "issues": [{
      "stage": stage, "message": "hung", "direct": [], "context": [],
      "evidence": {"hang": "click #inc did not finish within 1s",
                   "stack": [{"function": "f", "offset": pos, "line": 0, "column": 0,
                              "url": "u"}]}}]}
  (issue,) = localize_record(record, response)["issues"]
  return [response[s:e] for s, e in issue["direct"]], [response[s:e] for s, e in issue["context"]]


class LoopFromEvidenceTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("in_the_body", "n += 0;", "while (i < k)", "n += 0;"),
      ("at_the_header", "while (i < k)", "while (i < k)", "n += 0;"),
      ("line_start_of_the_body", "\n    n += 0;", "while (i < k)", "n += 0;"),  # profiler
      ("do_while", "n = n + 0;", "while (n >= 0);", "n = n + 0;"),
  )
  def test_direct_is_the_loop_header(self, at, want, body):
    response = _response()
    direct, ctx = _hang_issue(response, response.index(at))
    self.assertIn(want, direct)
    self.assertLessEqual(len(direct), 2)
    self.assertTrue(any(body in c for c in ctx + direct), ctx)   # the rest of the loop

  def test_without_a_loop_the_statement(self):
    response = _response()
    direct, _ = _hang_issue(response, response.index("let i = 0;"))
    self.assertEqual(direct, ["let i = 0;"])


@pytest.mark.browser
class HangInBrowserTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.ev = Evaluator(EvalConfig(load_timeout=2.0, step_timeout=1.0))

  @classmethod
  def tearDownClass(cls):
    cls.ev.close()
    super().tearDownClass()

  @parameterized.named_parameters(
      ("in_a_handler", "", "while (i < k)"),
      ("at_load", "for (let j = 0; j < 5; j--) { n = j; }", "for (let j = 0; j < 5; j--)"),
  )
  def test_hang_points_at_the_loop(self, extra, loop):
    response = _response(extra)
    record = self.ev.evaluate(TASK, response, 0).to_json()
    self.assertIs(record["gates"]["runtime"], False)
    runtime = [i for i in localize_record(record, response)["issues"]
               if i["stage"] == "runtime"]
    self.assertTrue(runtime)
    for issue in runtime:
      self.assertTrue(issue["evidence"]["stack"])
      self.assertEqual([response[s:e] for s, e in issue["direct"]], [loop])

  @parameterized.product(locator=("debugger", "profiler"), where=("handler", "load"))
  @pytest.mark.slow  # below the parameterization, so that every generated test keeps it
  def test_other_locators(self, locator, where):
    extra, loop = {"handler": ("", "while (i < k)"), "load": (
        "for (let j = 0; j < 5; j--) { n = j; }", "for (let j = 0; j < 5; j--)")}[where]
    ev = Evaluator(EvalConfig(load_timeout=2.0, step_timeout=1.0, hang_locator=locator))
    try:
      response = _response(extra)
      record = ev.evaluate(TASK, response, 0).to_json()
    finally:
      ev.close()
    runtime = [i for i in localize_record(record, response)["issues"] if i["stage"] == "runtime"]
    self.assertTrue(runtime)
    for issue in runtime:
      self.assertIn(loop, [response[s:e] for s, e in issue["direct"]])

  def test_apps_that_do_not_hang_never_turn_the_debugger_on(self):
    response = ("```html\n<span id=\"count\">0</span><button id=\"inc\">+</button><script>\n"
                "let n = 0;\ndocument.getElementById('inc').onclick = () => "
                "{ n++; document.getElementById('count').textContent = n; };\n</script>\n```")
    record = self.ev.evaluate(TASK, response, 2).to_json()
    self.assertEqual(record["reward"], 1.0)
    self.assertEqual(self.ev._session.hangs.debugger.script_urls, {})  # no script seen

  def test_debugger_statements_do_not_pause_the_app(self):
    response = ("```html\n<span id=\"count\">0</span><button id=\"inc\">+</button><script>\n"
                "debugger;\nlet n = 0;\ndocument.getElementById('inc').onclick = () => "
                "{ debugger; n++; document.getElementById('count').textContent = n; };\n"
                "</script>\n```")
    ev = Evaluator(EvalConfig(load_timeout=2.0, step_timeout=1.0, hang_locator="debugger"))
    try:
      record = ev.evaluate(TASK, response, 1).to_json()
    finally:
      ev.close()
    self.assertEqual(record["reward"], 1.0)


class ConfigTest(absltest.TestCase):

  def test_unknown_locator_is_rejected(self):
    with self.assertRaisesRegex(ValueError, "hang_locator must be one of"):
      EvalConfig.from_dict({"hang_locator": "sampler"})


if __name__ == "__main__":
  absltest.main()
