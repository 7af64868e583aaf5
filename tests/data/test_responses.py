"""Tests for response files: every line yields an item or a described bad line."""

import json
import os

from unittest import mock

from absl.testing import absltest, parameterized

from rcca_jax.data import jsonl
from rcca_jax.data.responses import BadResponseLine, ResponseItem, load_responses


class ResponsesTest(parameterized.TestCase):

  def load(self, lines):
    path = os.path.join(self.create_tempdir().full_path, "responses.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      for line in lines:
        f.write((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n")
    return path, load_responses(path)

  def test_valid_lines(self):
    _, items = self.load([
        {"task_id": "t1", "sample_id": 3, "response": "```html\n<p>😀</p>\n```"},
        "",
        {"task_id": "t2", "response": "", "extra": 1},
    ])
    self.assertEqual(items, [
        ResponseItem("t1", 3, "```html\n<p>😀</p>\n```", 1),
        ResponseItem("t2", 0, "", 3),
    ])

  @parameterized.named_parameters(
      ("invalid_json", '{"task_id": "t", ', None, None, "invalid JSON at column 18"),
      ("not_object", '"hello"', None, None, "expected a JSON object, got string"),
      ("missing_task_id", {"sample_id": 2, "response": "x"}, None, 2, "missing 'task_id'"),
      ("task_id_number", {"task_id": 5, "response": "x"}, None, 0,
       "'task_id' must be a non-empty string, got number 5"),
      ("missing_response", {"task_id": "t", "sample_id": 1}, "t", 1, "missing 'response'"),
      ("response_null", {"task_id": "t", "response": None}, "t", 0,
       "'response' must be a string, got null"),
      ("float_sample_id", {"task_id": "t", "sample_id": 1.5, "response": "x"}, "t", None,
       "'sample_id' must be an integer, got number 1.5"),
      ("string_sample_id", {"task_id": "t", "sample_id": "1", "response": "x"}, "t", None,
       "'sample_id' must be an integer, got string '1'"),
      ("bool_sample_id", {"task_id": "t", "sample_id": True, "response": "x"}, "t", None,
       "'sample_id' must be an integer, got boolean True"),
      ("lone_surrogate_response", '{"task_id": "t", "response": "<p>\\ud800</p>"}', None,
       None, "lone UTF-16 surrogate U+D800 in 'response' at character 3 (not encodable"),
      ("lone_surrogate_task_id", '{"task_id": "t\\uDC80", "response": "x"}', None, None,
       "lone UTF-16 surrogate U+DC80 in 'task_id' at character 1"),
      ("reversed_pair", '{"task_id": "t", "response": "\\ude00\\ud83d"}', None, None,
       "lone UTF-16 surrogate U+DE00 in 'response' at character 0"),
      ("surrogate_key", '{"task_id": "t", "response": "x", "\\ud800": 1}', None, None,
       "lone UTF-16 surrogate U+D800 in a key of the object at character 0"),
  )
  def test_bad_line(self, line, task_id, sample_id, message):
    good = {"task_id": "ok", "response": "r"}
    path, items = self.load([good, line, good])
    self.assertLen(items, 3)
    self.assertIsInstance(items[0], ResponseItem)
    self.assertIsInstance(items[2], ResponseItem)
    self.assertEqual(items[2].line, 3)
    bad = items[1]
    self.assertIsInstance(bad, BadResponseLine)
    self.assertEqual((bad.line, bad.task_id, bad.sample_id), (2, task_id, sample_id))
    self.assertTrue(bad.error.startswith(f"{path}:2: "), msg=bad.error)
    self.assertIn(message, bad.error)

  def test_several_problems_in_one_line(self):
    path, (bad,) = self.load([{"sample_id": "x"}])
    self.assertEqual(bad.error, f"{path}:1: missing 'task_id'; 'sample_id' must be an integer, "
                                "got string 'x'; missing 'response'")

  def test_escaped_surrogate_pair_is_valid(self):
    _, items = self.load(['{"task_id": "t", "response": "\\ud83d\\ude00"}'])
    self.assertEqual(items, [ResponseItem("t", 0, "\U0001F600", 1)])

  def test_oversized_lines(self):
    at_limit = json.dumps({"task_id": "t", "response": ""})
    at_limit = at_limit[:-1] + " " * (64 - len(at_limit)) + "}"
    self.assertLen(at_limit, 64)
    long = json.dumps({"task_id": "t", "response": "x" * 200})
    with mock.patch.object(jsonl, "MAX_LINE_BYTES", 64):
      path, items = self.load([at_limit, long, at_limit + " ", at_limit])
      with open(path, "ab") as f:
        f.write(long.encode())  # the last line, without its newline
      items = load_responses(path)
    self.assertEqual([type(i).__name__ for i in items],
                     ["ResponseItem", "BadResponseLine", "BadResponseLine", "ResponseItem",
                      "BadResponseLine"])
    self.assertEqual([i.line for i in items], [1, 2, 3, 4, 5])
    self.assertEqual(items[1].error, f"{path}:2: line longer than 64 bytes (skipped)")

  def test_invalid_utf8_line(self):
    path, _ = self.load([{"task_id": "a", "response": "x"}])
    with open(path, "ab") as f:
      f.write(b'{"task_id": "\xc3"}\n')
    items = load_responses(path)
    self.assertIsInstance(items[1], BadResponseLine)
    self.assertIn(f"{path}:2: not valid UTF-8", items[1].error)


if __name__ == "__main__":
  absltest.main()
