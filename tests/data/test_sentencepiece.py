"""SentencePiece tokenizers: trained on the corpus (`train_tokenizer --kind=sentencepiece`),
loaded from a directory, exact character offsets, chat rendering, and training with one.
"""

import contextlib
import io
import os

import numpy as np
import pytest
from absl.testing import absltest

from rcca_jax.data import chat
from rcca_jax.data import sentencepiece_tokenizer as spt
from rcca_jax.data import train_tokenizer
from rcca_jax.data.selection import select_tasks
from rcca_jax.train import offsets as offsets_lib
from rcca_jax.train import sections

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "data", "tasks", "train.jsonl")
EXTRA = "Build a counter 😀 计数器 — naïve café\r\n\ttabs  and  spaces 🇫🇷 x"


def check_offsets(test: absltest.TestCase, tok, text: str) -> None:
  """Encoding `text` decodes back to it and its offsets tile it in order; decoding the
  ids gives the same ranges (what training aligns sampled tokens with)."""
  enc = tok(text, return_offsets_mapping=True)
  ids, om = enc["input_ids"], np.asarray(enc["offset_mapping"])
  test.assertEqual(tok.decode(ids), text)
  covered = set()
  for s, e in om:
    covered.update(range(s, e))
  test.assertEqual(covered, set(range(len(text))))
  test.assertTrue(np.all(np.diff(om[:, 0]) >= 0) and np.all(np.diff(om[:, 1]) >= 0))
  # Each range holds the piece's own text (whole characters for byte pieces).
  for tid, (s, e) in zip(ids, om):
    piece = tok.convert_ids_to_tokens([tid])[0]
    if not tok.sp.is_byte(tid):
      test.assertEqual(text[s:e], piece.replace("\u2581", " "))
  np.testing.assert_array_equal(offsets_lib.token_offsets(tok, ids, text), om)


def dark_mode_texts() -> list[str]:
  tasks = select_tasks(TRAIN, families=("dark_mode", "char_counter"), need_reference=True)
  return [t.request for t in tasks] + [t.reference for t in tasks]


class SentencePieceTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.texts = dark_mode_texts()
    cls.tok = train_tokenizer.train_sentencepiece(cls.texts + [EXTRA], 1024)

  def test_offsets_exact_on_references_emoji_and_cjk(self):
    for text in [EXTRA] + [chat.format_response(t) for t in self.texts[-40:]]:
      check_offsets(self, self.tok, text)
    # Characters never seen in training come back through byte pieces.
    check_offsets(self, self.tok, "한국어 🦀 ∮ ok")

  def test_special_tokens_and_chat_format(self):
    tok = self.tok
    self.assertEqual([tok.convert_tokens_to_ids(t) for t in train_tokenizer.SPECIAL_TOKENS],
                     [1, 2, 3, 4])
    self.assertEqual(chat.eos_ids(tok), (tok.convert_tokens_to_ids("<|end|>"),))
    self.assertEqual(chat.pad_id(tok), tok.convert_tokens_to_ids("<|pad|>"))
    ids = chat.format_prompt(tok, "say <|end|> and <|user|>", system=None)
    self.assertEqual(ids[0], tok.convert_tokens_to_ids("<|user|>"))
    self.assertEqual(ids[-1], tok.convert_tokens_to_ids("<|assistant|>"))
    self.assertNotIn(tok.convert_tokens_to_ids("<|end|>"), ids)  # plain text stays text
    self.assertEqual(tok.decode(ids), "<|user|>say <|end|> and <|user|><|assistant|>")
    response = chat.format_response("<p>hi</p>")
    ids, mask = chat.format_sft_example(tok, "Make a page.", response)
    self.assertEqual(ids[-1], tok.convert_tokens_to_ids("<|end|>"))
    self.assertEqual(tok.decode([i for i, m in zip(ids, mask) if m][:-1]), response)
    # Decoding with special tokens in it: their names, with their own ranges.
    text, om = tok.decode_with_offsets(ids)
    self.assertEqual(text[om[-1, 0]:om[-1, 1]], "<|end|>")

  def test_cli_saves_a_directory_the_trainer_loads(self):
    out = self.create_tempdir().full_path + "/sp"
    with contextlib.redirect_stdout(io.StringIO()):
      rc = train_tokenizer.main(["--kind", "sentencepiece", "--inputs", TRAIN, "--out", out,
                                 "--vocab-size", "1000"])
    self.assertEqual(rc, 0)
    self.assertTrue(os.path.isfile(os.path.join(out, spt.MODEL_FILE)))
    tok = sections.load_tokenizer(out)
    self.assertIsInstance(tok, spt.SentencePieceTokenizer)
    self.assertEqual((tok.eos_token, tok.pad_token), ("<|end|>", "<|pad|>"))
    self.assertLen(tok, 1000)
    check_offsets(self, tok, EXTRA)

  def test_chat_template_of_a_sentencepiece_checkpoint(self):
    path = self.create_tempdir().full_path
    self.tok.save_pretrained(path)
    template = ("{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    tok = spt.SentencePieceTokenizer(self.tok.model_proto, eos_token="<|end|>",
                                     chat_template=template)
    self.assertEqual(tok.apply_chat_template([{"role": "user", "content": "hi"}],
                                             add_generation_prompt=True),
                     "<|user|>hi<|assistant|>")
    with self.assertRaisesRegex(ValueError, r"no piece for eos_token='<eos>'"):
      spt.SentencePieceTokenizer(self.tok.model_proto, eos_token="<eos>")


@pytest.mark.slow
class SentencePieceCorpusTest(absltest.TestCase):

  def test_every_train_reference_offsets_exact_and_tiny_config_trains(self):
    from experiments import tiny_cpu  # pylint: disable=import-outside-toplevel
    from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    from tests.fixtures.trainer_fixtures import FakeGrader  # pylint: disable=import-outside-toplevel
    path = self.create_tempdir().full_path + "/sp"
    with contextlib.redirect_stdout(io.StringIO()):
      self.assertEqual(train_tokenizer.main(["--kind", "sentencepiece", "--out", path,
                                             "--inputs", TRAIN]), 0)
    tok = sections.load_tokenizer(path)
    references = select_tasks(TRAIN, need_reference=True)
    for task in references:
      enc = tok(task.reference, return_offsets_mapping=True)
      spans = [span for i, span in enumerate(enc["offset_mapping"])
               if i == 0 or span != enc["offset_mapping"][i - 1]]  # byte pieces share one
      self.assertEqual("".join(task.reference[s:e] for s, e in spans), task.reference)
      self.assertEqual(tok.decode(enc["input_ids"]), task.reference)
    config = tiny_cpu.get_config()
    config.data.tokenizer = path
    config.sft.update(num_steps=3, batch_size=2, log_every=1)
    # (The controlled requests' prompts are up to 194 tokens with this tokenizer.)
    config.rl.update(num_steps=2, group_size=2, prompts_per_step=1, max_new_tokens=16,
                     max_prompt_len=256)
    config.eval.enabled = False
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader((0.5, 0.1))) as trainer:
      self.assertIsInstance(trainer.tokenizer, spt.SentencePieceTokenizer)
      trainer.train()
      rows = trainer.metrics.rows()
    self.assertEqual([r["step"] for r in rows if r["stage"] == "sft"], [1, 2, 3])
    rl = [r for r in rows if r["stage"] == "rl"]
    self.assertEqual([r["step"] for r in rl], [1, 2])
    self.assertTrue(all(np.isfinite(r["loss"]) for r in rl))


if __name__ == "__main__":
  absltest.main()
