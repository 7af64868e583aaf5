"""Failure causes of graded responses (`evaluation.failures`): apps with one known
fault each, graded in a real browser, get that fault's cause; the table and CLI."""

import json
import os

import pytest
from absl.testing import absltest

from rcca_jax.credit import blame_table
from rcca_jax.credit.localize import localize_record
from rcca_jax.data import chat
from rcca_jax.data import draws
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import failures
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from rcca_jax.evaluation.record import UNSCORABLE


def fenced(html: str) -> str:
  return f"```html\n{html}\n```"


def counter_task() -> tasks_lib.Task:
  return draws.fresh_splits(("counter",), 0, 1, 0, frozenset())["dev"][0]


def faults(task: tasks_lib.Task) -> dict[str, str]:
  """The reference with one known fault each, by the cause it should be classified as."""
  ref = task.reference
  assert 'addEventListener("click"' in ref and "const START = " in ref
  display = ref.split('<div id="', 1)[1].split('"', 1)[0]
  start = ref.split("const START = ", 1)[1].split(";", 1)[0]
  return {
      # the script looks up the display by an id the page does not have
      "runtime_null_element": ref.replace(f'<div id="{display}"', '<div id="shown"', 1),
      # every button listens for a double click only
      "no_handler": ref.replace('addEventListener("click"', 'addEventListener("dblclick"'),
      # the counter starts elsewhere
      "wrong_value": ref.replace(f"const START = {start};", f"const START = {start}1;", 1),
  }


@pytest.mark.browser
class BrowserFailuresTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.ev = Evaluator(EvalConfig())

  @classmethod
  def tearDownClass(cls):
    cls.ev.close()
    super().tearDownClass()

  def test_each_known_fault_gets_its_cause(self):
    task = counter_task()
    records = []
    for i, (cause, html) in enumerate(faults(task).items()):
      record = self.ev.evaluate(task, fenced(html), i).to_json()
      records.append(record)
      got = failures.classify(record, task)
      self.assertFalse(got["passed"], cause)
      if cause.startswith("runtime"):
        self.assertEqual((got["gate"], got["rubrics"]), (cause, []), record)
      else:
        self.assertIsNone(got["gate"])
        self.assertTrue(got["rubrics"], record)
        dynamic = [c for _, kind, _, c in got["rubrics"] if kind == "dynamic"]
        if cause == "no_handler":  # every interaction finds no click listener
          self.assertEqual(set(dynamic), {"no_handler"}, got)
        else:
          self.assertIn(cause, {c for *_, c in got["rubrics"]}, got)
    good = self.ev.evaluate(task, fenced(task.reference), 9).to_json()
    self.assertEqual(failures.classify(good, task), {"passed": True, "gate": None,
                                                     "rubrics": []})
    counts = failures.tally(records + [good], {task.id: task})
    self.assertEqual(counts["all"]["responses"], 4)
    self.assertEqual(counts["all"]["passed"], 1)
    self.assertEqual(counts["all"]["gates"], {"runtime_null_element": 1})
    self.assertEqual(list(counts), ["counter", "all"])

    # The blame table of the same responses, localized as every evaluation is: each
    # row's differing lines are exactly the lines its fault changed.
    d = self.create_tempdir().full_path
    apps = list(faults(task).values()) + [task.reference]
    records = [localize_record(r, fenced(html)) for r, html in zip(records, apps)]
    with open(os.path.join(d, "responses.jsonl"), "w", encoding="utf-8") as f:
      for i, html in zip((0, 1, 2, 9), apps):
        f.write(json.dumps({"task_id": task.id, "sample_id": i,
                            "response": fenced(html)}) + "\n")
    with open(os.path.join(d, "evaluations.jsonl"), "w", encoding="utf-8") as f:
      for record in records + [good]:
        f.write(json.dumps(record) + "\n")
    table = blame_table.rows(d, {task.id: task}, n=20, seed=0)
    self.assertEqual([r["sample_id"] for r in table], [0, 1, 2])  # the passing one left out
    reference = set(task.reference.splitlines())
    for row, html in zip(table, apps):
      changed = [line for line in html.splitlines() if line not in reference]
      self.assertEqual(row["differing"], changed, row)
      self.assertTrue(row["blamed"], row)
    self.assertEqual([r["cause"] for r in table],
                     ["runtime_null_element", "no_handler", "wrong_value"])
    self.assertTrue(table[1]["blame_on_difference"], table[1])  # the dblclick lines
    self.assertIn("| blame on a difference |", blame_table.markdown(table))


class DifferingLinesTest(absltest.TestCase):

  def test_offsets_of_lines_not_in_the_reference(self):
    reference = chat.format_response("<p>a</p>\n<p>b</p>")
    response = "```html\n<p>a</p>\n  <p>c</p>\n\n<p>b</p>\n```"
    spans = blame_table.differing_lines(response, reference)
    self.assertEqual([response[a:b] for a, b in spans], ["  <p>c</p>"])


class RecordFailuresTest(absltest.TestCase):
  """Records as the evaluator writes them, for the causes the browser test leaves out."""

  TASK = tasks_lib.parse_task({
      "id": "t-00000", "request": "r",
      "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "a",
                   "check": 'expect text "#a" == "1"'},
                  {"id": "r2", "kind": "initial", "level": "rendering", "text": "b",
                   "check": 'expect style "#a" "color" == "red"'},
                  {"id": "r3", "kind": "initial", "level": "behavior", "text": "c",
                   "check": 'expect visible "#a"'}]})

  def record(self, **fields):
    base = {"task_id": "t-00000", "sample_id": 0, "reward": 0.2,
            "gates": {"format": True, "source": True, "runtime": True},
            "rubrics": [{"id": r, "passed": True} for r in ("r1", "r2", "r3")],
            "issues": []}
    return {**base, **fields}

  def test_causes(self):
    issues = [
        {"stage": "rubric", "rubric_id": "r1", "message": "expect text: no element matches '#a'",
         "evidence": {"step": 'expect text "#a" == "1"', "path": ['expect text "#a" == "1"']}},
        {"stage": "rubric", "rubric_id": "r2", "message": "expected style color ...",
         "evidence": {"step": 'expect style "#a" color == "red"', "expected": "red",
                      "path": ['expect style "#a" color == "red"']}},
        {"stage": "rubric", "rubric_id": "r3", "message": "expected '#a' to be visible",
         "evidence": {"step": 'expect visible "#a"', "expected": "visible",
                      "path": ['expect visible "#a"']}}]
    record = self.record(rubrics=[{"id": r, "passed": False} for r in ("r1", "r2", "r3")],
                         issues=issues)
    self.assertEqual(failures.classify(record, self.TASK)["rubrics"], [
        ("r1", "initial", "core", "missing_element"),
        ("r2", "initial", "rendering", "wrong_style"),
        ("r3", "initial", "behavior", "wrong_visibility")])

  def test_gates_and_unscorable(self):
    for gates, message, cause in (
        ({"format": False, "source": None, "runtime": None}, "", "format"),
        ({"format": True, "source": False, "runtime": None}, "", "source"),
        ({"format": True, "source": True, "runtime": False},
         "uncaught exception during load: ReferenceError: x is not defined", "runtime_reference"),
        ({"format": True, "source": True, "runtime": False},
         "uncaught exception during load: SyntaxError: Unexpected token", "runtime_syntax"),
        ({"format": True, "source": True, "runtime": False}, "did not finish", "runtime_other")):
      record = self.record(gates=gates, issues=[{"stage": "runtime", "message": message}])
      self.assertEqual(failures.classify(record, self.TASK)["gate"], cause)
    record = self.record(**{UNSCORABLE: "grading_failed", "reward": None})
    self.assertEqual(failures.classify(record, self.TASK)["gate"], "unscorable")

  def test_cli_table_and_json(self):
    d = self.create_tempdir().full_path
    tasks_lib.write_tasks(os.path.join(d, "tasks.jsonl"), [self.TASK])
    with open(os.path.join(d, "evaluations.jsonl"), "w", encoding="utf-8") as f:
      f.write(json.dumps(self.record()) + "\n")
      f.write(json.dumps(self.record(gates={"format": False})) + "\n")
    out = os.path.join(d, "counts.json")
    self.assertEqual(failures.main([d, "--tasks", os.path.join(d, "tasks.jsonl"),
                                    "--json", out]), 0)
    with open(out, encoding="utf-8") as f:
      counts = json.load(f)
    self.assertEqual(counts["all"], {"responses": 2, "passed": 1, "gates": {"format": 1},
                                     "rubrics": {}})
    self.assertIn("| t | 2 | 1 | 1 |", failures.markdown(counts))
    with open(os.path.join(d, "evaluations.jsonl"), "a", encoding="utf-8") as f:
      f.write("{not json\n")
    with self.assertRaisesRegex(ValueError, r"evaluations.jsonl:3: not JSON"):
      failures.read_records(d)


if __name__ == "__main__":
  absltest.main()
