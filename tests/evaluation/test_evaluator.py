"""The evaluator end to end on the shipped examples, plus evidence mapped to the response."""

import json
import pathlib

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.credit import localize
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import evaluator as evaluator_lib
from rcca_jax.evaluation.config import EvalConfig

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "examples"
TASKS = {t.id: t for t in tasks_lib.load_tasks(EXAMPLES / "tasks.jsonl")}
RESPONSES = responses_lib.load_responses(EXAMPLES / "responses.jsonl")
EXPECTED = [json.loads(l) for l in (EXAMPLES / "expected.jsonl").read_text().splitlines()]

COUNTER_TASK = tasks_lib.parse_task({
    "id": "c", "request": "counter",
    "rubrics": [
        {"id": "r1", "kind": "dynamic", "level": "core", "text": "+ adds one",
         "check": 'click "#inc"; expect text "#count" == "1"'},
        {"id": "r2", "kind": "initial", "level": "rendering", "text": "count is red",
         "check": 'expect style "#count" color == "red"'},
    ]})

SPLIT_RESPONSE = """Here it is.

```html
<div id="count">0</div>
<button id="inc">+</button>
```

```css
#count { color: blue; }
```

```javascript
let n = 0;
document.getElementById('inc').addEventListener('click', () => {
  n += 2;
  document.getElementById('count').textContent = n;
});
```
"""


def _expected_cases():
  return [dict(testcase_name=f"{e['task_id']}_{e['sample_id']}", index=i)
          for i, e in enumerate(EXPECTED)]


@pytest.mark.browser
class ExamplesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.ev = evaluator_lib.Evaluator(EvalConfig(load_timeout=2.0, step_timeout=1.0))

  @classmethod
  def tearDownClass(cls):
    cls.ev.close()
    super().tearDownClass()

  @parameterized.named_parameters(*_expected_cases())
  def test_example(self, index):
    item, exp = RESPONSES[index], EXPECTED[index]
    record = self.ev.evaluate(TASKS[item.task_id], item.response, item.sample_id).to_json()
    self.assertAlmostEqual(record["reward"], exp["reward"], msg=record)
    if exp["failing_gate"]:
      self.assertIs(record["gates"][exp["failing_gate"]], False)
      self.assertIsNone(record["rubric_score"])
    else:
      self.assertTrue(all(record["gates"].values()))
    if exp["rubric"]:
      by_id = {r["id"]: r for r in record["rubrics"]}
      self.assertEqual((by_id[exp["rubric"]]["passed"], by_id[exp["rubric"]]["severity"]),
                       (False, exp["severity"]))
    self.assertEqual([r["id"] for r in record["rubrics"]],
                     [r.id for r in TASKS[item.task_id].rubrics])

  def test_inlined_fences_map_back_to_their_fences(self):
    record = self.ev.evaluate(COUNTER_TASK, SPLIT_RESPONSE, 0).to_json()
    self.assertEqual([r["severity"] for r in record["rubrics"]], ["major", "minor"])
    r1 = next(i for i in record["issues"] if i["rubric_id"] == "r1")
    listener = r1["evidence"]["listeners"][0]
    self.assertTrue(SPLIT_RESPONSE[listener["offset"]:].startswith("() => {\n  n += 2;"))
    s, e = r1["evidence"]["element_source"]
    self.assertEqual(SPLIT_RESPONSE[s:e], '<div id="count">')
    r2 = next(i for i in record["issues"] if i["rubric_id"] == "r2")
    s, e = r2["evidence"]["css_rules"][0]["span"]
    self.assertEqual(SPLIT_RESPONSE[s:e], "#count { color: blue; }")
    self.assertEqual(r2["evidence"]["css_rules"][0]["property"], "color")

  @parameterized.named_parameters(
      ("in_the_handler", "() => {\n", "};\n"),
      # Thrown while the page settles after the click: still the click's.
      ("in_a_timer_after_the_click", "() => setTimeout(() => {\n", "}, 0);\n"))
  def test_exception_in_interaction_fails_runtime_and_points_at_statement(self, head, tail):
    response = ("```html\n<div id=\"count\">0</div><button id=\"inc\">+</button>\n<script>\n"
                f"document.getElementById('inc').onclick = {head}"
                "  const data = JSON.parse('{bad');\n"
                f"  document.getElementById('count').textContent = data.n;\n{tail}"
                "</script>\n```")
    record = self.ev.evaluate(COUNTER_TASK, response, 3).to_json()
    self.assertIs(record["gates"]["runtime"], False)
    self.assertEqual(record["reward"], 0.10)
    self.assertEqual(record["rubrics"][0]["severity"], "critical")
    r1 = next(i for i in record["issues"] if i["rubric_id"] == "r1")
    self.assertEqual((r1["evidence"]["step_index"], r1["evidence"]["path"]), (0, ['click "#inc"']))
    runtime = next(i for i in record["issues"] if i["stage"] == "runtime")
    s, e = runtime["direct"][0]
    self.assertEqual(response[s:e], "const data = JSON.parse('{bad');")
    self.assertEqual(runtime["evidence"]["path"], ['click "#inc"'])

  @parameterized.named_parameters(
      ("to_about_blank", "location.href = 'about:blank'", ("critical",)),
      # The read after the click meets the old document going away or the reloaded one.
      ("by_reloading", "location.reload()", ("critical", "major")))
  def test_app_that_navigates_itself_away_is_graded(self, script, severities):
    response = ('```html\n<div id="count" style="color: red">0</div>'
                f'<button id="inc" onclick="{script}">+</button>\n```')
    record = self.ev.evaluate(COUNTER_TASK, response, 6).to_json()
    r1, r2 = record["rubrics"]
    self.assertIs(r1["passed"], False)
    self.assertIn(r1["severity"], severities)
    self.assertIs(r2["passed"], True)  # the next rubric gets a fresh page
    self.assertIs(record["gates"]["runtime"], True)

  def test_key_press_without_selector_points_at_the_document_key_handler(self):
    task = tasks_lib.parse_task({
        "id": "k", "request": "arrow up counts",
        "rubrics": [{"id": "r1", "kind": "dynamic", "level": "core", "text": "up adds one",
                     "check": 'press "ArrowUp"; expect text "#count" == "1"'}]})
    response = ("```html\n<div id=\"count\">0</div>\n<script>\nlet n = 0;\n"
                "window.addEventListener('resize', () => {});\n"
                "document.addEventListener('keydown', (e) => {\n"
                "  if (e.key === 'ArrowUp') n += 2;\n"
                "  document.getElementById('count').textContent = n;\n});\n</script>\n```")
    record = self.ev.evaluate(task, response, 7).to_json()
    self.assertEqual(record["rubrics"][0]["severity"], "major")
    r1 = next(i for i in record["issues"] if i["rubric_id"] == "r1")
    keydown = [l for l in r1["evidence"]["listeners"] if l["type"] == "keydown"]
    self.assertLen(keydown, 1)
    self.assertEqual(keydown[0]["selector"], "document")
    self.assertTrue(response[keydown[0]["offset"]:].startswith("(e) => {\n  if (e.key"))
    # Localization turns that listener into the handler's code (the resize one is not).
    located = localize.localize_record(record, response)["issues"]
    direct = next(i for i in located if i["rubric_id"] == "r1")["direct"]
    self.assertTrue(any("n += 2;" in response[s:e] for s, e in direct), direct)
    self.assertFalse(any("resize" in response[s:e] for s, e in direct), direct)

  def test_exception_in_the_first_frame_fails_the_runtime_gate(self):
    response = ("```html\n<div id=\"count\">0</div><button id=\"inc\">+</button>\n<script>\n"
                "requestAnimationFrame(() => {\n  document.getElementById('missing').focus();\n"
                "});\n</script>\n```")
    record = self.ev.evaluate(COUNTER_TASK, response, 5).to_json()
    self.assertIs(record["gates"]["runtime"], False)
    self.assertEqual(record["reward"], 0.10)
    issue = record["issues"][0]
    self.assertIn("uncaught exception during load: TypeError", issue["message"])
    s, e = issue["direct"][0]
    self.assertEqual(response[s:e], "document.getElementById('missing').focus();")

  def test_false_count_of_zero_is_major_and_capped_as_major(self):
    task = tasks_lib.parse_task({
        "id": "l", "request": "a list with one item",
        "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "one item",
                     "check": 'expect count "#list li" == 1'}]})
    record = self.ev.evaluate(task, '```html\n<ul id="list"></ul>\n```', 8).to_json()
    self.assertEqual(record["rubrics"][0]["severity"], "major")
    self.assertEqual(record["issues"][0]["severity"], "major")
    self.assertAlmostEqual(record["reward"], 0.70)  # 1 - 0.25, capped by the major ceiling

  def test_console_errors_are_evidence_not_a_gate(self):
    response = ('```html\n<div id="count" style="color: red">0</div><button id="inc">+</button>'
                '<script>console.error("careful");document.getElementById("inc").onclick = '
                '() => { document.getElementById("count").textContent = "1"; };</script>\n```')
    record = self.ev.evaluate(COUNTER_TASK, response, 0).to_json()
    self.assertEqual(record["reward"], 1.0)
    self.assertEqual(record["issues"][-1]["evidence"]["console"], ["careful"])

  def test_hang_in_a_shared_load_gives_the_next_rubric_a_fresh_one(self):
    # The style probe (appended to the body, then removed) sets off the app's observer,
    # which loops; the click handler changes only #out.
    task = tasks_lib.parse_task({
        "id": "h", "request": "a button",
        "rubrics": [
            {"id": "r1", "kind": "initial", "level": "rendering", "text": "red",
             "check": 'expect style "#b" color == "red"'},
            {"id": "r2", "kind": "initial", "level": "core", "text": "a button",
             "check": 'expect exists "#b"'},
            {"id": "r3", "kind": "dynamic", "level": "core", "text": "says hi",
             "check": 'click "#b"; expect text "#out" == "hi"'}]})
    response = ('```html\n<button id="b">b</button><p id="out"></p><script>'
                'document.getElementById("b").onclick = () => { '
                'document.getElementById("out").textContent = "hi"; };'
                'new MutationObserver(() => { for (;;) {} }).observe(document.body, '
                '{childList: true});</script>\n```')
    record = self.ev.evaluate(task, response, 0).to_json()
    r1, r2, r3 = record["rubrics"]
    self.assertEqual((r1["passed"], r1["severity"]), (False, "critical"))
    self.assertEqual(r2["detail"], "not run: the page hung")
    self.assertIs(r3["passed"], True, record)

  def test_context_recycling_keeps_results(self):
    ev = evaluator_lib.Evaluator(EvalConfig(recycle_context_after=2))
    try:
      item = RESPONSES[0]
      rewards, contexts = [], []
      for i in range(4):
        rewards.append(ev.evaluate(TASKS[item.task_id], item.response, i).reward)
        contexts.append(ev._session.context_id)
    finally:
      ev.close()
    self.assertEqual(rewards, [1.0] * 4)
    self.assertEqual(contexts[0], contexts[1])
    self.assertNotEqual(contexts[1], contexts[2])  # a new context after 2 apps


class PlanLoadsTest(absltest.TestCase):

  def test_read_only_initial_rubrics_share_the_first_other_rubrics_load(self):
    task = TASKS["counter-0001"]  # initial, dynamic, dynamic, initial, dynamic
    plan = [[r.id for r in group] for group in evaluator_lib.plan_loads(task, EvalConfig())]
    ids = [r.id for r in task.rubrics]
    self.assertEqual(plan, [[ids[0], ids[3], ids[1]], [ids[2]], [ids[4]]])
    alone = evaluator_lib.plan_loads(task, EvalConfig(share_readonly_loads=False))
    self.assertEqual([[r.id for r in group] for group in alone], [[i] for i in ids])

  def test_only_initial_rubrics_make_one_load(self):
    plan = evaluator_lib.plan_loads(COUNTER_TASK, EvalConfig())
    self.assertEqual([[r.id for r in group] for group in plan], [["r2", "r1"]])
    only = tasks_lib.parse_task({"id": "o", "request": "x", "rubrics": [
        {"id": "a", "kind": "initial", "level": "core", "text": "a", "check": 'expect exists "a"'},
        {"id": "b", "kind": "initial", "level": "core", "text": "b"}]})
    self.assertEqual([[r.id for r in g] for g in evaluator_lib.plan_loads(only, EvalConfig())],
                     [["a"]])


class StaticRecordTest(absltest.TestCase):

  def test_format_failure(self):
    record = evaluator_lib.static_record(COUNTER_TASK, "no app here", 2).to_json()
    self.assertEqual(record["reward"], 0.0)
    self.assertEqual(record["gates"], {"format": False, "source": None, "runtime": None})
    self.assertIsNone(record["html_span"])
    self.assertLen(record["rubrics"], 2)

  def test_source_failure_points_at_the_error(self):
    response = "```html\n<script>\nfunction f( {\n</script>\n```"
    record = evaluator_lib.static_record(COUNTER_TASK, response, 0).to_json()
    self.assertEqual(record["reward"], 0.05)
    self.assertIs(record["gates"]["source"], False)
    self.assertTrue(record["issues"] and record["issues"][0]["direct"])

  def test_runtime_reason_when_static_passes(self):
    response = "```html\n<p>ok</p>\n```"
    record = evaluator_lib.static_record(COUNTER_TASK, response, 0, "deadline exceeded")
    record = record.to_json()
    self.assertEqual(record["reward"], 0.10)
    self.assertEqual(record["issues"][0]["message"], "deadline exceeded")
    s, e = record["html_span"]
    self.assertEqual(response[s:e].strip(), "<p>ok</p>")

  def test_error_record(self):
    record = evaluator_lib.error_record("t", None, "R:3: bad json").to_json()
    self.assertEqual((record["reward"], record["error"], record["sample_id"]),
                     (0.0, "R:3: bad json", -1))


class ConfigTest(absltest.TestCase):

  def test_round_trip_and_reward_override(self):
    config = EvalConfig.from_dict({"viewport": [800, 600], "load_timeout": 3,
                                   "reward": {"runtime_fail": 0.2}})
    self.assertEqual(config.viewport, (800, 600))
    self.assertEqual(EvalConfig.from_dict(config.to_dict()), config)
    self.assertEqual(config.reward_config().runtime_fail, 0.2)
    record = evaluator_lib.static_record(COUNTER_TASK, "```html\n<p>x</p>\n```", 0, "slow",
                                         config)
    self.assertEqual(record.reward, 0.2)

  def test_bad_keys_are_named(self):
    with self.assertRaisesRegex(ValueError, "load_timout"):
      EvalConfig.from_dict({"load_timout": 1})
    with self.assertRaisesRegex(ValueError, "unknown severity 'awful'"):
      EvalConfig.from_dict({"reward": {"penalties": {"core": {"awful": 1.0}}}})


if __name__ == "__main__":
  absltest.main()
