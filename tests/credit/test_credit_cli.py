"""Tests for `python -m rcca_jax.credit` (docs/contracts.md#5-credit) and its HTML report."""

import contextlib
import html
import io
import json
import os
import re
import subprocess
import sys

from absl.testing import absltest
import numpy as np
from transformers import AutoTokenizer

from rcca_jax.credit import __main__ as cli
from rcca_jax.credit import diagnostic_weights
from rcca_jax.evaluation.extract import extract_app

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOKENIZER = os.path.join(_ROOT, "data", "tokenizer")
_APP = ("<!DOCTYPE html><html><body><div id=\"n\">0</div><button id=\"inc\">+</button>"
        "<script>let n = 0; // 计数 🙂\n"
        "document.getElementById('inc').addEventListener('click', () => { n -= 1; "
        "document.getElementById('n').textContent = n; });</script></body></html>")
RESPONSE = "Here <you> go 🙂\n```html\n" + _APP + "\n```\n"


def _write(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    for r in rows:
      f.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")


def _record(task_id="t1", sample_id=0, **kw):
  ext = extract_app(RESPONSE)
  s = RESPONSE.index("n -= 1;")
  rec = {"task_id": task_id, "sample_id": sample_id, "reward": 0.55,
         "gates": {"format": True, "source": True, "runtime": True}, "rubric_score": 0.55,
         "rubrics": [{"id": "r<1>", "passed": False, "severity": "major", "detail": "got -1"}],
         "html_span": list(ext.html_span),
         "issues": [{"stage": "rubric", "rubric_id": "r<1>", "severity": "major",
                     "message": "expected 1, got -1 <script>alert(1)</script>",
                     "direct": [[s, s + 7]], "context": [[s - 10, s - 1]],
                     "evidence": {"step": 'expect text "#n" == "1"',
                                  "path": ['click "#inc"', 'expect text "#n" == "1"'],
                                  "selector": "#n", "element": {"exists": True}}}]}
  rec.update(kw)
  return rec


class CreditCliTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    self.responses = os.path.join(self.dir, "responses.jsonl")
    self.evals = os.path.join(self.dir, "evals.jsonl")
    self.out = os.path.join(self.dir, "weights.jsonl")

  def _run(self, *extra):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
      rc = cli.main(["--evaluations", self.evals, "--responses", self.responses,
                     "--tokenizer", _TOKENIZER, "--out", self.out, *extra])
    with open(self.out, encoding="utf-8") as f:
      rows = [json.loads(l) for l in f]
    return rc, rows, err.getvalue(), out.getvalue()

  def test_weights_follow_the_record(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE}])
    rec = _record()
    _write(self.evals, [rec])
    rc, rows, err, out = self._run()
    self.assertEqual(rc, 0, err)
    self.assertIn("1 responses", out)
    (row,) = rows
    self.assertEqual(set(row), {"task_id", "sample_id", "tokens", "offsets", "weights"})
    tok = AutoTokenizer.from_pretrained(_TOKENIZER)
    self.assertEqual(tok.decode(row["tokens"]), RESPONSE)
    self.assertLen(row["offsets"], len(row["tokens"]))
    np.testing.assert_array_equal(row["weights"],
                                  diagnostic_weights(row["offsets"], rec["issues"]))
    w = np.array(row["weights"])
    s = RESPONSE.index("n -= 1;")
    for (a, b), wt in zip(row["offsets"], w):
      if a < s + 7 and s < b:
        self.assertEqual(wt, 3.0)
      elif b <= s - 10 or a >= s + 7:
        self.assertEqual(wt, 1.0)
    self.assertIn(1.5, w)

  def test_localize_flag_recomputes_spans(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE}])
    rec = _record()
    rec["issues"][0]["direct"] = []
    rec["issues"][0]["context"] = []
    _write(self.evals, [rec])
    rc, rows, _, _ = self._run()
    self.assertEqual(rc, 0)
    self.assertTrue(all(w == 1.0 for w in rows[0]["weights"]))
    rc, rows, _, _ = self._run("--localize")
    self.assertEqual(rc, 0)
    w = np.array(rows[0]["weights"])
    s = RESPONSE.index("document.getElementById('n').textContent = n;")
    blamed = [wt for (a, b), wt in zip(rows[0]["offsets"], w) if a >= s and b <= s + 20]
    self.assertTrue(blamed and all(x == 3.0 for x in blamed))

  def test_failed_and_appless_records_get_ones(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE},
                            {"task_id": "t1", "sample_id": 1, "response": RESPONSE}])
    _write(self.evals, [_record(error="worker died"), _record(sample_id=1, html_span=None)])
    rc, rows, err, _ = self._run()
    self.assertEqual(rc, 0, err)
    for row in rows:
      self.assertTrue(all(w == 1.0 for w in row["weights"]))

  def test_mismatches_are_reported(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE},
                            {"task_id": "t2", "sample_id": 0, "response": "short"},
                            "{not json",
                            {"task_id": "t3", "sample_id": 0, "response": "no record"}])
    _write(self.evals, [_record(), _record(), _record("t2"), _record("t9")])
    rc, rows, err, _ = self._run()
    self.assertEqual(rc, 1)
    self.assertEqual([(r["task_id"], r["sample_id"]) for r in rows],
                     [("t1", 0), ("t2", 0), ("t3", 0)])
    self.assertIn(f"{self.evals}:2: duplicate evaluation record for t1#0", err)
    self.assertIn(f"{self.evals}:3: record does not match {self.responses}:2: html_span", err)
    self.assertRegex(err, re.escape(self.responses) + r":3: .*JSON")
    self.assertIn(f"{self.responses}:4: no evaluation record for t3#0", err)
    self.assertIn(f"{self.evals}:4: evaluation record t9#0 has no response", err)
    self.assertTrue(all(w == 1.0 for w in rows[1]["weights"] + rows[2]["weights"]))
    self.assertIn(3.0, rows[0]["weights"])

  def test_html_report(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE}])
    _write(self.evals, [_record()])
    page = os.path.join(self.dir, "report.html")
    rc, rows, _, _ = self._run("--html", page)
    self.assertEqual(rc, 0)
    with open(page, encoding="utf-8") as f:
      text = f.read()
    # Everything from the response and the record is escaped: the only scripts are ours.
    self.assertEqual(text.count("<script>"), 1)
    self.assertNotIn("<you>", text)
    self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", text)
    # One span per token, the text reassembles to the response.
    tokens = re.findall(r'<span class="t" id="r0-t(\d+)"', text)
    self.assertLen(tokens, len(rows[0]["tokens"]))
    pieces = re.findall(r'<span class="t"[^>]*>(.*?)</span>', text, flags=re.S)
    self.assertEqual(html.unescape("".join(pieces)), RESPONSE)
    # The issue links to its rubric, the rubric back to the issue, spans to tokens.
    self.assertIn('href="#r0-rub-r&lt;1&gt;"', text)
    self.assertIn('id="r0-rub-r&lt;1&gt;"', text)
    self.assertIn('href="#r0-i0"', text)
    s = RESPONSE.index("n -= 1;")
    first = next(i for i, (a, b) in enumerate(rows[0]["offsets"]) if a < s + 7 and s < b)
    self.assertIn(f'<a href="#r0-t{first}">[{s}, {s + 7})</a>', text)
    self.assertIn('data-d="0"', text)
    self.assertIn('data-c="0"', text)

  def test_module_entry_point(self):
    _write(self.responses, [{"task_id": "t1", "sample_id": 0, "response": RESPONSE}])
    _write(self.evals, [_record()])
    proc = subprocess.run([sys.executable, "-m", "rcca_jax.credit", "--evaluations", self.evals,
                           "--responses", self.responses, "--tokenizer", _TOKENIZER,
                           "--out", self.out], capture_output=True, text=True, cwd=_ROOT,
                          timeout=120)
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertIn("credit: 1 responses", proc.stdout)


if __name__ == "__main__":
  absltest.main()
