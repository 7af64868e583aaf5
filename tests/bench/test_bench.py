"""`python -m rcca_jax.bench`: ArtifactsBench with a fake vision judge, MiniAppBench with a
scripted agent judge (real Chromium, real tool calls), tables, reply parsing."""

import base64
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
from unittest import mock

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.bench import __main__ as bench_main
from rcca_jax.bench import artifactsbench
from rcca_jax.bench import table
from tests.evaluation.test_judge import FakeServer

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REPO = pathlib.Path(__file__).resolve().parents[2]


class FakeJudge(FakeServer):
  """The judge server of `test_judge`, with `url` and the request bodies only."""

  def __init__(self, respond):
    super().__init__(respond)
    self.url = self.base + "/v1"

  @property
  def bodies(self):
    return [body for _, body in self.requests]


def _write_jsonl(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    for row in rows:
      f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
  return path


def _app(title, body):
  return (f"Here it is.\n```html\n<!DOCTYPE html><html><head><title>{title}</title></head>"
          f"<body>{body}</body></html>\n```")


def _checklist(topic):
  return [{"id": k, "title": f"{topic} item {k}", "description": f"Checks {topic} part {k}",
           "maxScore": 10} for k in range(1, 11)]


# ArtifactsBench-lite rows (JSON Lines): index, question, checklist, class, difficulty.
AB_TASKS = [
    {"index": 1, "question": "Build a counter", "checklist": _checklist("counter"),
     "class": "Tools-Counter", "difficulty": "easy"},
    {"index": 2, "question": "Build a colour clock", "checklist": _checklist("clock"),
     "class": "Tools-Time", "difficulty": "hard"},
    {"index": 3, "question": "Build a maze game", "checklist": _checklist("maze"),
     "class": "Game Development-Puzzle", "difficulty": "hard"},
]
COUNTER = _app("Counter", '<h1 id="count">0</h1><button id="inc">+</button>')
CLOCK = _app("Clock", '<h1 id="c"></h1><script>setInterval(() => { document.getElementById'
             "('c').textContent = 'tick ' + Math.floor(performance.now() / 50); }, 20);"
             "</script>")
# Replies by request: the counter gets JSON in a fence, the clock the official phrasing
# plus an unrelated object, the maze (second response) an unparseable reply.
REPLIES = {"Build a counter": '```json\n{"scores": [{"id": 1, "score": 8}], "overall": 80}\n```',
           "Build a colour clock": 'Looks fine {"note": 1}. **Overall Score**: 55/100',
           "Build a maze game": "I cannot say."}


@pytest.mark.browser
class ArtifactsBenchTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.judge = FakeJudge(cls._respond)
    cls.dir = os.path.join(absltest.get_default_test_tmpdir(), f"bench-ab-{os.getpid()}")
    shutil.rmtree(cls.dir, ignore_errors=True)
    os.makedirs(cls.dir)
    cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
    cls.tasks = _write_jsonl(os.path.join(cls.dir, "lite.json"),
                             [*AB_TASKS, '{"index": 4, "question": "truncated'])
    cls.responses = _write_jsonl(os.path.join(cls.dir, "responses.jsonl"), [
        {"task_id": "artifactsbench-1", "sample_id": 0, "response": COUNTER},
        {"task_id": "artifactsbench-3", "sample_id": 0, "response": "No code, sorry."},
        {"task_id": "artifactsbench-2", "sample_id": 0, "response": CLOCK},
        "{not json",
        {"task_id": "artifactsbench-3", "sample_id": 1, "response": COUNTER},
        {"task_id": "artifactsbench-9", "sample_id": 0, "response": COUNTER},
    ])
    cls.out = os.path.join(cls.dir, "out")
    with mock.patch("sys.stderr", new_callable=io.StringIO) as err:
      cls.rc = cls._run()
    cls.stderr = err.getvalue()
    cls.first_requests = cls.judge.bodies

  @classmethod
  def tearDownClass(cls):
    cls.judge.close()
    super().tearDownClass()

  @classmethod
  def _run(cls):
    return bench_main.main([
        "artifactsbench", "--tasks", cls.tasks, "--responses", cls.responses,
        "--out", cls.out, "--judge-url", cls.judge.url, "--judge-model", "fake-vl",
        "--workers", "2", "--screenshots", "3", "--interval", "0.2",
        "--viewport", "1024x768"])

  @staticmethod
  def _respond(body):
    user = body["messages"][-1]["content"]
    text = user[0]["text"]
    images = [p["image_url"]["url"] for p in user if p["type"] == "image_url"]
    assert len(images) >= 3, f"{len(images)} screenshots"
    for url in images:
      assert url.startswith("data:image/png;base64,"), url[:40]
      png = base64.b64decode(url.split(",", 1)[1])
      assert png[:8] == PNG_SIGNATURE, "not a PNG"
      width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
      assert width >= 1024 and height >= 768, (width, height)
    question = next(q for q in REPLIES if q in text)
    topic = {"Build a counter": "counter", "Build a colour clock": "clock",
             "Build a maze game": "maze"}[question]
    assert f"{topic} item 10: Checks {topic} part 10" in text, "checklist missing"
    assert "<!DOCTYPE html>" in text and "</html>" in text, "code missing"
    return {"content": REPLIES[question]}

  def _records(self):
    with open(os.path.join(self.out, "results.jsonl"), encoding="utf-8") as f:
      return [json.loads(line) for line in f]

  def test_one_record_per_response_in_input_order(self):
    self.assertEqual(self.judge.failures, [])
    records = self._records()
    self.assertEqual([(r["task_id"], r["sample_id"]) for r in records],
                     [("artifactsbench-1", 0), ("artifactsbench-3", 0), ("artifactsbench-2", 0),
                      ("", -1), ("artifactsbench-3", 1), ("artifactsbench-9", 0)])
    self.assertEqual([r["status"] for r in records],
                     ["scored", "no_app", "scored", "bad_input", "unparseable", "bad_input"])
    self.assertEqual([r["score"] for r in records], [80.0, 0.0, 55.0, None, 0.0, None])
    self.assertEqual(records[0]["item_scores"], [{"id": "1", "score": 8.0}])
    self.assertIn("responses.jsonl:4: invalid JSON", records[3]["error"])
    self.assertIn("responses.jsonl:6: unknown task id 'artifactsbench-9'", records[5]["error"])
    self.assertEqual(self.rc, 0)

  def test_bad_rows_are_named_and_the_batch_goes_on(self):
    self.assertIn("lite.json:4: invalid JSON", self.stderr)
    self.assertIn("responses.jsonl:6: unknown task id", self.stderr)

  def test_screenshots_on_disk(self):
    record = self._records()[2]
    self.assertLen(record["screenshots"], 3)
    pngs = []
    for rel in record["screenshots"]:
      with open(os.path.join(self.out, rel), "rb") as f:
        pngs.append(f.read())
      self.assertEqual(pngs[-1][:8], PNG_SIGNATURE)
    self.assertLen(set(pngs), 3, "the clock ticks between screenshots")
    self.assertEqual(record["usage"],
                     {"requests": 1, "prompt_tokens": 100, "completion_tokens": 10})

  def test_summary_aggregates_by_category_and_difficulty(self):
    with open(os.path.join(self.out, "summary.json"), encoding="utf-8") as f:
      s = json.load(f)
    self.assertAlmostEqual(s["overall"], (80 + 0 + 55 + 0) / 4)
    self.assertAlmostEqual(s["official_overall"], (80 + 0 + 55) / 3)
    self.assertEqual(s["by_category"], {"Game Development": {"n": 2, "score": 0.0},
                                        "Tools": {"n": 2, "score": 67.5}})
    self.assertEqual(s["by_difficulty"], {"easy": {"n": 1, "score": 80.0},
                                          "hard": {"n": 3, "score": 55 / 3}})
    self.assertEqual(s["counts"], {"responses": 6, "bad_input": 2, "no_app": 1, "scored": 2,
                                   "unparseable": 1})
    with open(os.path.join(self.out, "summary.md"), encoding="utf-8") as f:
      md = f.read()
    self.assertIn("| Game Development | 2 | 0.00 |", md)

  def test_requests_no_app_and_unparseable_retries(self):
    questions = [next(q for q in REPLIES if q in r["messages"][-1]["content"][0]["text"])
                 for r in self.first_requests]
    # No request for the response without an app; the unparseable one is asked twice.
    self.assertEqual(sorted(questions), ["Build a colour clock", "Build a counter",
                                         "Build a maze game", "Build a maze game"])

  def test_rerun_skips_graded_responses(self):
    before = len(self.judge.requests)
    self.assertEqual(self._run(), 0)
    self.assertLen(self.judge.requests, before)
    self.assertEqual([r["status"] for r in self._records()],
                     ["scored", "no_app", "scored", "bad_input", "unparseable", "bad_input"])


class ParseReplyTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("bare", '{"scores": [{"id": 1, "score": 7}], "overall": 70}', 70.0, 1),
      ("fenced", 'ok\n```json\n{"overall": "64", "scores": []}\n```', 64.0, 0),
      ("items_only", '{"scores": [{"id": "a", "score": 10}, {"id": "b", "score": 5}]}', 75.0, 2),
      ("official", "Checklist review...\nOverall Score: 42", 42.0, 0),
      ("official_bold", "**Overall Score:** 88/100", 88.0, 0),
      ("clamped", '{"overall": 140}', 100.0, 0),
  )
  def test_parses(self, text, overall, n_items):
    reply = artifactsbench.parse_reply(text, max_total=20.0)
    self.assertEqual((reply.overall, len(reply.item_scores)), (overall, n_items))

  @parameterized.parameters("no score here", '{"note": "x"}', "")
  def test_unparseable(self, text):
    self.assertIsNone(artifactsbench.parse_reply(text, max_total=100.0))


class AppHtmlTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("html", COUNTER, '<h1 id="count">'),
      ("svg_fence", '```svg\n<svg width="9"><circle r="3"/></svg>\n```', '<svg width="9">'),
      ("raw_last_svg", '<svg id="a"></svg> then <SVG id="b">x</SVG> ok', '<SVG id="b">x</SVG>'),
      ("svg_in_thoughts_only", '<think><svg></svg></think>No picture.', None),
  )
  def test_app(self, response, part):
    html = artifactsbench.app_html(response)
    if part is None:
      self.assertIsNone(html)
    else:
      self.assertIn(part, html)


class TableTest(absltest.TestCase):

  def test_rows_side_by_side(self):
    root = self.create_tempdir().full_path
    summaries = {
        "base": {"overall": 9.0, "by_difficulty": {"easy": {"n": 1, "score": 9.0}},
                 "by_category": {"Tools": {"n": 1, "score": 9.0}}, "counts": {}},
        "rl": {"overall": 41.25, "by_difficulty": {"hard": {"n": 1, "score": 41.25}},
               "by_category": {}, "counts": {}},
        "sft_eval": {"pass_rate": 0.5, "reward_mean": 0.7,
                     "categories": {"Tools": {"pass_rate": 0.25}}},
    }
    dirs = []
    for name, summary in summaries.items():
      os.makedirs(os.path.join(root, name))
      with open(os.path.join(root, name, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f)
      dirs.append(os.path.join(root, name))
    header, rows = table.build(dirs)
    self.assertEqual(header, ["run", "overall", "difficulty: easy", "category: Tools",
                              "difficulty: hard", "reward_mean"])
    self.assertEqual(rows[2], ["sft_eval", 50.0, None, 25.0, None, 0.7])
    self.assertIn("| rl | 41.25 | – | – | 41.25 | – |", table.to_markdown(header, rows))
    self.assertEqual(table.to_csv(header, rows).splitlines()[1], "base,9.0000,9.0000,9.0000,,")
    csv_path = os.path.join(root, "t.csv")
    proc = subprocess.run([sys.executable, "-m", "rcca_jax.bench", "table", *dirs,
                           "--names", "base,RCCA,SFT", "--csv", csv_path],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    self.assertIn("| RCCA | 41.25 |", proc.stdout)
    with open(csv_path, encoding="utf-8") as f:
      self.assertEqual(f.read().splitlines()[3], "SFT,50.0000,,25.0000,,0.7000")

  def test_missing_summary_is_a_clear_error(self):
    d = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, "summary.json: cannot read"):
      table.build([d])


# MiniAppBench rows: query, eval_ref with intention/static/dynamic, domain, difficulty.
MB_TASKS = [{"id": "greet", "query": "A counter with a greeting box", "domain": "Tools",
             "difficulty": "Easy",
             "eval_ref": {"intention": ["The user can count and be greeted"],
                          "static": ["Shows Count: 0 and a name field"],
                          "dynamic": ["Clicking + shows Count: 1",
                                      "Typing a name shows Hello, NAME"]}}]
_MB_BODY = """<p id="count">Count: 0</p><button id="inc">+</button>
<input id="name" placeholder="your name"><p id="hello"></p><script>
let n = 0;
document.getElementById('inc').addEventListener('click', () => {
  %s
  document.getElementById('count').textContent = 'Count: ' + (++n);
});
document.getElementById('name').addEventListener('input', (e) => {
  document.getElementById('hello').textContent = 'Hello, ' + e.target.value;
});
</script>"""
WORKING = _app("Greeter", _MB_BODY % "")
BROKEN = _app("Greeter", _MB_BODY % "undefinedCounter.add(1);")


def scripted_agent(body):
  """A judge that finds the + button and the name field in the page text, clicks and
  types through tool calls, and decides from what the tool results report."""
  messages = body["messages"]
  assert body["tools"] and body["tool_choice"] == "auto", "tools missing"
  first = messages[1]["content"]
  assert any(p["type"] == "image_url" for p in first), "no screenshot"
  page = first[0]["text"]
  tool_results = [m["content"] for m in messages if m["role"] == "tool"]
  if not tool_results:
    ref = next(line.split("]")[0][1:] for line in page.splitlines()
               if 'button#inc "+"' in line)
    return {"content": "", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "click", "arguments": json.dumps({"target": ref})}},
        {"id": "c2", "type": "function",
         "function": {"name": "type", "arguments": json.dumps({"target": "#name",
                                                              "text": "Ada"})}}]}
  clicked, typed = tool_results
  verdict = {"intention": "Count: 1" in clicked and "Hello, Ada" in typed,
             "static": "Count: 0" in page and "input#name" in page,
             "dynamic": "+ Count: 1" in clicked and "+ Hello, Ada" in typed
                        and "New errors" not in clicked,
             "reason": clicked[:200]}
  return {"content": "", "tool_calls": [
      {"id": "c3", "type": "function",
       "function": {"name": "done", "arguments": json.dumps(verdict)}}]}


TOOLS_APP = _app("Tools", """<p id="key">no key</p><p id="drop">not dropped</p>
<p id="scroll">not scrolled</p>
<div id="box" style="position:absolute;left:50px;top:200px;width:60px;height:60px"></div>
<div style="height:3000px"></div><script>
addEventListener('keydown', (e) => {
  document.getElementById('key').textContent = 'key ' + e.key; });
const box = document.getElementById('box'); let drag = null;
box.addEventListener('mousedown', (e) => { drag = {x: e.clientX, left: box.offsetLeft}; });
addEventListener('mousemove', (e) => {
  if (drag) box.style.left = (drag.left + e.clientX - drag.x) + 'px'; });
addEventListener('mouseup', () => {
  if (drag) document.getElementById('drop').textContent = 'dropped at ' + box.offsetLeft;
  drag = null; });
addEventListener('scroll', () => { document.getElementById('scroll').textContent = 'scrolled'; });
</script>""")


def _call(k, name, **args):
  return {"id": f"c{k}", "type": "function",
          "function": {"name": name, "arguments": json.dumps(args)}}


def every_tool_agent(body):
  """Uses each tool once (and two that cannot work), then says what it saw."""
  results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
  if not results:
    return {"content": "", "tool_calls": [
        _call(1, "press", key="ArrowLeft"), _call(2, "drag", source="#box", dx=100),
        _call(3, "scroll", dy=400), _call(4, "wait", ms=50), _call(5, "read", target="#drop"),
        _call(6, "click", target="#nope"), _call(7, "fly")]}
  ok = ["+ key ArrowLeft" in results[0], "+ dropped at 150" in results[1],
        "+ scrolled" in results[2], results[3].startswith("ok"),
        results[4] == "p: 'dropped at 150'", results[5].startswith("error: no element"),
        results[6] == "error: unknown tool 'fly'"]
  return {"content": "", "tool_calls": [_call(8, "done", intention=all(ok), static=True,
                                              dynamic=all(ok), reason=str(ok))]}


def waiting_agent(body):
  """Never finishes on its own; answers `done` only when it is required."""
  if isinstance(body["tool_choice"], dict):
    assert body["tool_choice"]["function"]["name"] == "done", body["tool_choice"]
    return {"content": "", "tool_calls": [_call(9, "done", intention=True, static=True,
                                                dynamic=False)]}
  return {"content": "", "tool_calls": [_call(len(body["messages"]), "wait", ms=10)]}


@pytest.mark.browser
class MiniAppBenchTest(absltest.TestCase):

  def _run(self, respond, responses, *extra):
    judge = FakeJudge(respond)
    self.addCleanup(judge.close)
    root = self.create_tempdir().full_path
    tasks = _write_jsonl(os.path.join(root, "mini.jsonl"), MB_TASKS)
    path = _write_jsonl(os.path.join(root, "r.jsonl"), [
        {"task_id": "miniappbench-greet", "sample_id": k, "response": r}
        for k, r in enumerate(responses)])
    out = os.path.join(root, "out")
    rc = bench_main.main(["miniappbench", "--tasks", tasks, "--responses", path,
                          "--out", out, "--judge-url", judge.url, "--judge-model", "fake",
                          "--workers", "2", "--no-turn-screenshots", *extra])
    self.assertEqual(judge.failures, [])
    self.assertEqual(rc, 0)
    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
      return judge, records, json.load(f)

  def test_scripted_agent_sees_what_the_page_did(self):
    judge, (working, broken, no_app), s = self._run(scripted_agent,
                                                    [WORKING, BROKEN, "no app"])
    self.assertEqual(working["verdicts"], {"intention": True, "static": True, "dynamic": True})
    self.assertEqual((working["passed"], working["score"], working["turns"]), (True, 100.0, 2))
    self.assertEqual([a["tool"] for a in working["actions"]], ["click", "type"])
    self.assertEqual(broken["verdicts"], {"intention": False, "static": True, "dynamic": False})
    self.assertIn("undefinedCounter is not defined", broken["actions"][0]["result"])
    self.assertEqual((no_app["status"], no_app["score"]), ("no_app", 0.0))
    self.assertLen(judge.requests, 4)  # two turns per app, none without an app
    self.assertAlmostEqual(s["overall"], 100 / 3)
    self.assertAlmostEqual(s["dynamic"], 100 / 3)
    self.assertAlmostEqual(s["static"], 200 / 3)
    self.assertEqual(s["by_category"]["Tools"]["n"], 3)
    self.assertEqual(s["by_difficulty"]["easy"]["score"], 100 / 3)

  def test_every_tool_acts_on_the_page(self):
    _, (record,), _ = self._run(every_tool_agent, [TOOLS_APP])
    self.assertEqual(record["passed"], True, record["reason"])

  def test_turns_are_bounded_then_done_is_required(self):
    judge, (record,), _ = self._run(waiting_agent, [WORKING], "--max-turns", "2")
    self.assertLen(judge.requests, 3)
    self.assertEqual((record["turns"], record["status"], record["passed"]), (3, "scored", False))


# A project task file (docs/contracts.md#1-task-file) with executable checks (our corpus's
# shape).
COUNTER_TASK = {"id": "counter-0001", "request": "A counter with a greeting box",
                "category": "Tools", "difficulty": "easy", "rubrics": [
                    {"id": "r1", "kind": "initial", "level": "core", "text": "Starts at 0",
                     "check": 'expect text "#count" == "Count: 0"'},
                    {"id": "r2", "kind": "dynamic", "level": "core", "text": "+ counts",
                     "check": 'click "#inc"; expect text "#count" == "Count: 1"'}]}


def _scores(body):
  del body
  return {"content": '{"scores": [], "overall": 60}'}


class _CorpusRun(absltest.TestCase):
  """Runs artifactsbench on COUNTER_TASK with the working and the broken app."""

  def run_bench(self, *extra, respond=_scores):
    judge = FakeJudge(respond)
    self.addCleanup(judge.close)
    root = self.create_tempdir().full_path
    tasks = _write_jsonl(os.path.join(root, "tasks.jsonl"), [COUNTER_TASK])
    responses = _write_jsonl(os.path.join(root, "r.jsonl"), [
        {"task_id": "counter-0001", "sample_id": k, "response": app}
        for k, app in enumerate((WORKING, BROKEN))])
    args = ["artifactsbench", "--tasks", tasks, "--responses", responses,
            "--out", os.path.join(root, "out"), "--judge-url", judge.url,
            "--judge-model", "m", "--screenshots", "1", "--workers", "1", *extra]
    return judge, args, os.path.join(root, "out")


@pytest.mark.browser
class LimitsTest(_CorpusRun):

  def test_request_budget_leaves_the_rest_for_a_rerun(self):
    judge, args, out = self.run_bench()
    self.assertEqual(bench_main.main(args + ["--max-requests", "1"]), 1)
    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    self.assertEqual([r["status"] for r in records], ["scored", "judge_error"])
    self.assertIn("budget of 1 spent", records[1]["error"])
    self.assertEqual(bench_main.main(args), 0)
    self.assertLen(judge.requests, 2)  # the re-run asked only for the ungraded one

  def test_transport_errors_are_retried_a_bounded_number_of_times(self):
    def fail(body):
      raise AssertionError("down")
    judge, args, out = self.run_bench(respond=fail)
    self.assertEqual(bench_main.main(args + ["--judge-retries", "1"]), 1)
    self.assertLen(judge.requests, 4)  # two tries per response
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
    self.assertEqual(summary["counts"], {"responses": 2, "judge_error": 2})
    self.assertIsNone(summary["overall"])

  def test_hanging_apps_are_judged_on_what_could_be_taken(self):
    hang = _app("Hang", "<p>hi</p><script>while (true) {}</script>")
    late = _app("Late", "<p>hi</p><script>setTimeout(() => { while (true) {} }, 300);</script>")
    judge, args, out = self.run_bench(respond=lambda body: {"content": '{"overall": %d}' % len(
        [p for p in body["messages"][-1]["content"] if p["type"] == "image_url"])})
    responses = args[args.index("--responses") + 1]
    _write_jsonl(responses, [{"task_id": "counter-0001", "sample_id": k, "response": r}
                             for k, r in enumerate((hang, late))])
    args[args.index("--screenshots") + 1] = "3"
    self.assertEqual(bench_main.main(args + ["--workers", "2", "--interval", "0.5"]), 0)
    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
      hung, late_hung = [json.loads(line) for line in f]
    self.assertIn("page load did not finish", hung["render_errors"][0])
    self.assertEqual(hung["score"], len(hung["screenshots"]))  # the judge got what was taken
    self.assertTrue(any("did not finish" in e for e in late_hung["render_errors"]))
    self.assertLen(judge.requests, 2)

  def test_embedded_answers_without_a_responses_file(self):
    judge = FakeJudge(_scores)
    self.addCleanup(judge.close)
    root = self.create_tempdir().full_path
    tasks = _write_jsonl(os.path.join(root, "lite.json"),
                         [dict(AB_TASKS[0], answer="<think>hm</think>No code today.")])
    out = os.path.join(root, "out")
    self.assertEqual(bench_main.main(["artifactsbench", "--tasks", tasks, "--out", out,
                                      "--judge-url", judge.url, "--judge-model", "m"]), 0)
    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
      record = json.loads(f.read())
    self.assertEqual((record["task_id"], record["status"], record["score"]),
                     ("artifactsbench-1", "no_app", 0.0))
    self.assertEqual(judge.requests, [])

  def test_malformed_task_file_names_file_and_line(self):
    root = self.create_tempdir().full_path
    tasks = _write_jsonl(os.path.join(root, "t.jsonl"),
                         [COUNTER_TASK, dict(COUNTER_TASK, id="x", rubrics=[])])
    with mock.patch("sys.stderr", new_callable=io.StringIO) as err:
      rc = bench_main.main(["artifactsbench", "--tasks", tasks, "--out", root,
                            "--judge-url", "http://127.0.0.1:9", "--judge-model", "m"])
    self.assertEqual(rc, 2)
    self.assertIn("t.jsonl:2: 'rubrics' is empty", err.getvalue())


@pytest.mark.browser
class RubricsTest(_CorpusRun):

  def test_rubric_evaluator_next_to_the_benchmark_score(self):
    _, args, out = self.run_bench()
    self.assertEqual(bench_main.main(args + ["--rubrics"]), 0)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
    self.assertEqual(summary["overall"], 60.0)
    rubrics = summary["rubrics"]
    self.assertEqual(rubrics["overall"]["pass_rate"], 0.5)  # the broken + fails r2
    self.assertEqual(rubrics["category/Tools"]["n"], 2)
    self.assertEqual(rubrics["difficulty/easy"]["pass_rate"], 0.5)
    with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
      self.assertIn("RCCA rubric evaluator", f.read())
