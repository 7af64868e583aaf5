"""ArtifactsBench and MiniAppBench loaders on small fixtures written in their formats."""

import json
import os
import tempfile

from absl.testing import absltest

from rcca_jax.data import artifactsbench
from rcca_jax.data import miniappbench
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib


def _checklist(n=10):
  items = [{"id": 1, "title": "Start button", "description": "Clicking Start begins the game",
            "maxScore": 10},
           {"id": 2, "title": "Visual design", "description": "Colours and layout are pleasant",
            "maxScore": 10},
           {"id": 3, "title": "Robustness", "description": "No errors on invalid input",
            "maxScore": 10},
           {"id": 4, "title": "Board", "description": "A 10x10 grid is shown", "maxScore": 10}]
  return [dict(items[k % len(items)], id=k + 1) for k in range(n)]


def _write(lines, suffix=".json"):
  fd, path = tempfile.mkstemp(suffix=suffix)
  with os.fdopen(fd, "w", encoding="utf-8") as f:
    f.write("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
  return path


class ArtifactsBenchTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    good = {"index": 7, "question": "Make a snake game", "checklist": _checklist(10),
            "class": "Game Development-Arcade", "difficulty": "hard",
            "answer": "<think>plan it</think>\n```html\n<html><body>hi</body></html>\n```"}
    other = {"index": 8, "question": "A clock", "checklist": _checklist(4),
             "class": "Tools-Time", "difficulty": "Easy", "model_infer_result": "<html></html>"}
    self.path = _write([good, "{not json", {"index": 9, "question": "", "checklist": []},
                        other, dict(other, question="again"),
                        {"index": 10, "question": "Q", "checklist": ["oops", {"id": 1}]}])
    self.addCleanup(os.unlink, self.path)

  def test_items_become_judge_graded_tasks(self):
    loaded = artifactsbench.load(self.path)
    self.assertEqual([t.id for t in loaded.tasks], ["artifactsbench-7", "artifactsbench-8"])
    task = loaded.tasks[0]
    self.assertEqual((task.category, task.difficulty, task.extra["class"]),
                     ("Game Development", "hard", "Game Development-Arcade"))
    self.assertLen(task.rubrics, 10)
    self.assertTrue(all(r.check is None for r in task.rubrics))
    by_text = {r.text.split(":")[0]: (r.kind, r.level) for r in task.rubrics[:4]}
    self.assertEqual(by_text["Start button"], ("dynamic", "core"))
    self.assertEqual(by_text["Visual design"], ("initial", "rendering"))
    self.assertEqual(by_text["Robustness"], ("dynamic", "behavior"))
    self.assertEqual(by_text["Board"], ("initial", "core"))
    self.assertEqual(task.rubrics[0].extra["max_score"], 10)
    self.assertEqual(loaded.tasks[1].difficulty, "easy")

  def test_answers_drop_thinking(self):
    loaded = artifactsbench.load(self.path)
    self.assertEqual(loaded.answers["artifactsbench-7"],
                     "```html\n<html><body>hi</body></html>\n```")
    self.assertEqual(loaded.answers["artifactsbench-8"], "<html></html>")

  def test_problems_name_file_and_line(self):
    problems = artifactsbench.load(self.path).problems
    self.assertTrue(any(p.startswith(f"{self.path}:2: invalid JSON") for p in problems), problems)
    self.assertTrue(any(p.startswith(f"{self.path}:3: missing or empty 'question'")
                        for p in problems), problems)
    self.assertTrue(any(p.startswith(f"{self.path}:5: duplicate task id 'artifactsbench-8'")
                        for p in problems), problems)
    self.assertTrue(any(p.startswith(f"{self.path}:6: checklist item 1: expected an object")
                        for p in problems), problems)
    self.assertTrue(any(p.startswith(f"{self.path}:6: no readable checklist items")
                        for p in problems), problems)

  def test_written_files_load_back(self):
    with tempfile.TemporaryDirectory() as d:
      tasks_out, resp_out = os.path.join(d, "t.jsonl"), os.path.join(d, "r.jsonl")
      self.assertEqual(artifactsbench.main([self.path, "--tasks-out", tasks_out,
                                            "--responses-out", resp_out]), 0)
      self.assertLen(tasks_lib.load_tasks(tasks_out), 2)
      items = responses_lib.load_responses(resp_out)
      self.assertEqual([(r.task_id, r.sample_id) for r in items],
                       [("artifactsbench-7", 0), ("artifactsbench-8", 0)])

  def test_json_array_file(self):
    path = _write([json.dumps([{"index": 1, "question": "Q", "checklist": _checklist(2)}, 5])])
    self.addCleanup(os.unlink, path)
    loaded = artifactsbench.load(path)
    self.assertLen(loaded.tasks, 1)
    self.assertEqual(loaded.problems, [f"{path}:item 2: expected a JSON object, got number; "
                                       "skipped"])


class MiniAppBenchTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    a = {"id": "m1", "query": "Build a pendulum simulator",
         "eval_ref": {"intention": ["The user can watch a pendulum swing"],
                      "static": ["A canvas is present", "Colour scheme is consistent"],
                      "dynamic": ["Clicking reset restarts the motion",
                                  "No errors when length is set to 0"]},
         "domain": "Science", "subclass": "Physics", "difficulty": "Mid",
         "answer": "<think>x</think><html>app</html>"}
    b = {"task_id": 2, "Prompt": "A word game",
         "evaluation_reference": {"Intention": [{"description": "Player can guess words"}],
                                  "Static": [{"text": "Shows a keyboard"}], "Dynamic": "Typing a "
                                  "letter fills the next box", "notes": "x"},
         "category": "Games", "sub_category": "Puzzle", "level": "Hard"}
    c = {"query": "Only intention", "eval_ref": {"intention": ["Works"], "static": 3}}
    self.path = _write([a, b, c, {"query": "no ref"}, {"eval_ref": {"static": ["x"]}}],
                       suffix=".jsonl")
    self.addCleanup(os.unlink, self.path)

  def test_field_spellings_and_mapping(self):
    loaded = miniappbench.load(self.path)
    self.assertEqual([t.id for t in loaded.tasks],
                     ["miniappbench-m1", "miniappbench-2", "miniappbench-3"])
    a, b, c = loaded.tasks
    self.assertEqual((a.category, a.difficulty, a.extra["subclass"]), ("Science", "medium",
                                                                       "Physics"))
    self.assertEqual([(r.id, r.kind, r.level) for r in a.rubrics],
                     [("intention-1", "initial", "core"), ("static-1", "initial", "core"),
                      ("static-2", "initial", "rendering"), ("dynamic-1", "dynamic", "behavior"),
                      ("dynamic-2", "dynamic", "behavior")])
    self.assertTrue(all(r.check is None for r in a.rubrics))
    self.assertEqual((b.category, b.difficulty, b.extra["subclass"]), ("Games", "hard", "Puzzle"))
    self.assertEqual([r.text for r in b.rubrics], ["Player can guess words", "Shows a keyboard",
                                                   "Typing a letter fills the next box"])
    self.assertEqual(b.rubrics[0].kind, "dynamic")  # an intention about playing
    self.assertLen(c.rubrics, 1)
    self.assertEqual(loaded.answers, {"miniappbench-m1": "<html>app</html>"})

  def test_problems_are_reported_and_reading_continues(self):
    problems = miniappbench.load(self.path).problems
    expect = [f"{self.path}:2: ignored evaluation-reference fields: notes",
              f"{self.path}:3: 'static' is number, expected a list; skipped",
              f"{self.path}:3: evaluation reference has no 'dynamic' list",
              f"{self.path}:4: no evaluation reference",
              f"{self.path}:5: no query"]
    for e in expect:
      self.assertTrue(any(p.startswith(e) for p in problems), (e, problems))


if __name__ == "__main__":
  absltest.main()
