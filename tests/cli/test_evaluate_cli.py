"""`python -m rcca_jax.evaluate` end to end (docs/contracts.md#4-evaluation) in a
subprocess."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from absl.testing import absltest
import pytest

from rcca_jax.data import jsonl

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "data" / "examples"


def _run(*args, timeout=300):
  return subprocess.run([sys.executable, "-m", "rcca_jax.evaluate", *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout, check=False)


class MalformedInputTest(absltest.TestCase):

  def test_malformed_task_file_exits_2_with_file_and_line(self):
    with tempfile.TemporaryDirectory() as tmp:
      tasks = os.path.join(tmp, "tasks.jsonl")
      good = (EXAMPLES / "tasks.jsonl").read_text().splitlines()[0]
      bad_kind = json.loads(good)
      bad_kind["id"] = "other"
      bad_kind["rubrics"][0]["kind"] = "sometimes"
      bad_dsl = json.loads(good)
      bad_dsl["id"] = "third"
      bad_dsl["rubrics"][1]["check"] = 'click "#inc" expect'
      with open(tasks, "w") as f:
        f.write("\n".join([good, "{oops", json.dumps(bad_kind), json.dumps(bad_dsl)]) + "\n")
      out = os.path.join(tmp, "out.jsonl")
      proc = _run("--tasks", tasks, "--responses", str(EXAMPLES / "responses.jsonl"),
                  "--out", out, "--no-localize")
      self.assertEqual(proc.returncode, 2)
      self.assertIn(f"{tasks}:2:", proc.stderr)
      self.assertIn(f"{tasks}:3:", proc.stderr)
      self.assertIn("sometimes", proc.stderr)
      self.assertIn(f"{tasks}:4:", proc.stderr)
      self.assertIn("column", proc.stderr)
      self.assertFalse(os.path.exists(out))

  def test_unknown_config_key_exits_2(self):
    with tempfile.TemporaryDirectory() as tmp:
      config = os.path.join(tmp, "c.json")
      with open(config, "w") as f:
        json.dump({"no_such_key": 1}, f)
      proc = _run("--tasks", str(EXAMPLES / "tasks.jsonl"), "--responses",
                  str(EXAMPLES / "responses.jsonl"), "--out", os.path.join(tmp, "o"),
                  "--config", config)
      self.assertEqual(proc.returncode, 2)
      self.assertIn("no_such_key", proc.stderr)


@pytest.mark.browser
class CliRunTest(absltest.TestCase):

  def _grade(self, lines, *flags):
    """Grades `lines` as a responses file against the example tasks; (process, output
    records, responses path)."""
    tmp = self.create_tempdir().full_path
    path = os.path.join(tmp, "responses.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n")
    out = os.path.join(tmp, "out.jsonl")
    proc = _run("--tasks", str(EXAMPLES / "tasks.jsonl"), "--responses", path, "--out", out,
                *flags)
    self.assertEqual(proc.returncode, 0, proc.stderr)
    with open(out, encoding="utf-8") as f:
      return proc, [json.loads(line) for line in f], path

  def test_records_in_order_with_bad_lines_and_summary(self):
    responses = (EXAMPLES / "responses.jsonl").read_text().splitlines()
    picked = [responses[0], responses[5], responses[10]]
    lines = [picked[0], "[1, 2]", picked[1],
             json.dumps({"task_id": "missing-task", "sample_id": 3, "response": "x"}),
             json.dumps({"task_id": "counter-0001", "sample_id": "zero", "response": "x"}),
             picked[2]]
    proc, records, _ = self._grade(lines, "--workers", "2")
    self.assertLen(records, 6)
    self.assertEqual([r.get("task_id") for r in records[:3:2]], ["counter-0001", "counter-0001"])
    self.assertEqual(records[0]["reward"], 1.0)
    self.assertEqual(records[2]["reward"], 0.0)  # "no html" variant: format gate
    self.assertIn(":2:", records[1]["error"])
    self.assertIn("unknown task id", records[3]["error"])
    self.assertEqual(records[3]["sample_id"], 3)
    self.assertIn("error", records[4])
    self.assertEqual(records[5]["task_id"], "temp-0001")
    self.assertEqual(records[5]["reward"], 0.6)
    # Localization ran in the workers: rubric issues carry direct and context spans.
    issue = next(i for i in records[5]["issues"] if i["stage"] == "rubric")
    self.assertTrue(issue["direct"])
    summary = proc.stdout.strip().splitlines()[-1]
    self.assertIn("evaluated 6 responses", summary)
    self.assertIn("mean reward 0.2667", summary)
    self.assertIn("errors 3", summary)
    for key in ("task_id", "sample_id", "reward", "gates", "rubric_score", "rubrics",
                "html_span", "issues"):
      self.assertIn(key, records[0])

  def test_unencodable_and_oversized_lines_are_per_line_errors(self):
    good = (EXAMPLES / "responses.jsonl").read_text().splitlines()[0]
    html = json.loads(good)["response"].replace("<title>Counter", "<title>Counter \ud800")
    lines = [json.dumps({"task_id": "counter-0001", "sample_id": 7, "response": html}),
             '{"task_id": "counter-0001\\udc80", "sample_id": 8, "response": "x"}',
             json.dumps({"task_id": "counter-0001", "sample_id": 9,
                         "response": "x" * (jsonl.MAX_LINE_BYTES + 10)}),
             good]
    proc, records, path = self._grade(lines, "--no-localize")
    self.assertLen(records, 4)
    self.assertEqual([r.get("error", "")[:len(path) + 3] for r in records[:3]],
                     [f"{path}:{n}:" for n in (1, 2, 3)])
    self.assertIn("lone UTF-16 surrogate U+D800 in 'response'", records[0]["error"])
    self.assertIn("lone UTF-16 surrogate U+DC80 in 'task_id'", records[1]["error"])
    self.assertIn(f"line longer than {jsonl.MAX_LINE_BYTES} bytes", records[2]["error"])
    self.assertEqual((records[3]["task_id"], records[3]["reward"]), ("counter-0001", 1.0))
    self.assertIn("errors 3", proc.stdout)


if __name__ == "__main__":
  absltest.main()
