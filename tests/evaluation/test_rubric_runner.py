"""Rubric DSL execution in real Chromium: every verb, every expectation, every severity."""

import asyncio
import dataclasses

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.evaluation import compare
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.base.dsl import parse_check
from rcca_jax.evaluation.page_session import PageSession
from rcca_jax.evaluation.rubric_runner import RubricRunner, is_readonly

APP = """<!DOCTYPE html><html><head><style>
#count { color: red; font-size: 20px; }
.ghost { visibility: hidden; }
#cover { position: fixed; left: 0; top: 0; width: 100%; height: 100%; }
</style></head><body>
<h1 id="title">Hello  World</h1>
<div id="count">0</div><p id="total">Total: 1,234.5 items</p>
<button id="inc">+</button><button id="off" disabled>off</button>
<button id="hidden-btn" class="ghost">ghost</button>
<button id="dbl">dbl</button><div id="hov">hover me</div>
<input id="name"><input id="when" type="date"><textarea id="notes">old</textarea>
<select id="size"><option value="s">Small</option><option value="l">Large</option></select>
<label><input type="checkbox" id="cb"> agree</label>
<a id="link" href="#x" data-kind="nav">link</a>
<ul><li>a</li><li>b</li><li>c</li></ul>
<p id="log"></p>
<script>
let n = 0;
const log = (s) => { document.getElementById('log').textContent += s; };
document.getElementById('inc').addEventListener('click', (e) => {
  n++; document.getElementById('count').textContent = n; log(e.isTrusted ? 'T' : 'F');
});
document.getElementById('dbl').addEventListener('dblclick', () => log('D'));
document.getElementById('hov').addEventListener('mouseenter', () => log('H'));
document.getElementById('name').addEventListener('input', (e) => log('I:' + e.target.value));
document.getElementById('name').addEventListener('keydown', (e) => log('K:' + e.key));
document.getElementById('size').addEventListener('change', (e) => log('S:' + e.target.value));
document.getElementById('cb').addEventListener('change', (e) => log('C:' + e.target.checked));
window.boom = () => { throw new Error('kaboom'); };
document.getElementById('count').addEventListener('click', () => window.boom());
window.later = () => setTimeout(() => { document.getElementById('count').textContent = 'late'; }, 60);
</script></body></html>"""

COVERED = APP.replace("<p id=\"log\"></p>", "<p id=\"log\"></p><div id=\"cover\"></div>")

# Handlers whose effects come a frame or a timer turn after the click.
DEFERRED = """<!DOCTYPE html><html><body>
<button id="boom">boom</button><button id="spin">spin</button><button id="ok">ok</button>
<input id="name"><p id="out">0</p><script>
document.getElementById('boom').onclick = () => setTimeout(() => { throw new Error('later'); }, 0);
document.getElementById('spin').onclick = () => setTimeout(() => { for (;;) {} }, 0);
document.getElementById('ok').onclick = () => requestAnimationFrame(() => {
  document.getElementById('out').textContent = '1'; });
</script></body></html>"""


class CompareTest(parameterized.TestCase):

  @parameterized.parameters(
      ("==", "Hello World", "Hello World", None),
      ("==", "  Hello \n World ", "Hello World", None),
      ("==", "hello world", "Hello World", "minor"),
      ("==", "HelloWorld", "Hello World", "minor"),
      ("==", "Hello", "World", "major"),
      ("==", "3.333", "3.33", "minor"),
      ("==", "3.5", "3.33", "major"),
      ("!=", "a", "a", "major"),
      ("!=", "a", "b", None),
      ("contains", "Total: 5", "Total", None),
      ("contains", "TOTAL: 5", "total", "minor"),
      ("contains", "x", "y", "major"),
      ("matches", "abc123", r"\d+", None),
      ("matches", "ABC", "abc", "minor"),
      ("matches", "xyz", "abc", "major"),
  )
  def test_compare_text(self, op, observed, expected, severity):
    self.assertEqual(compare.compare_text(op, observed, expected), severity)

  def test_compare_text_alternatives(self):
    self.assertIsNone(compare.compare_text("==", "rgb(255, 0, 0)", "red",
                                           alternatives=("rgb(255, 0, 0)",)))

  @parameterized.parameters(
      ("==", 100.0, 100.0, None), ("==", 100.5, 100.0, "minor"), ("==", 102.0, 100.0, "major"),
      ("<", 5.0, 3.0, "major"), ("<=", 3.02, 3.0, "minor"), ("!=", 3.0, 3.0, "major"),
      (">", 4.0, 3.0, None), ("==", 0.001, 0.0, "major"))
  def test_compare_number(self, op, observed, expected, severity):
    self.assertEqual(compare.compare_number(op, observed, expected), severity)

  def test_first_number(self):
    self.assertEqual(compare.first_number("Total: 1,234.5 items"), 1234.5)
    self.assertEqual(compare.first_number("t = -3"), -3.0)
    self.assertIsNone(compare.first_number("none"))

  def test_is_readonly(self):
    self.assertTrue(is_readonly(parse_check('expect text "#a" == "x"; expect count "li" == 3')))
    self.assertFalse(is_readonly(parse_check('click "#a"; expect exists "#b"')))
    self.assertFalse(is_readonly(parse_check('expect js "1"')))
    self.assertFalse(is_readonly(parse_check('wait 10; expect exists "#b"')))


@pytest.mark.browser
class RunnerTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.loop = asyncio.new_event_loop()
    cls.session = PageSession(EvalConfig(step_timeout=1.0, expect_retry_ms=50))
    cls.loop.run_until_complete(cls.session.start())
    cls.runner = RubricRunner(cls.session)

  @classmethod
  def tearDownClass(cls):
    cls.loop.run_until_complete(cls.session.close())
    cls.loop.close()
    super().tearDownClass()

  def run_check(self, check, level="core", app=APP):
    async def go():
      load = await self.session.load(app)
      self.assertTrue(load.ok, load.reason)
      return await self.runner.run(parse_check(check), level)
    return self.loop.run_until_complete(go())

  def log(self):
    return self.loop.run_until_complete(
        self.session.js("() => document.getElementById('log').textContent"))

  @parameterized.named_parameters(
      ("text", 'expect text "#title" == "Hello World"'),
      ("exists", 'expect exists "#count"'),
      ("visible", 'expect visible "#count"'),
      ("hidden_absent", 'expect hidden "#nothing"'),
      ("hidden_invisible", 'expect hidden "#hidden-btn"'),
      ("count", 'expect count "li" == 3; expect count "li" >= 2; expect count "table" == 0'),
      ("value", 'expect value "#notes" == "old"; expect value "#size" == "s"'),
      ("attr", 'expect attr "#link" data-kind == "nav"; expect attr "#link" href contains "#x"'),
      ("style_normalised", 'expect style "#count" color == "red"'),
      ("style_raw", 'expect style "#count" font-size == "20px"'),
      ("style_read_ahead_normalised", 'expect exists "#count"; expect style "#count" color == "red"'),
      ("style_read_ahead_not_equal", 'expect exists "#count"; expect style "#count" color != "blue"'),
      ("number", 'expect number "#total" == 1234.5; expect number "#count" < 1'),
      ("js", 'expect js "document.querySelectorAll(\'li\').length === 3"'),
      ("matches", 'expect text "#total" matches "^Total: [0-9,.]+ items$"'),
      ("no_errors", "expect no_errors"),
      ("click_then_text", 'click "#inc"; click "#inc"; expect text "#count" == "2"'),
      ("fill", 'fill "#name" "Bob"; expect value "#name" == "Bob"'),
      ("fill_replaces", 'fill "#notes" "new"; expect value "#notes" == "new"'),
      ("fill_empty", 'fill "#notes" ""; expect value "#notes" == ""'),
      ("fill_date", 'fill "#when" "2024-05-01"; expect value "#when" == "2024-05-01"'),
      ("select_value", 'select "#size" "l"; expect value "#size" == "l"'),
      ("select_label", 'select "#size" "Large"; expect value "#size" == "l"'),
      ("fill_after_an_action", 'click "#inc"; fill "#name" "Bob"; expect value "#name" == "Bob"'),
      ("fill_date_after_an_action",
       'click "#inc"; fill "#when" "2024-05-01"; expect value "#when" == "2024-05-01"'),
      ("select_after_an_action", 'click "#inc"; select "#size" "l"; expect value "#size" == "l"'),
      ("check_uncheck", 'check "#cb"; expect js "document.getElementById(\'cb\').checked"; '
       'uncheck "#cb"; expect js "!document.getElementById(\'cb\').checked"'),
      ("wait_for_timer", 'expect js "window.later() || true"; wait 150; '
       'expect text "#count" == "late"'),
  )
  def test_passes(self, check):
    run = self.run_check(check)
    self.assertTrue(run.passed, run.detail)
    self.assertIsNone(run.severity)

  def test_events_are_real(self):
    run = self.run_check('click "#inc"; dblclick "#dbl"; hover "#hov"; fill "#name" "ab"; '
                         'press "#name" "Enter"; select "#size" "l"; check "#cb"')
    self.assertTrue(run.passed, run.detail)
    self.assertEqual(self.log(), "TDHI:abK:EnterS:lC:true")

  def test_press_without_selector_goes_to_focused_element(self):
    run = self.run_check('fill "#name" "x"; press "Tab"')
    self.assertTrue(run.passed, run.detail)
    self.assertIn("K:Tab", self.log())

  @parameterized.named_parameters(
      ("click_missing", 'click "#nope"', "critical"),
      ("fill_missing", 'fill "#nope" "x"', "critical"),
      ("text_missing", 'expect text "#nope" == "x"', "critical"),
      ("exists_missing", 'expect exists "#nope"', "critical"),
      ("click_disabled", 'click "#off"', "critical"),
      ("click_invisible", 'click "#hidden-btn"', "critical"),
      ("fill_not_editable", 'fill "#count" "x"', "critical"),
      ("select_not_select", 'select "#name" "x"', "critical"),
      ("select_no_option", 'select "#size" "xl"', "critical"),
      ("check_not_checkbox", 'check "#name"', "critical"),
      ("exception_in_handler", 'click "#count"', "critical"),
      ("no_errors_after_exception", 'expect js "setTimeout(window.boom, 0) && true"; wait 30; '
       "expect no_errors", "critical"),
      ("text_wrong", 'expect text "#count" == "5"', "major"),
      ("visible_wrong", 'expect visible "#hidden-btn"', "major"),
      ("hidden_wrong", 'expect hidden "#count"', "major"),
      ("count_wrong", 'expect count "li" == 4', "major"),
      ("count_zero", 'expect count ".item" >= 1', "major"),
      ("count_zero_exact", 'expect count "table li" == 1', "major"),
      ("attr_missing", 'expect attr "#count" title == "x"', "major"),
      ("number_wrong", 'expect number "#total" == 1300', "major"),
      ("js_false", 'expect js "1 === 2"', "major"),
      ("js_throws", 'expect js "undefinedThing.x"', "major"),
      ("style_wrong_core", 'expect style "#count" color == "blue"', "major"),
      ("style_read_ahead_not_equal_normalised",
       'expect exists "#count"; expect style "#count" color != "red"', "major"),
      ("text_case", 'expect text "#title" == "hello world"', "minor"),
      ("number_close", 'expect number "#total" == 1240', "minor"),
  )
  def test_failures(self, check, severity):
    run = self.run_check(check)
    self.assertIs(run.passed, False)
    self.assertEqual(run.severity, severity, run.detail)
    self.assertEqual(run.failure.severity, severity)
    self.assertEqual(run.path[-1], str(parse_check(check)[run.failure.step_index]))

  def test_style_failure_of_rendering_rubric_is_minor(self):
    run = self.run_check('expect style "#count" color == "blue"', level="rendering")
    self.assertEqual(run.severity, "minor")
    rule = run.failure.css_rules[0]
    self.assertEqual(rule["selector"], "#count")
    self.assertEqual(rule["property"], "color")

  def test_covered_target_cannot_be_clicked(self):
    run = self.run_check('click "#inc"', app=COVERED)
    self.assertEqual(run.severity, "critical")
    self.assertIn("covered", run.detail)

  def test_exception_evidence_and_listeners(self):
    run = self.run_check('click "#count"')
    self.assertEqual(run.failure.exception.message, "Error: kaboom")
    self.assertEqual(run.failure.exception.frames[0]["function"], "window.boom")
    listener = run.failure.listeners[0]
    self.assertEqual((listener["type"], listener["node"]), ("click", "target"))
    line = APP.split("\n")[listener["line"]]
    self.assertIn("window.boom()", line[listener["column"]:])

  def test_failed_count_reports_first_matching_element(self):
    run = self.run_check('expect count "li" == 4')
    self.assertIs(run.failure.element["exists"], True)
    self.assertEqual(run.failure.element["tag"], "li")
    run = self.run_check('expect count ".item" >= 1')
    self.assertIs(run.failure.element["exists"], False)

  def test_failed_expectation_reports_element(self):
    run = self.run_check('click "#inc"; expect text "#count" == "5"')
    self.assertEqual(run.failure.element["id"], "count")
    self.assertEqual(run.failure.observed, "1")
    self.assertEqual(run.failure.listeners[0]["selector"], "button#inc")

  def test_hang_in_handler_is_critical_and_page_recovers(self):
    app = APP.replace("<p id=\"log\"></p>", '<p id="log"></p><button id="spin" '
                      'onclick="while (true) {}">spin</button>')
    run = self.run_check('click "#spin"; expect text "#count" == "0"', app=app)
    self.assertEqual(run.severity, "critical")
    self.assertIsNotNone(run.hang)
    self.assertTrue(self.run_check('click "#inc"; expect text "#count" == "1"').passed)

  @parameterized.parameters("", '; expect text "#out" == "0"', '; click "#ok"', "; wait 10",
                            '; expect js "true"', "; expect no_errors", '; press "Tab"',
                            '; fill "#name" "x"', '; press "#name" "Enter"')
  def test_exception_in_a_timer_after_a_click_is_the_clicks(self, rest):
    check = 'click "#boom"' + rest
    run = self.run_check(check, app=DEFERRED)
    self.assertEqual(run.severity, "critical", run.detail)
    self.assertEqual(run.failure.step_index, 0)
    self.assertEqual(run.path, ['click "#boom"'])
    self.assertEqual(run.path[-1], str(parse_check(check)[run.failure.step_index]))
    self.assertEqual(run.failure.exception.message, "Error: later")
    self.assertEqual([e.message for e in run.exceptions], ["Error: later"])

  @parameterized.parameters("", '; expect text "#out" == "0"', '; click "#ok"')
  def test_hang_in_a_timer_after_a_click_is_the_clicks(self, rest):
    run = self.run_check('click "#spin"' + rest, app=DEFERRED)
    self.assertEqual(run.severity, "critical", run.detail)
    self.assertEqual(run.failure.step_index, 0)
    self.assertEqual(run.path, ['click "#spin"'])
    self.assertIn("did not finish", run.hang)
    self.assertTrue(self.run_check('click "#inc"; expect text "#count" == "1"').passed)

  def test_next_read_sees_the_frame_after_an_action(self):
    run = self.run_check('click "#ok"; expect text "#out" == "1"', app=DEFERRED)
    self.assertTrue(run.passed, run.detail)
    run = self.run_check('click "#ok"; click "#ok"; expect text "#out" == "1"', app=DEFERRED)
    self.assertTrue(run.passed, run.detail)

  def count_reads(self, go):
    """Runs the coroutine `go()`; returns its value and the scripts it ran in the page."""
    calls = []
    send = self.session.cdp.send

    def counting(method, params=None):
      if method == "Runtime.evaluate":
        calls.append(params["expression"][:40])
      return send(method, params)
    self.session.cdp.send = counting
    try:
      return self.loop.run_until_complete(go()), calls
    finally:
      del self.session.cdp.send

  def test_consecutive_reads_are_one_call(self):
    async def go():
      await self.session.load(APP)
      return await self.runner.run(parse_check(
          'expect exists "#count"; expect count "li" == 3; expect text "#title" == "Hello World"'
          '; expect style "#count" color == "red"; expect value "#notes" == "old"'), "core")
    run, calls = self.count_reads(go)
    self.assertTrue(run.passed, run.detail)
    # All five; the computed "rgb(255, 0, 0)" does not decide == "red", so the style step
    # reads again with the probe, which adds an element; so the last read is taken again.
    self.assertLen(calls, 3, calls)

  def test_a_style_read_ahead_that_decides_needs_no_probe(self):
    async def go():
      await self.session.load(APP)
      return await self.runner.run(parse_check(
          'expect exists "#count"; expect style "#count" color == "rgb(255, 0, 0)"'
          '; expect style "#count" font-size contains "20"; expect value "#notes" == "old"'),
          "core")
    run, calls = self.count_reads(go)
    self.assertTrue(run.passed, run.detail)
    self.assertLen(calls, 1, calls)

  @parameterized.named_parameters(
      ("fill", 'fill "#name" "Bob"; expect value "#name" == "Bob"'),
      ("fill_date", 'fill "#when" "2024-05-01"; expect value "#when" == "2024-05-01"'),
      ("select", 'select "#size" "l"; expect value "#size" == "l"'),
      ("press", 'press "#name" "Enter"; expect text "#log" == "K:Enter"'))
  def test_an_action_with_a_dom_part_is_one_call_with_its_locate(self, check):
    async def go():
      await self.session.load(APP)
      return await self.runner.run(parse_check(check), "core")
    run, calls = self.count_reads(go)
    self.assertTrue(run.passed, run.detail)
    self.assertLen(calls, 2, calls)  # locate and prepare; the settle and the read

  @parameterized.named_parameters(
      ("fill_covered", COVERED, 'fill "#name" "x"', "is covered"),
      ("fill_checkbox", APP, 'fill "#cb" "x"', "is not editable"),
      ("select_covered", COVERED, 'select "#size" "l"', "is covered"),
      ("select_not_select", APP, 'select "#name" "l"', "is not a <select>"),
      ("press_covered", COVERED, 'press "#name" "Enter"', "is covered"))
  def test_a_target_it_refuses_is_left_as_it_was(self, app, check, why):
    run = self.run_check(check, app=app)
    self.assertEqual(run.severity, "critical", run.detail)
    self.assertIn(why, run.detail)
    left = self.loop.run_until_complete(self.session.js(
        "() => [document.activeElement.tagName, document.getElementById('size').value,"
        " document.getElementById('log').textContent]"))
    self.assertEqual(left, ["BODY", "s", ""])

  @parameterized.named_parameters(
      ("first", 'fill "#t" "x"', 0, "fill #t"),
      ("after_a_click", 'click "#b"; fill "#t" "x"', 1, "focus #t"))
  def test_a_hang_in_the_dom_part_of_an_action_is_its_own(self, check, index, what):
    app = ('<button id="b">b</button><input id="t"><script>'
           'document.getElementById("t").onfocus = () => { for (;;) {} };</script>')
    run = self.run_check(check, app=app)
    self.assertEqual(run.severity, "critical", run.detail)
    self.assertEqual(run.failure.step_index, index)
    self.assertTrue(run.hang.startswith(what), run.hang)
    self.assertTrue(self.run_check('click "#inc"; expect text "#count" == "1"').passed)

  def run_sharing(self, first: str, second: str):
    """Runs two read-only checks on one load, the second's reads offered to the first;
    returns whether both passed and the scripts run in the page."""
    first, second = parse_check(first), parse_check(second)

    async def go():
      await self.session.load(APP)
      return [await self.runner.run(first, "core", read_with=second),
              await self.runner.run(second, "core")]
    runs, calls = self.count_reads(go)
    return all(r.passed for r in runs), calls

  def test_reads_of_the_rubrics_sharing_a_load_are_one_call(self):
    passed, calls = self.run_sharing(
        'expect exists "#count"', 'expect text "#title" == "Hello World"; expect count "li" == 3')
    self.assertTrue(passed)
    self.assertLen(calls, 1, calls)

  def test_after_a_style_probe_the_next_rubrics_are_read_with_the_last_reads(self):
    passed, calls = self.run_sharing(
        'expect exists "#count"; expect style "#count" color == "red"; expect count "li" == 3',
        'expect text "#title" == "Hello World"')
    self.assertTrue(passed)
    self.assertLen(calls, 3, calls)   # all four; the style probe; count with the title

  def test_a_retried_read_makes_the_reads_after_it_fresh(self):
    # 150 ms after the click #out turns 1 and #two turns 0. The first read (in the click's
    # settle) finds #out still 0 and is retried 300 ms on; #two, read with it while still
    # 1, must be read again then, and fails.
    app = DEFERRED.replace("<p id=\"out\">0</p>", "<p id=\"out\">0</p><p id=\"two\">1</p>"
                           "<button id=\"slow\">slow</button>").replace("</script>", """
document.getElementById('slow').onclick = () => setTimeout(() => {
  document.getElementById('out').textContent = '1';
  document.getElementById('two').textContent = '0'; }, 150);</script>""")
    config = self.session.config

    async def go():
      await self.session.load(app)
      return await self.runner.run(parse_check(
          'click "#slow"; expect text "#out" == "1"; expect text "#two" == "1"'), "core")
    self.session.config = self.runner.config = dataclasses.replace(config, expect_retry_ms=300)
    try:
      run = self.loop.run_until_complete(go())
    finally:
      self.session.config = self.runner.config = config
    self.assertFalse(run.passed)
    self.assertEqual((run.failure.step_index, run.failure.observed), (2, "0"))

  def test_reads_ahead_are_not_used_on_the_next_load(self):
    async def go():
      await self.session.load(APP)
      await self.runner.run(parse_check('expect exists "#count"'), "core",
                            read_with=parse_check('expect text "#title" == "Hello World"'))
      await self.session.load(APP.replace("Hello  World", "Other"))
      return await self.runner.run(parse_check('expect text "#title" == "Hello World"'), "core")
    run = self.loop.run_until_complete(go())
    self.assertFalse(run.passed)

  @parameterized.parameters('click "##bad"', 'expect text "#title" matches "("',
                            'press "NoSuchKey"')
  def test_broken_check_is_ungraded(self, check):
    run = self.run_check(check)
    self.assertIsNone(run.passed)
    self.assertIn("check error", run.detail)


if __name__ == "__main__":
  absltest.main()
