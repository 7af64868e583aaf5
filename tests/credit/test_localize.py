"""Tests for rcca_jax.credit.localize: evidence -> direct/context response spans.

Records are written by hand following the evidence schema
(docs/contracts.md#issue-evidence); the
browser tests at the end run the real evaluator on small apps.
"""

import copy
import pickle

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.credit.localize import localize_record, match_quote
from rcca_jax.evaluation.extract import extract_app
from rcca_jax.evaluation.pool import check_post_process

_APP = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>
#count { color: red; font-size: 20px; }
.big { border: 1px solid blue; }
</style></head>
<body>
<h1>计数器 🙂</h1>
<span id="count" class="big">0</span>
<button id="inc">+</button>
<button id="dec" onclick="dec()">-</button>
<ul id="list"></ul>
<script>
let count = 0;
const countEl = document.getElementById('count');
function render() {
  countEl.textContent = format(count);
}
function format(n) {
  return String(n);
}
function dec() {
  count -= 1;
  render();
}
document.getElementById('inc').addEventListener('click', () => {
  count += 1;
  render();
});
document.getElementById('list').addEventListener('click', (e) => {
  e.target.remove();
});
function addRow() {
  const li = document.createElement('li');
  li.id = 'row';
  document.getElementById('list').appendChild(li);
}
</script>
</body></html>"""
RESPONSE = "Sure — here is the app 🙂:\n\n```html\n" + _APP + "\n```\nEnjoy!"


def _at(needle, nth=0):
  start = -1
  for _ in range(nth + 1):
    start = RESPONSE.index(needle, start + 1)
  return start


def _span(needle, nth=0):
  s = _at(needle, nth)
  return [s, s + len(needle)]


def _record(*evidence_list, stage="rubric"):
  ext = extract_app(RESPONSE)
  issues = [{"stage": stage, "rubric_id": f"r{k}", "severity": "major", "message": "m",
             "direct": [], "context": [], "evidence": ev} for k, ev in enumerate(evidence_list)]
  return {"task_id": "t", "sample_id": 0, "reward": 0.5, "html_span": list(ext.html_span),
          "issues": issues}


def _texts(spans):
  return [RESPONSE[s:e] for s, e in spans]


def _localize(*evidence, stage="rubric"):
  return localize_record(_record(*evidence, stage=stage), RESPONSE)["issues"]


class EvidenceKindsTest(parameterized.TestCase):

  def assertValidSpans(self, issue):
    for key in ("direct", "context"):
      spans = issue[key]
      self.assertEqual(spans, sorted(spans))
      for (_, b), (c, _) in zip(spans, spans[1:]):
        self.assertLess(b, c)
    for s, e in issue["context"]:
      for ds, de in issue["direct"]:
        self.assertFalse(s < de and ds < e, "context repeats direct")

  def test_stack_frames(self):
    inner = _at("countEl.textContent")
    outer = _at("render();", 1)
    ext = extract_app(RESPONSE)
    foreign_line = ext.html[:ext.html.index("e.target.remove")].count("\n")
    (issue,) = _localize({
        "exception": {"message": "TypeError: boom", "offset": inner},
        "stack": [{"function": "render", "offset": inner, "line": 0, "column": 0, "url": "u"},
                  {"function": "", "offset": outer, "line": 0, "column": 0, "url": "u"},
                  {"function": "lib", "offset": None, "line": foreign_line, "column": 3,
                   "url": "other"}]},
        stage="runtime")
    self.assertValidSpans(issue)
    self.assertEqual(_texts(issue["direct"]), ["countEl.textContent = format(count);"])
    ctx = _texts(issue["context"])
    self.assertIn("render();", ctx)                      # the outer frame's statement
    self.assertIn("function render() {\n  ", ctx)        # enclosing function
    self.assertIn("function format(n) {\n  return String(n);\n}", ctx)   # callee
    # The frame outside the app (offset None) is not mapped by its line and column.
    self.assertNotIn("e.target.remove();", ctx)

  def test_exception_offset_without_stack(self):
    pos = _at("count -= 1")
    (issue,) = _localize({"exception": {"message": "x", "offset": pos}}, stage="runtime")
    self.assertEqual(_texts(issue["direct"]), ["count -= 1;"])

  def test_null_access_blames_where_the_object_came_from(self):
    pos = _at("countEl.textContent")
    (issue,) = _localize({
        "exception": {"message": "TypeError: Cannot set properties of null (setting "
                                 "'textContent')", "offset": pos},
        "stack": [{"function": "render", "offset": pos, "line": 0, "column": 0, "url": "u"}]},
        stage="runtime")
    self.assertEqual(_texts(issue["direct"]),
                     ["const countEl = document.getElementById('count');",
                      "countEl.textContent = format(count);"])

  def test_exception_in_statement_with_callback_leaves_the_callback_out(self):
    pos = _at("document.getElementById('inc')")
    (issue,) = _localize({"exception": {"message": "TypeError: Cannot read properties of null "
                                                   "(reading 'addEventListener')", "offset": pos},
                          "stack": [{"function": "", "offset": pos, "line": 0, "column": 0,
                                     "url": "u"}]}, stage="runtime")
    direct = _texts(issue["direct"])
    self.assertEqual(direct, ["document.getElementById('inc').addEventListener('click', ",
                              ");"])
    self.assertIn("() => {\n  count += 1;\n  render();\n}", _texts(issue["context"]))

  def test_listener_on_target(self):
    path = ['click "#inc"', 'expect text "#count" == "1"']
    (issue,) = _localize({
        "step": path[-1], "step_index": 1, "path": path, "selector": "#count",
        "element": {"tag": "span", "id": "count", "exists": True},
        "element_source": _span('<span id="count" class="big">'),
        "listeners": [{"type": "click", "offset": _at("() => {\n  count += 1"), "line": 0,
                       "column": 0, "node": "target", "selector": "button#inc"}]})
    self.assertValidSpans(issue)
    direct = _texts(issue["direct"])
    self.assertIn("() => {\n  count += 1;\n  render();\n}", direct)    # handler
    self.assertIn("countEl.textContent = format(count);", direct)     # update of #count
    self.assertIn("function format(n) {\n  return String(n);\n}", direct)  # computes it
    self.assertNotIn('<span id="count" class="big">0</span>', direct)  # dynamic: not markup
    ctx = _texts(issue["context"])
    self.assertIn("const countEl = document.getElementById('count');", ctx)
    self.assertIn("count -= 1;", ctx)                                 # other writes of count
    self.assertIn("let count = 0;", ctx)

  def test_delegated_listener_on_ancestor(self):
    path = ['click "#list li"', 'expect count "#list li" == 0']
    (issue,) = _localize({
        "step": path[-1], "step_index": 1, "path": path, "selector": "#list li",
        "element": {"tag": "li", "exists": True},
        "listeners": [
            {"type": "click", "offset": _at("(e) => {"), "line": 0, "column": 0,
             "node": "ancestor", "selector": "ul#list"},
            {"type": "keydown", "offset": _at("() => {\n  count += 1"), "line": 0, "column": 0,
             "node": "ancestor", "selector": "document"}]})
    direct = _texts(issue["direct"])
    self.assertIn("(e) => {\n  e.target.remove();\n}", direct)
    # The keydown listener does not fire on a click.
    self.assertNotIn("() => {\n  count += 1;\n  render();\n}", direct)

  def test_listener_by_line_and_column_when_record_has_no_offset(self):
    ext = extract_app(RESPONSE)
    app_pos = ext.html.index("() => {\n  count += 1")
    line = ext.html.count("\n", 0, app_pos)
    column = app_pos - (ext.html.rindex("\n", 0, app_pos) + 1)
    path = ['click "#inc"', 'expect text "#count" == "1"']
    (issue,) = _localize({"step": path[-1], "path": path, "selector": "#count",
                          "element": {"exists": True},
                          "listeners": [{"type": "click", "line": line,
                                         "column": column, "node": "target",
                                         "selector": "button#inc"}]})
    self.assertIn("() => {\n  count += 1;\n  render();\n}", _texts(issue["direct"]))

  def test_attribute_handler_without_browser_evidence(self):
    path = ['click "#dec"', 'expect text "#count" == "-1"']
    (issue,) = _localize({"step": path[-1], "path": path, "selector": "#count",
                          "element": {"exists": True}})
    direct = _texts(issue["direct"])
    self.assertIn("dec()", direct)
    self.assertIn("function dec() {\n  count -= 1;\n  render();\n}", direct)

  def test_missing_binding(self):
    # CDP saw a listener on #inc only: #dec (acted on too) has none of its own.
    path = ['click "#inc"', 'click "#list"', 'expect text "#count" == "1"']
    (issue,) = _localize({"step": path[-1], "path": path, "selector": "#count",
                          "element": {"exists": True},
                          "listeners": [{"type": "click", "offset": _at("() => {\n  count += 1"),
                                         "line": 0, "column": 0, "node": "target",
                                         "selector": "button#inc"}]})
    # The missing binding has no text: the element and where it would be are context.
    self.assertNotIn('<ul id="list"></ul>', _texts(issue["direct"]))
    ctx = _texts(issue["context"])
    self.assertIn('<ul id="list"></ul>', ctx)
    self.assertTrue(any(c.startswith("document.getElementById('list').addEventListener(")
                        for c in ctx), ctx)
    self.assertIn("function addRow() {\n  const li = document.createElement('li');\n  "
                  "li.id = 'row';\n  document.getElementById('list').appendChild(li);\n}", ctx)

  def test_initial_state_static_element(self):
    (issue,) = _localize({"step": 'expect text "#count" == "5"', "step_index": 0,
                          "path": ['expect text "#count" == "5"'], "selector": "#count",
                          "element": {"tag": "span", "id": "count", "exists": True},
                          "element_source": _span('<span id="count" class="big">')})
    direct = _texts(issue["direct"])
    self.assertIn('<span id="count" class="big">0</span>', direct)
    self.assertIn("countEl.textContent = format(count);", direct)
    ctx = _texts(issue["context"])
    self.assertIn("let count = 0;", ctx)          # state the update reads

  def test_initial_state_missing_element(self):
    (issue,) = _localize({"step": 'expect exists "#row"', "step_index": 0,
                          "path": ['expect exists "#row"'], "selector": "#row",
                          "element": {"exists": False}})
    self.assertEqual(_texts(issue["direct"]), ["li.id = 'row';"])
    self.assertIn("function addRow() {\n  const li = document.createElement('li');\n  ",
                  _texts(issue["context"]))

  def test_missing_element_near_miss_id(self):
    (issue,) = _localize({"step": 'click "#incc"', "step_index": 0, "path": ['click "#incc"'],
                          "selector": "#incc", "element": {"exists": False}})
    # The id attribute and the code naming it; the handler it passes is context.
    self.assertEqual(_texts(issue["direct"]),
                     ['id="inc"', "document.getElementById('inc').addEventListener('click', ",
                      ");"])
    self.assertIn("() => {\n  count += 1;\n  render();\n}", _texts(issue["context"]))
    self.assertIn('<button id="inc">', issue["evidence"]["target_guess"]["guess"])

  def test_css_rule_with_property(self):
    rule = _span("#count { color: red; font-size: 20px; }")
    (issue,) = _localize({"step": 'expect style "#count" color == "rgb(0, 0, 255)"',
                          "path": ['expect style "#count" color == "rgb(0, 0, 255)"'],
                          "selector": "#count", "element": {"exists": True},
                          "element_source": _span('<span id="count" class="big">'),
                          "css_rules": [{"selector": "#count", "span": rule, "property": "color"}]})
    self.assertEqual(_texts(issue["direct"]), ["color: red;"])
    self.assertEqual(_texts(issue["context"]), ["#count { ", " font-size: 20px; }"])

  def test_css_rule_shorthand_and_without_property(self):
    big = _span(".big { border: 1px solid blue; }")
    count = _span("#count { color: red; font-size: 20px; }")
    (issue,) = _localize({"step": 'expect style "#count" border-top-color == "red"',
                          "path": [], "selector": "#count", "element": {"exists": True},
                          "css_rules": [{"selector": ".big", "span": big,
                                         "property": "border-top-color"},
                                        {"selector": "#count", "span": count, "property": None}]})
    self.assertEqual(_texts(issue["direct"]), ["#count { color: red; font-size: 20px; }",
                                               "border: 1px solid blue;"])

  def test_parse_error_node(self):
    node = _span("count -= 1;")
    (issue,) = _localize({"node_span": node, "language": "js", "fatal": True},
                         stage="source")
    self.assertEqual(issue["direct"], [node])
    self.assertIn("function dec() {\n  ", _texts(issue["context"]))

  @parameterized.parameters(
      ("countEl.textContent = format(count);", "countEl.textContent = format(count);"),
      ("countEl.textContent   =\n format(count);", "countEl.textContent = format(count);"),
      ("function dec() {\n  count -= 1;\n  render()\n}",
       "function dec() {\n  count -= 1;\n  render();\n}"),
  )
  def test_judge_quotes(self, quote, want):
    (issue,) = _localize({"quotes": [quote]})
    self.assertEqual(_texts(issue["direct"]), [want])

  def test_judge_quote_below_threshold_is_dropped(self):
    self.assertEqual(match_quote(RESPONSE, "window.fetch('https://example.com/api')"), [])
    self.assertEqual(match_quote(RESPONSE, "x"), [])

  def test_no_app_keeps_quotes_only(self):
    record = _record({"quotes": ["count -= 1;"]}, {"stack": [{"offset": 5}]})
    record["html_span"] = None
    issues = localize_record(record, RESPONSE)["issues"]
    self.assertEqual(_texts(issues[0]["direct"]), ["count -= 1;"])
    self.assertEqual(issues[0]["context"], [])
    self.assertEqual(issues[1]["direct"], [])

  def test_keeps_evaluator_direct_when_evidence_is_silent(self):
    record = _record({"hang": "load"}, stage="runtime")
    record["issues"][0]["direct"] = [[3, 9]]
    (issue,) = localize_record(record, RESPONSE)["issues"]
    self.assertEqual(issue["direct"], [[3, 9]])

  def test_inlined_fences(self):
    response = ("Files:\n```html\n<div id=\"count\">0</div><button id=\"inc\">+</button>\n```\n"
                "```css\n#count { color: red; }\n```\n```js\nlet n = 0;\n"
                "document.getElementById('inc').onclick = () => { n += 1; show(); };\n"
                "function show() { document.getElementById('count').textContent = n; }\n```\n")
    ext = extract_app(response)
    self.assertTrue(ext.inlined)
    pos = response.index("document.getElementById('count')")
    record = {"html_span": list(ext.html_span), "issues": [{
        "stage": "runtime", "message": "m", "direct": [], "context": [],
        "evidence": {"exception": {"message": "x", "offset": pos},
                     "stack": [{"offset": pos, "line": 0, "column": 0}]}}]}
    (issue,) = localize_record(record, response)["issues"]
    spans = issue["direct"]
    self.assertEqual([response[s:e] for s, e in spans],
                     ["document.getElementById('count').textContent = n;"])
    self.assertIn("n += 1;", [response[s:e] for s, e in issue["context"]])

  def test_deterministic_and_input_untouched(self):
    record = _record({"step": 'expect text "#count" == "5"', "path": [], "selector": "#count",
                      "element": {"exists": True}},
                     {"exception": {"message": "x", "offset": _at("count -= 1")}})
    before = copy.deepcopy(record)
    a = localize_record(record, RESPONSE)
    b = localize_record(copy.deepcopy(record), RESPONSE)
    self.assertEqual(a, b)
    self.assertEqual(record, before)
    for issue in a["issues"]:
      self.assertValidSpans(issue)


_RENAMED = """<!DOCTYPE html><html><body>
<h1>Counter</h1>
<span id="display">0</span>
<button id="plus">+</button>
<button id="minus">-</button>
<button id="a1">A</button><button id="a2">B</button>
<script>
let n = 0;
const out = document.getElementById('display');
function show() { out.textContent = n; }
document.getElementById('plus').addEventListener('click', () => { n += 1; show(); });
document.getElementById('minus').addEventListener('click', () => { n -= 1; show(); });
document.getElementById('a1').onclick = () => { n = 5; show(); };
document.getElementById('a2').onclick = () => { n = 7; show(); };
</script></body></html>"""
RENAMED = "```html\n" + _RENAMED + "\n```"


class MissingTargetTest(parameterized.TestCase):
  """A selector that matches nothing: the element the app most plausibly meant."""

  def _issue(self, check, selector, expected=None, selectors=("#inc", "#dec", "#count")):
    steps = [part.strip() for part in check.split(";")]
    failing = next(i for i, st in enumerate(steps) if f'"{selector}"' in st)
    ext = extract_app(RENAMED)
    ev = {"step": steps[failing], "step_index": failing, "path": steps[:failing + 1],
          "check": steps, "selector": selector, "element": {"exists": False},
          "expected": expected, "rubric_selectors": list(selectors)}
    record = {"html_span": list(ext.html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "critical", "message": "m",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, RENAMED)["issues"]
    return issue, [RENAMED[a:b] for a, b in issue["direct"]], [
        RENAMED[a:b] for a, b in issue["context"]]

  def test_renamed_action_target(self):
    issue, direct, ctx = self._issue('click "#inc"; expect text "#count" == "1"', "#inc")
    self.assertEqual(direct, ['id="plus"', "document.getElementById('plus').addEventListener("
                              "'click', ", ");"])
    self.assertIn("() => { n += 1; show(); }", ctx)          # its wiring
    self.assertNotIn("() => { n -= 1; show(); }", direct + ctx)
    self.assertIn('id="plus"', issue["evidence"]["target_guess"]["guess"])

  def test_renamed_expectation_target_is_what_the_action_writes(self):
    _, direct, ctx = self._issue('click "#plus"; expect text "#count" == "1"', "#count",
                                 expected="1", selectors=("#plus", "#count"))
    self.assertEqual(direct, ['id="display"', "const out = document.getElementById('display');"])
    self.assertIn("out.textContent = n;", ctx)

  def test_initial_text_equal_to_the_expected_one(self):
    _, direct, _ = self._issue('expect text "#value" == "0"', "#value", expected="0",
                               selectors=("#value",))
    self.assertEqual(direct[0], 'id="display"')

  def test_renamed_ancestor_of_a_counted_selector(self):
    _, direct, _ = self._issue('expect count "#plus-button span" == 1', "#plus-button span",
                               selectors=("#plus-button span",))
    self.assertEqual(direct[0], 'id="plus"')

  def test_no_plausible_element_blames_nothing_directly(self):
    issue, direct, _ = self._issue('fill "#email" "a@b.c"', "#email")
    self.assertEqual(direct, [])
    self.assertEqual(issue["evidence"]["target_guess"]["why"], "no element is plausible")

  def test_equally_plausible_elements_blame_nothing_directly(self):
    # a1 and a2 both write what the rubric reads; nothing in their names decides.
    issue, direct, _ = self._issue('click "#go"; expect text "#display" == "5"', "#go",
                                   selectors=("#go", "#display", "#plus", "#minus"))
    self.assertEqual(direct, [])
    self.assertEqual(issue["evidence"]["target_guess"]["why"],
                     "several elements are equally plausible")
    self.assertLen(issue["evidence"]["target_guess"]["candidates"], 2)

  def test_renamed_field_read_by_the_submit_handler(self):
    app = ("```html\n<input id=\"w\" type=\"number\"><input id=\"f2\" type=\"number\">"
           "<input id=\"note\" type=\"text\"><button id=\"go\">=</button><p id=\"out\"></p>"
           "<script>\ndocument.getElementById('go').addEventListener('click', () => {\n"
           "  const w = Number(document.getElementById('w').value);\n"
           "  const h = Number(document.getElementById('f2').value);\n"
           "  document.getElementById('out').textContent = w / h;\n});\n</script>\n```")
    steps = ['fill "#w" "2"', 'fill "#height" "4"', 'click "#go"', 'expect text "#out" == "0.5"']
    ev = {"step": steps[1], "step_index": 1, "path": steps[:2], "check": steps,
          "selector": "#height", "element": {"exists": False},
          "rubric_selectors": ["#w", "#height", "#go", "#out"]}
    record = {"html_span": list(extract_app(app).html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "critical", "message": "m",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, app)["issues"]
    self.assertEqual([app[a:b] for a, b in issue["direct"]],
                     ['id="f2"', "const h = Number(document.getElementById('f2').value);"])

  @parameterized.parameters(
      ("theme-toggle", "toggle", 0.7), ("inc", "plus", 0.8), ("count", "counter", 0.9),
      ("themeToggle", "theme-toggle", 1.0), ("people", "ppl", 0.8), ("todo-list", "td-lst", 0.8),
      ("faq-head-3", "faq-head-3-btn", 0.7), ("inc", "reset", 0.0), ("faq-head-3", "faq-head-1", 0.0))
  def test_name_similarity(self, a, b, at_least):
    from rcca_jax.credit.targets import name_similarity
    sim = name_similarity(a, b)
    self.assertGreaterEqual(sim, at_least)
    if at_least == 0.0:
      self.assertLess(sim, 0.5)

  def test_the_odd_one_of_a_family(self):
    app = ("```html\n<div class=\"slide\" id=\"slide-1\">a</div><div class=\"slide\" "
           "id=\"slide-2\">b</div><div class=\"slide\" id=\"box7\">c</div>"
           "<p id=\"cap\">x</p>\n```")
    ev = {"step": 'expect visible "#slide-3"', "step_index": 0, "selector": "#slide-3",
          "path": ['expect visible "#slide-3"'], "element": {"exists": False},
          "rubric_selectors": ["#slide-1", "#slide-3"]}
    record = {"html_span": list(extract_app(app).html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "critical", "message": "m",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, app)["issues"]
    self.assertEqual([app[a:b] for a, b in issue["direct"]], ['id="box7"'])

  @parameterized.parameters(
      ("document.getElementById('plus-btn').textContent === '+'", ['id="plus"']),
      ("document.querySelector('#email-field').value === ''", []))   # nothing like it
  def test_missing_element_read_by_expect_js(self, expression, want):
    check = f'expect js "{expression}"'
    ev = {"step": check, "step_index": 0, "path": [check], "check": [check],
          "expected": "truthy"}
    record = {"html_span": list(extract_app(RENAMED).html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "major", "message": "threw",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, RENAMED)["issues"]
    self.assertEqual([RENAMED[a:b] for a, b in issue["direct"]][:1], want)


if __name__ == "__main__":
  absltest.main()


_BROWSER_APP = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
#count { color: rgb(255, 0, 0); font-size: 20px; }
</style></head><body>
<p>计数器 🙂</p>
<span id="count">0</span>
<button id="inc">+</button>
<button id="boom">!</button>
<ul id="list"><li>a</li><li>b</li></ul>
<script>
let count = 0;
const countEl = document.getElementById('count');
function render() {
  countEl.textContent = String(count);
}
document.getElementById('inc').addEventListener('click', () => {
  count -= 1;
  render();
});
function explode() {
  const data = null;
  return data.value;
}
document.getElementById('boom').addEventListener('click', () => { explode(); });
document.getElementById('list').addEventListener('click', (e) => {
  e.target.textContent = 'x';
});
</script></body></html>"""
def _evaluate_and_localize(task: dict, response: str) -> tuple[dict, dict]:
  """The record of `response` from headless Chromium, and the record localized."""
  from rcca_jax.data.tasks import parse_task
  from rcca_jax.evaluation.evaluator import Evaluator
  evaluator = Evaluator()
  try:
    record = evaluator.evaluate(parse_task(task), response, 0).to_json()
  finally:
    evaluator.close()
  return record, localize_record(record, response)


_BROWSER_TASK = {
    "id": "probe", "request": "counter",
    "rubrics": [
        {"id": "inc", "kind": "dynamic", "level": "core", "text": "+ adds one",
         "check": 'click "#inc"; expect text "#count" == "1"'},
        {"id": "boom", "kind": "dynamic", "level": "behavior", "text": "! does nothing bad",
         "check": 'click "#boom"; expect no_errors'},
        {"id": "color", "kind": "initial", "level": "rendering", "text": "count is blue",
         "check": 'expect style "#count" color == "rgb(0, 0, 255)"'},
        {"id": "start", "kind": "initial", "level": "core", "text": "starts at 5",
         "check": 'expect text "#count" == "5"'},
        {"id": "item", "kind": "dynamic", "level": "behavior", "text": "clicking an item removes it",
         "check": 'click "#list li"; expect count "#list li" == 1'},
    ]}


@pytest.mark.browser
class RealEvaluatorTest(absltest.TestCase):
  """Evidence from headless Chromium, localized."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.response = "The app 🙂:\n```html\n" + _BROWSER_APP + "\n```\n"
    cls.record, cls.localized = _evaluate_and_localize(_BROWSER_TASK, cls.response)
    cls.by_rubric = {i.get("rubric_id"): i for i in cls.localized["issues"]}

  def _texts(self, spans):
    return [self.response[s:e] for s, e in spans]

  def test_rubrics_failed_as_planted(self):
    failed = {r["id"] for r in self.record["rubrics"] if r["passed"] is False}
    self.assertEqual(failed, {"inc", "boom", "color", "start", "item"})

  def test_handler_from_cdp_listener(self):
    issue = self.by_rubric["inc"]
    self.assertTrue(issue["evidence"].get("listeners"))
    direct = self._texts(issue["direct"])
    self.assertIn("() => {\n  count -= 1;\n  render();\n}", direct)
    self.assertIn("countEl.textContent = String(count);", direct)

  def test_exception_stack(self):
    issues = [i for i in self.localized["issues"] if "data.value" in str(i.get("message"))
              or i.get("rubric_id") == "boom"]
    self.assertTrue(issues)
    for issue in issues:
      self.assertIn("return data.value;", self._texts(issue["direct"]))
      self.assertIn("const data = null;", self._texts(issue["direct"]))   # the null's source
    call = self.response.index("explode(); }")
    for issue in issues:     # the calling frame's statement
      self.assertTrue(any(s <= call and call + 10 <= e for s, e in issue["context"]))

  def test_css_rule_declaration(self):
    issue = self.by_rubric["color"]
    self.assertTrue(issue["evidence"].get("css_rules"))
    self.assertEqual(self._texts(issue["direct"]), ["color: rgb(255, 0, 0);"])

  def test_initial_state_markup(self):
    issue = self.by_rubric["start"]
    direct = self._texts(issue["direct"])
    self.assertIn('<span id="count">0</span>', direct)
    self.assertIn("countEl.textContent = String(count);", direct)

  def test_delegated_listener(self):
    issue = self.by_rubric["item"]
    self.assertTrue(any(l["node"] == "ancestor" for l in issue["evidence"].get("listeners", [])))
    self.assertIn("(e) => {\n  e.target.textContent = 'x';\n}", self._texts(issue["direct"]))

  def test_spans_are_response_coordinates_and_disjoint(self):
    for issue in self.localized["issues"]:
      for s, e in issue["direct"] + issue["context"]:
        self.assertTrue(0 <= s < e <= len(self.response))
      for s, e in issue["context"]:
        self.assertFalse(any(s < de and ds < e for ds, de in issue["direct"]))


class PostProcessHookTest(absltest.TestCase):

  def test_the_graders_workers_import_it_by_name(self):
    self.assertIs(check_post_process(localize_record), localize_record)
    self.assertIn(b"rcca_jax.credit.localize", pickle.dumps(localize_record))  # by reference
    self.assertIs(pickle.loads(pickle.dumps(localize_record)), localize_record)


_RENAMED_APP = """<!DOCTYPE html><html><head><style>.dark { background: #000; }</style></head>
<body>
<button id="toggle">Theme</button>
<span id="count">0</span><button id="plus">+</button><button id="dec">-</button>
<script>
const btn = document.getElementById('toggle');
btn.addEventListener('click', () => { document.body.classList.toggle('dark'); });
let n = 0;
const c = document.getElementById('count');
document.getElementById('plus').addEventListener('click', () => { n++; c.textContent = n; });
document.getElementById('dec').addEventListener('click', () => { n--; c.textContent = n; });
</script></body></html>"""
_RENAMED_TASK = {
    "id": "renamed", "request": "theme toggle and counter",
    "rubrics": [
        {"id": "theme", "kind": "dynamic", "level": "core", "text": "#theme-toggle darkens",
         "check": 'click "#theme-toggle"; expect attr "body" class contains "dark"'},
        {"id": "inc", "kind": "dynamic", "level": "core", "text": "+ adds one",
         "check": 'click "#inc"; expect text "#count" == "1"'},
        {"id": "dec", "kind": "dynamic", "level": "core", "text": "- takes one",
         "check": 'click "#dec"; expect text "#count" == "-1"'},
    ]}


@pytest.mark.browser
class RenamedTargetBrowserTest(absltest.TestCase):
  """The policy's commonest failure: the requested element exists under another name."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.response = "```html\n" + _RENAMED_APP + "\n```"
    cls.record, localized = _evaluate_and_localize(_RENAMED_TASK, cls.response)
    cls.by_rubric = {i.get("rubric_id"): i for i in localized["issues"]}

  def _texts(self, spans):
    return [self.response[s:e] for s, e in spans]

  def test_only_the_renamed_rubrics_fail(self):
    failed = {r["id"] for r in self.record["rubrics"] if r["passed"] is False}
    self.assertEqual(failed, {"theme", "inc"})

  def test_theme_toggle_blames_the_id_not_the_handler(self):
    issue = self.by_rubric["theme"]
    self.assertEqual(self._texts(issue["direct"]),
                     ['id="toggle"', "const btn = document.getElementById('toggle');"])
    self.assertTrue(any("() => { document.body.classList.toggle('dark'); }" in t
                        for t in self._texts(issue["context"])), issue["context"])

  def test_plus_button_blames_its_id_and_lookup(self):
    issue = self.by_rubric["inc"]
    direct = self._texts(issue["direct"])
    self.assertEqual(direct, ['id="plus"',
                              "document.getElementById('plus').addEventListener('click', ",
                              ");"])
    self.assertIn("() => { n++; c.textContent = n; }", self._texts(issue["context"]))


_BINDINGS = """<!DOCTYPE html><html><body>
<span id="count">0</span>
<button id="inc">+</button><button id="dec" onclik="dec()">-</button>
<button id="reset">0</button>
<script>
let n = 0;
const out = document.getElementById('count');
function dec() { n -= 1; out.textContent = n; }
document.getElementById('inc').addEventListener('clik', () => { n += 1; out.textContent = n; });
const resetBtn = document.getElementById('reset');
resetBtn.onclik = () => { n = 0; out.textContent = n; };
</script></body></html>"""
BINDINGS = "```html\n" + _BINDINGS + "\n```"


class WrongEventTest(parameterized.TestCase):
  """A listener bound to an event the action does not fire: the binding is direct."""

  def _issue(self, target, listeners=()):
    ext = extract_app(BINDINGS)
    path = [f'click "#{target}"', 'expect text "#count" == "1"']
    ev = {"step": path[-1], "step_index": 1, "path": path, "selector": "#count",
          "element": {"tag": "span", "id": "count", "exists": True}, "expected": "1",
          "listeners": list(listeners)}
    record = {"html_span": list(ext.html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "major", "message": "m",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, BINDINGS)["issues"]
    return ([BINDINGS[a:b] for a, b in issue["direct"]],
            [BINDINGS[a:b] for a, b in issue["context"]])

  def test_misspelt_listener_from_the_browser(self):
    handler = BINDINGS.index("() => { n += 1")
    direct, ctx = self._issue("inc", [{"type": "clik", "offset": handler, "line": 0,
                                       "column": 0, "node": "target", "selector": "button#inc"}])
    self.assertIn("document.getElementById('inc').addEventListener('clik', ", direct)
    self.assertNotIn("() => { n += 1; out.textContent = n; }", direct)
    self.assertIn("() => { n += 1; ", ctx)      # the handler (its write of #count is direct)
    self.assertNotIn('<button id="inc">+</button>', direct)   # bound: not "no binding"

  def test_change_listener_on_a_button_does_not_fire_on_click(self):
    handler = BINDINGS.index("() => { n += 1")
    direct, _ = self._issue("inc", [{"type": "change", "offset": handler, "line": 0,
                                     "column": 0, "node": "target", "selector": "button#inc"}])
    self.assertIn("document.getElementById('inc').addEventListener('clik', ", direct)

  def _app_issue(self, app, path, selector, listener_at, listener):
    ev = {"step": path[-1], "step_index": len(path) - 1, "path": path, "selector": selector,
          "element": {"exists": True},
          "listeners": [dict(listener, offset=app.index(listener_at), line=0, column=0,
                             node="target")]}
    record = {"html_span": list(extract_app(app).html_span), "issues": [
        {"stage": "rubric", "rubric_id": "r", "severity": "major", "message": "m",
         "direct": [], "context": [], "evidence": ev}]}
    (issue,) = localize_record(record, app)["issues"]
    return [app[a:b] for a, b in issue["direct"]]

  def test_change_listener_does_not_fire_when_filling_text(self):
    app = ("```html\n<input id=\"c\" type=\"number\"><p id=\"f\"></p><script>\n"
           "const c = document.getElementById('c');\n"
           "c.addEventListener('change', () => { document.getElementById('f').textContent = "
           "c.value * 2; });\n</script>\n```")
    direct = self._app_issue(app, ['fill "#c" "3"', 'expect text "#f" == "6"'], "#f",
                             "() => {", {"type": "change", "selector": "input#c"})
    self.assertIn("c.addEventListener('change', ", direct)

  def test_binding_inside_for_each_keeps_its_event(self):
    app = ("```html\n<button class=\"t\" id=\"a\">A</button><p id=\"o\"></p><script>\n"
           "document.querySelectorAll('.t').forEach((t) => t.addEventListener('clik', () => "
           "{ document.getElementById('o').textContent = t.id; }));\n</script>\n```")
    direct = self._app_issue(app, ['click "#a"', 'expect text "#o" == "a"'], "#o",
                             "() => {", {"type": "clik", "selector": "button#a.t"})
    self.assertIn("document.querySelectorAll('.t').forEach((t) => t.addEventListener('clik', ",
                  direct)

  @parameterized.named_parameters(
      ("property", "reset", "resetBtn.onclik = "),
      ("attribute", "dec", 'onclik="dec()'),
  )
  def test_misspelt_binding_without_a_listener(self, target, binding):
    direct, _ = self._issue(target)
    self.assertIn(binding, direct)
