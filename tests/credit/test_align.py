"""Tests for rcca_jax.credit.align (token weights, docs/method.md#5-diagnostic-weights)."""


from absl.testing import absltest, parameterized
import numpy as np

from rcca_jax.base import schema
from rcca_jax.credit import diagnostic_weights
from rcca_jax.data import train_tokenizer
from rcca_jax.evaluation.record import Issue


def _reference_weights(offsets, issues, direct=3.0, context=1.5, cap=4.0):
  """The formula written out token by token, as docs/method.md#5-diagnostic-weights states
  it."""
  def hit(s, e, spans):
    return e > s and any(s < b and a < e for a, b in spans)
  out = []
  for s, e in offsets:
    w = 1.0
    for iss in issues:
      d = hit(s, e, iss["direct"])
      c = hit(s, e, iss["context"])
      w += (direct - 1) * d + (context - 1) * (c and not d)
    out.append(min(cap, w))
  return np.array(out, dtype=np.float32)


class SpanOpsTest(parameterized.TestCase):

  def test_merge(self):
    self.assertEqual(schema.merge_spans([[5, 7], [0, 2], [2, 3], [6, 9], [4, 4]]),
                     [(0, 3), (5, 9)])

  @parameterized.parameters(
      ([[0, 10]], [[2, 4], [6, 7]], [(0, 2), (4, 6), (7, 10)]),
      ([[0, 10]], [[0, 10]], []),
      ([[0, 3], [5, 8]], [[2, 6]], [(0, 2), (6, 8)]),
      ([[0, 3]], [], [(0, 3)]),
  )
  def test_subtract(self, spans, remove, want):
    self.assertEqual(schema.subtract_spans(spans, remove), want)

  @parameterized.parameters(((0, 10), (2, 5), True), ((0, 10), (0, 10), True),
                            ((2, 5), (0, 10), False), ((0, 5), (3, 8), False),
                            ((3, 8), (0, 5), False), ((4, 4), (4, 4), True))
  def test_contains(self, outer, inner, want):
    self.assertEqual(schema.contains(outer, inner), want)


class DiagnosticWeightsTest(parameterized.TestCase):

  def test_single_hits(self):
    offsets = [(0, 3), (3, 6), (6, 9), (9, 12)]
    issues = [{"direct": [[3, 5]], "context": [[7, 8], [3, 4]]}]
    np.testing.assert_array_equal(diagnostic_weights(offsets, issues), [1.0, 3.0, 1.5, 1.0])

  def test_accumulates_and_caps(self):
    offsets = [(0, 4), (4, 8)]
    one = {"direct": [[0, 1]], "context": [[4, 5]]}
    np.testing.assert_array_equal(diagnostic_weights(offsets, [one]), [3.0, 1.5])
    np.testing.assert_array_equal(diagnostic_weights(offsets, [one, one]), [4.0, 2.0])
    np.testing.assert_array_equal(diagnostic_weights(offsets, [one] * 4), [4.0, 3.0])

  def test_half_open_boundaries(self):
    # A span ending where a token starts does not touch it.
    offsets = [(0, 5), (5, 10)]
    w = diagnostic_weights(offsets, [{"direct": [[0, 5]], "context": [[10, 12]]}])
    np.testing.assert_array_equal(w, [3.0, 1.0])

  def test_zero_width_tokens(self):
    offsets = [(0, 0), (0, 2), (2, 2), (0, 0)]
    w = diagnostic_weights(offsets, [{"direct": [[0, 10]], "context": []}])
    np.testing.assert_array_equal(w, [1.0, 3.0, 1.0, 1.0])

  def test_issue_objects_and_custom_weights(self):
    issue = Issue(stage="rubric", message="m", direct=[(0, 1)], context=[(1, 2)])
    w = diagnostic_weights([(0, 1), (1, 2), (2, 3)], [issue], direct=2.0, context=1.25, cap=10)
    np.testing.assert_array_equal(w, [2.0, 1.25, 1.0])

  def test_no_tokens_and_no_issues(self):
    self.assertEqual(diagnostic_weights([], [{"direct": [[0, 1]]}]).shape, (0,))
    np.testing.assert_array_equal(diagnostic_weights([(0, 1)], []), [1.0])

  @parameterized.parameters(0, 1, 2, 3)
  def test_matches_formula_on_random_spans(self, seed):
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, 200), size=60, replace=False))
    starts = np.concatenate([[0], cuts[:-1]])
    offsets = list(zip(starts.tolist(), cuts.tolist()))
    issues = []
    for _ in range(rng.integers(1, 5)):
      def spans():
        out = []
        for _ in range(rng.integers(0, 5)):
          a = int(rng.integers(0, 200))
          out.append([a, a + int(rng.integers(0, 30))])
        return out
      issues.append({"direct": spans(), "context": spans()})
    np.testing.assert_array_equal(diagnostic_weights(offsets, issues),
                                  _reference_weights(offsets, issues))


class MultiByteAlignmentTest(absltest.TestCase):
  """Alignment with the real tokenizer's offset mapping on emoji and CJK text."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    texts = ["<button id=\"ok\">OK</button><script>const s = 'hello';</script>"] * 3
    cls.tok = train_tokenizer.train(texts, vocab_size=300)

  def test_tokens_of_one_character_share_its_weight(self):
    text = "<script>const s = '🙂中文';</script>"
    enc = self.tok(text, return_offsets_mapping=True, add_special_tokens=False)
    offsets = enc["offset_mapping"]
    emoji = text.index("🙂")
    # Byte-level BPE splits the 4-byte emoji into several tokens, all with its span.
    emoji_tokens = [i for i, (s, e) in enumerate(offsets) if (s, e) == (emoji, emoji + 1)]
    self.assertGreater(len(emoji_tokens), 1)
    w = diagnostic_weights(offsets, [{"direct": [[emoji, emoji + 1]],
                                      "context": [[emoji + 1, emoji + 3]]}])
    for i, (s, e) in enumerate(offsets):
      if (s, e) == (emoji, emoji + 1):
        self.assertEqual(w[i], 3.0)
      elif s >= emoji + 1 and e <= emoji + 3:
        self.assertEqual(w[i], 1.5)
      elif e <= emoji or s >= emoji + 3:
        self.assertEqual(w[i], 1.0)
    # The CJK characters are covered by context tokens only.
    cjk = [i for i, (s, e) in enumerate(offsets) if s >= emoji + 1 and e <= emoji + 3]
    self.assertNotEmpty(cjk)
    decoded = self.tok.decode([enc["input_ids"][i] for i in emoji_tokens])
    self.assertEqual(decoded, "🙂")

  def test_special_token_offsets(self):
    ids = self.tok("a 中", add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
    enc = self.tok("a 中", return_offsets_mapping=True, add_special_tokens=False)
    offsets = list(enc["offset_mapping"]) + [(0, 0)]
    w = diagnostic_weights(offsets, [{"direct": [[0, 3]], "context": []}])
    self.assertLen(w, len(ids))
    self.assertEqual(w[-1], 1.0)
    self.assertTrue(np.all(w[:-1] == 3.0))


if __name__ == "__main__":
  absltest.main()
