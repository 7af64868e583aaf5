"""Token offsets of sampled responses equal the tokenizer's own offset mapping."""

import json
import pathlib

from absl.testing import absltest, parameterized
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from rcca_jax.data import chat
from rcca_jax.train import offsets as offsets_lib
from rcca_jax.train import rollouts

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXTS = (
    "<p id=\"x\">héllo &amp; 😀</p>",
    "计数器：点击 + 按钮 🎉👍🏽 (skin tone), 家族 👨‍👩‍👧 and ✓ ≤ ≥",
    "```html\n<button id=\"inc\">＋</button><script>let n = 0; // 零\n</script>\n```",
    "  leading spaces, tabs\t\tand\n\nnewlines  ",
    "Ω≈ç√∫˜µ≤≥÷ ﷽ 𝕳𝖊𝖑𝖑𝖔 🏳️‍🌈",
)
CORPUS = [t * 3 for t in TEXTS] + ["the quick brown fox jumps over the lazy dog " * 5]


def _byte_level_bpe(trim: bool) -> PreTrainedTokenizerFast:
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  tok.post_processor = processors.ByteLevel(trim_offsets=trim, add_prefix_space=False)
  tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
      vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
      special_tokens=["<|end|>"]))
  return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")


def _metaspace_bpe() -> PreTrainedTokenizerFast:
  tok = Tokenizer(models.BPE(unk_token="<unk>"))
  tok.pre_tokenizer = pre_tokenizers.Metaspace()
  tok.decoder = decoders.Metaspace()
  tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300,
                                                      special_tokens=["<unk>", "<|end|>"]))
  return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")


def _mapping(tok, text):
  enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
  return enc["input_ids"], np.asarray(enc["offset_mapping"], np.int64).reshape(-1, 2)


class OffsetsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.project = AutoTokenizer.from_pretrained(str(ROOT / "data" / "tokenizer"))
    cls.tokenizers = {
        "project": cls.project,
        "bpe_trimmed": _byte_level_bpe(trim=True),
        "bpe_untrimmed": _byte_level_bpe(trim=False),
        "metaspace": _metaspace_bpe(),
    }

  # Metaspace decoding drops the text's first space, so only texts that round-trip.
  @parameterized.parameters(
      [(name, text) for name in ("project", "bpe_trimmed", "bpe_untrimmed") for text in TEXTS]
      + [("metaspace", text) for text in TEXTS if not text.startswith(" ")])
  def test_equal_to_offset_mapping(self, name, text):
    tok = self.tokenizers[name]
    ids, expected = _mapping(tok, text)
    end = tok.convert_tokens_to_ids("<|end|>")
    decoded, got = rollouts.decode_with_offsets(tok, ids + [end, end], (end,))
    self.assertEqual(decoded, text)
    np.testing.assert_array_equal(got[:-2], expected)
    np.testing.assert_array_equal(got[-2:], [[len(decoded)] * 2] * 2)

  def test_part_of_a_character_gets_the_whole_character(self):
    ids, expected = _mapping(self.project, "a😀b")
    _, got = rollouts.decode_with_offsets(self.project, ids, ())
    emoji = [tuple(o) for o, t in zip(got, ids) if self.project.decode([t]) not in "ab"]
    self.assertGreater(len(emoji), 1)     # the emoji's 4 bytes are several tokens
    self.assertEqual(set(emoji), {(1, 2)})

  def test_non_canonical_tokens_are_aligned_by_their_bytes(self):
    # One byte per token (the sampler can emit that): each gets its character's span.
    text = "x 中😀"
    vocab = self.project.get_vocab()
    table = offsets_lib._bytes_to_unicode()
    ids = [vocab[table[b]] for b in text.encode()]
    decoded, got = rollouts.decode_with_offsets(self.project, ids, ())
    self.assertEqual(decoded, text)
    want = [(0, 1), (1, 2)] + [(2, 3)] * 3 + [(3, 4)] * 4
    self.assertEqual([tuple(o) for o in got], want)

  def test_non_canonical_metaspace_tokens(self):
    tok = self.tokenizers["metaspace"]
    text = "the lazy dog"
    ids = [tok.convert_tokens_to_ids(c) for c in "▁the▁lazy▁dog"]
    decoded, got = rollouts.decode_with_offsets(tok, ids, ())
    self.assertEqual(decoded, text)
    pieces = [decoded[s:e] for s, e in got]
    self.assertEqual("".join(pieces), text)
    self.assertEqual(pieces[:5], ["", "t", "h", "e", " "])

  def test_id_outside_the_vocabulary_gets_an_empty_range(self):
    ids, expected = _mapping(self.project, "ab 中文")
    padded = len(self.project) + 7          # model vocabularies are padded past the tokenizer's
    decoded, got = rollouts.decode_with_offsets(self.project, ids[:2] + [padded] + ids[2:], ())
    self.assertEqual(decoded, "ab 中文")
    np.testing.assert_array_equal(np.delete(got, 2, axis=0), expected)
    self.assertEqual(got[2, 0], got[2, 1])

  def test_truncated_character_at_the_end(self):
    ids, _ = _mapping(self.project, "ok 😀")
    decoded, got = rollouts.decode_with_offsets(self.project, ids[:-1], ())
    self.assertTrue(decoded.startswith("ok "))
    self.assertTrue(np.all((0 <= got) & (got <= len(decoded))))
    self.assertTrue(np.all(got[:, 0] <= got[:, 1]))
    self.assertEqual(decoded[got[0, 0]:got[0, 1]], "ok")

  def test_whole_train_split_references(self):
    end = chat.eos_ids(self.project)
    mismatched = []
    with open(ROOT / "data" / "tasks" / "train.jsonl", encoding="utf-8") as f:
      tasks = [json.loads(line) for line in f]
    references = [t["reference"] for t in tasks if t.get("reference")]
    self.assertGreater(len(references), 1000)
    for i, ref in enumerate(references):
      text = chat.format_response(ref)
      ids, expected = _mapping(self.project, text)
      decoded, got = rollouts.decode_with_offsets(self.project, ids + [end[0]], end)
      if decoded != text or not np.array_equal(got[:-1], expected):
        mismatched.append(i)
    self.assertEqual(mismatched, [])


if __name__ == "__main__":
  absltest.main()
