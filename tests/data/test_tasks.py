"""Tests for task files: parsing, validation messages and canonical writing."""

import json
import os
import pickle
import tempfile

from unittest import mock

from absl.testing import absltest, parameterized

from rcca_jax.data import jsonl
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.base.dsl import Step


def rubric(**over):
  r = {"id": "r1", "kind": "dynamic", "level": "core", "text": "Clicking + shows 1",
       "check": 'click "#inc"; expect text "#count" == "1"'}
  r.update(over)
  return {k: v for k, v in r.items() if v is not _DROP}


def task(**over):
  t = {"id": "counter-0001", "request": "Build a counter", "category": "Tools",
       "difficulty": "easy",
       "rubrics": [rubric(id="r1", kind="initial", check='expect text "#count" == "0"'),
                   rubric(id="r2")]}
  t.update(over)
  return {k: v for k, v in t.items() if v is not _DROP}


_DROP = object()


class TasksTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.create_tempdir().full_path

  def write(self, lines) -> str:
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=self.tmp)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      for line in lines:
        f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path

  def errors(self, lines) -> tuple[str, list[str]]:
    path = self.write(lines)
    with self.assertRaises(tasks_lib.TaskFileError) as cm:
      tasks_lib.load_tasks(path)
    self.assertEqual(str(cm.exception), "\n".join(cm.exception.errors))
    return path, cm.exception.errors

  def test_load_valid_file(self):
    path = self.write([task(), "", "   ", task(id="t2", reference="<html></html>", tags=["x"])])
    loaded = tasks_lib.load_tasks(path)
    self.assertEqual([t.id for t in loaded], ["counter-0001", "t2"])
    t = loaded[0]
    self.assertEqual((t.category, t.difficulty, t.reference), ("Tools", "easy", None))
    self.assertEqual([r.id for r in t.rubrics], ["r1", "r2"])
    self.assertEqual(t.rubrics[0].kind, "initial")
    self.assertEqual(t.rubrics[1].steps, (
        Step("click", selector="#inc"),
        Step("expect", selector="#count", expect="text", op="==", value="1")))
    self.assertEqual(loaded[1].extra, {"tags": ["x"]})
    self.assertEqual(loaded[1].reference, "<html></html>")
    self.assertEqual(t.rubric_levels(), {"r1": "core", "r2": "core"})

  def test_rubric_without_check(self):
    t = tasks_lib.parse_task(task(rubrics=[rubric(check=_DROP)]))
    self.assertIsNone(t.rubrics[0].check)
    self.assertIsNone(t.rubrics[0].steps)

  def test_write_round_trips(self):
    original = [tasks_lib.parse_task(task(note={"a": 1}, rubrics=[
        rubric(check=_DROP, weight=2), rubric(id="r2", text="ünïcødé ✓ 😀")]))]
    path = os.path.join(self.tmp, "out.jsonl")
    tasks_lib.write_tasks(path, original)
    self.assertEqual(tasks_lib.load_tasks(path), original)
    with open(path, encoding="utf-8") as f:
      text = f.read()
    self.assertIn("ünïcødé ✓ 😀", text)                     # ensure_ascii=False
    self.assertEqual(list(json.loads(text)), ["id", "request", "category", "difficulty",
                                              "rubrics", "note"])
    tasks_lib.write_tasks(path, tasks_lib.load_tasks(path))
    with open(path, encoding="utf-8") as f:
      self.assertEqual(f.read(), text)                       # canonical: stable

  @parameterized.named_parameters(
      ("bad_json", '{"id": "t", "request": ', "invalid JSON at column 24"),
      ("not_object", "[1, 2]", "expected a JSON object, got array"),
      ("missing_id", task(id=_DROP), "missing 'id'"),
      ("empty_request", task(request="  "), "'request' is empty"),
      ("id_not_string", task(id=7), "'id' must be a string, got number"),
      ("rubrics_missing", task(rubrics=_DROP), "missing 'rubrics'"),
      ("rubrics_empty", task(rubrics=[]), "'rubrics' is empty"),
      ("rubrics_object", task(rubrics={}), "'rubrics' must be an array, got object"),
      ("rubric_not_object", task(rubrics=["r1"]), "rubric #1: expected an object, got string"),
      ("rubric_no_text", task(rubrics=[rubric(text=_DROP)]), "rubric r1: missing 'text'"),
      ("rubric_text_null", task(rubrics=[rubric(text=None)]),
       "rubric r1: 'text' must be a string, got null"),
      ("rubric_no_id", task(rubrics=[rubric(id=_DROP)]), "rubric #1: missing 'id'"),
      ("unknown_kind", task(rubrics=[rubric(kind="static")]),
       "rubric r1: unknown kind 'static' (allowed: initial, dynamic)"),
      ("unknown_level", task(rubrics=[rubric(level="ui")]),
       "rubric r1: unknown level 'ui' (allowed: core, behavior, rendering)"),
      ("duplicate_rubric", task(rubrics=[rubric(), rubric()]),
       "duplicate rubric id 'r1' (rubrics #1 and #2)"),
      ("category_number", task(category=3), "'category' must be a string or null, got number"),
      ("check_number", task(rubrics=[rubric(check=1)]),
       "rubric r1: 'check' must be a string or null, got number"),
      ("check_empty", task(rubrics=[rubric(check="")]), "rubric r1: check is empty"),
      ("duplicate_key", '{"id": "a", "id": "b"}', "duplicate key 'id'"),
      ("lone_surrogate", task(rubrics=[rubric(), rubric(id="r2", text="ab\udc00")]),
       "lone UTF-16 surrogate U+DC00 in 'rubrics[1].text' at character 2"),
  )
  def test_error_names_file_line_and_problem(self, line, message):
    path, errors = self.errors([task(id="ok"), line])
    self.assertTrue(any(e.startswith(f"{path}:2: ") and message in e for e in errors),
                    msg=errors)
    self.assertTrue(all(e.startswith(f"{path}:2: ") for e in errors), msg=errors)

  def test_dsl_syntax_error_message(self):
    bad = task(rubrics=[rubric(id="r1"), rubric(id="r2", check='click "#a"; expect txt "#b"')])
    path, errors = self.errors([bad])
    self.assertEqual(errors, [
        f"{path}:1: rubric r2: check: syntax error at column 20: unexpected 'txt'; expected an "
        "expectation (exists, visible, hidden, count, text, value, attr, style, number, js, "
        "no_errors)"])

  def test_dsl_error_on_later_check_line(self):
    bad = task(rubrics=[rubric(check='click "#a"\nexpect count "li" contains "2"')])
    _, errors = self.errors([bad])
    self.assertIn("rubric r1: check: syntax error at line 2, column 19: operator 'contains'",
                  errors[0])

  def test_initial_rubric_with_action(self):
    bad = task(rubrics=[rubric(kind="initial", check='wait 100; expect exists "#a"; click "#a"')])
    _, errors = self.errors([bad])
    self.assertLen(errors, 1)
    self.assertIn("rubric r1: an 'initial' rubric may only wait and expect, but its check has "
                  "'click' at column 31", errors[0])

  def test_initial_rubric_may_wait(self):
    t = tasks_lib.parse_task(task(rubrics=[rubric(kind="initial",
                                                  check='wait 50; expect visible "#a"')]))
    self.assertEqual(t.rubrics[0].steps[0], Step("wait", value=50.0))

  def test_duplicate_task_id_names_first_line(self):
    path, errors = self.errors([task(id="a"), task(id="b"), task(id="a")])
    self.assertEqual(errors, [f"{path}:3: duplicate task id 'a' (first at line 1)"])

  def test_all_errors_are_collected(self):
    path, errors = self.errors([
        task(id="a"),
        "not json",
        task(id="b", rubrics=[rubric(kind="x", level="y"), rubric(id="r2", check="clik")]),
        task(id="a"),
    ])
    self.assertLen(errors, 5, msg=errors)
    self.assertTrue(errors[0].startswith(f"{path}:2: invalid JSON at column 1"))
    self.assertTrue(errors[1].startswith(f"{path}:3: rubric r1: unknown kind 'x'"))
    self.assertTrue(errors[2].startswith(f"{path}:3: rubric r1: unknown level 'y'"))
    self.assertTrue(errors[3].startswith(f"{path}:3: rubric r2: check: syntax error at column 1"))
    self.assertEqual(errors[4], f"{path}:4: duplicate task id 'a' (first at line 1)")

  def test_invalid_utf8(self):
    path = self.write([task(id="a")])
    with open(path, "ab") as f:
      f.write(b'{"id": "\xff"}\n')
    with self.assertRaises(tasks_lib.TaskFileError) as cm:
      tasks_lib.load_tasks(path)
    self.assertEqual(cm.exception.errors, [f"{path}:2: not valid UTF-8 at byte 9"])

  def test_oversized_line(self):
    path = self.write([task(id="a"), task(id="b", request="x" * 2000), task(id="c")])
    with mock.patch.object(jsonl, "MAX_LINE_BYTES", 1024):
      with self.assertRaises(tasks_lib.TaskFileError) as cm:
        tasks_lib.load_tasks(path)
    self.assertEqual(cm.exception.errors,
                     [f"{path}:2: line longer than 1024 bytes (skipped)"])

  def test_parse_task_where(self):
    with self.assertRaises(tasks_lib.TaskFileError) as cm:
      tasks_lib.parse_task(task(id=""), where="x.jsonl:5")
    self.assertEqual(cm.exception.errors, ["x.jsonl:5: 'id' is empty"])
    with self.assertRaises(tasks_lib.TaskFileError):
      tasks_lib.parse_task([], where="x")

  def test_error_pickles(self):
    error = tasks_lib.TaskFileError(["a:1: x", "a:2: y"])
    copy = pickle.loads(pickle.dumps(error))
    self.assertEqual((copy.errors, str(copy)), (error.errors, str(error)))

  def test_empty_file(self):
    self.assertEqual(tasks_lib.load_tasks(self.write([])), [])


if __name__ == "__main__":
  absltest.main()
