"""Tests for rcca_jax.data.train_tokenizer and the shipped data/tokenizer."""

import contextlib
import io
import json
import os

from absl.testing import absltest
from transformers import AutoTokenizer

from rcca_jax.data import train_tokenizer

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_APP = ("<!DOCTYPE html><html><head><style>#n{color:red}</style></head><body>"
        "<span id=\"n\">0</span><button id=\"inc\">+</button><script>let n = 0;"
        "document.getElementById('inc').addEventListener('click', () => {"
        " n += 1; document.getElementById('n').textContent = n; });</script></body></html>")


def _write_tasks(path, n=4):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(n):
      f.write(json.dumps({"id": f"t{i}", "request": f"Build counter {i} 😀 计数器",
                          "reference": _APP.replace("0<", f"{i}<"), "rubrics": []}) + "\n")


class TrainTokenizerTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    self.tasks = os.path.join(self.dir, "tasks.jsonl")
    _write_tasks(self.tasks)

  def _run(self, out, *extra):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
      rc = train_tokenizer.main(["--inputs", self.tasks, *extra, "--out", out, "--vocab-size", "400"])
    return rc, err.getvalue()

  def test_cli_output_loads_with_special_tokens_and_offsets(self):
    out = os.path.join(self.dir, "tok")
    self.assertEqual(self._run(out)[0], 0)
    tok = AutoTokenizer.from_pretrained(out)
    self.assertEqual(tok.eos_token, "<|end|>")
    self.assertEqual(tok.pad_token, "<|pad|>")
    ids = tok.convert_tokens_to_ids(["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>"])
    self.assertEqual(ids, [0, 1, 2, 3])
    enc = tok("<|user|>hi<|end|>", add_special_tokens=False)
    self.assertEqual(enc["input_ids"][0], 2)
    self.assertEqual(enc["input_ids"][-1], 1)
    text = _APP + " 😀 中文"
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    self.assertEqual(tok.decode(enc["input_ids"]), text)
    # Offsets cover every character (whitespace included) in order.
    covered = set()
    for s, e in enc["offset_mapping"]:
      covered.update(range(s, e))
    self.assertEqual(covered, set(range(len(text))))
    self.assertLess(len(enc["input_ids"]), len(text.encode()) // 2)

  def test_deterministic(self):
    a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
    self._run(a)
    self._run(b)
    for name in ("tokenizer.json", "tokenizer_config.json"):
      with open(os.path.join(a, name)) as fa, open(os.path.join(b, name)) as fb:
        self.assertEqual(fa.read(), fb.read(), name)

  def test_bad_line_names_file_and_line(self):
    with open(self.tasks, "a") as f:
      f.write("{not json\n")
    rc, err = self._run(os.path.join(self.dir, "bad"))
    self.assertEqual(rc, 2)
    self.assertIn(f"{self.tasks}:5:", err)

  def test_no_inputs(self):
    out = os.path.join(self.dir, "x")
    with contextlib.redirect_stderr(io.StringIO()) as err:
      rc = train_tokenizer.main(["--inputs", os.path.join(self.dir, "none*.jsonl"), "--out", out])
    self.assertEqual(rc, 2)
    self.assertIn("no task files", err.getvalue())
    self.assertFalse(os.path.exists(out))


class ShippedTokenizerTest(absltest.TestCase):

  def test_loads_with_offsets(self):
    path = os.path.join(_ROOT, "data", "tokenizer")
    tok = AutoTokenizer.from_pretrained(path)
    self.assertEqual(tok.eos_token, "<|end|>")
    self.assertEqual(tok.pad_token, "<|pad|>")
    self.assertEqual(tok.convert_tokens_to_ids("<|assistant|>"), 3)
    enc = tok(_APP, return_offsets_mapping=True, add_special_tokens=False)
    self.assertEqual(tok.decode(enc["input_ids"]), _APP)
    self.assertEqual(enc["offset_mapping"][-1][1], len(_APP))


if __name__ == "__main__":
  absltest.main()
