"""Chat formatting with the project's tokenizer and with a Ling-style tokenizer."""

import os

from absl.testing import absltest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from rcca_jax.data import chat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["<!DOCTYPE html><html><body><button id=\"inc\">+</button></body></html>",
         "Build a counter app with a reset button.", "SYSTEM HUMAN ASSISTANT"] * 20


def _tiny_tokenizer(specials, eos):
  """A real byte-level BPE tokenizer trained on a few texts, with the given specials."""
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(specials),
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                show_progress=False)
  tok.train_from_iterator(TEXTS, trainer=trainer)
  return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos)


class OwnFormatTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "data", "tokenizer"))
    self.ids = {t: self.tok.convert_tokens_to_ids(t)
                for t in ("<|user|>", "<|assistant|>", "<|end|>", "<|pad|>")}

  def test_prompt_layout(self):
    ids = chat.format_prompt(self.tok, "Build a counter.")
    self.assertFalse(chat.is_ling(self.tok))
    self.assertEqual(ids[0], self.ids["<|user|>"])
    self.assertEqual(ids[-1], self.ids["<|assistant|>"])
    self.assertEqual(self.tok.decode(ids),
                     f"<|user|>{chat.SYSTEM_PROMPT}\n\nBuild a counter.<|assistant|>")
    bare = chat.format_prompt(self.tok, "Build a counter.", system=None)
    self.assertEqual(self.tok.decode(bare), "<|user|>Build a counter.<|assistant|>")

  def test_special_looking_text_stays_text(self):
    ids = chat.format_prompt(self.tok, "say <|end|> and <|assistant|>", system=None)
    self.assertEqual(ids.count(self.ids["<|end|>"]), 0)
    self.assertEqual(ids.count(self.ids["<|assistant|>"]), 1)

  def test_eos_and_pad(self):
    self.assertEqual(chat.eos_ids(self.tok), (self.ids["<|end|>"],))
    self.assertEqual(chat.pad_id(self.tok), self.ids["<|pad|>"])

  def test_sft_example_masks_the_answer(self):
    response = chat.format_response("<p>hi</p>\n")
    self.assertEqual(response, "```html\n<p>hi</p>\n```")
    ids, mask = chat.format_sft_example(self.tok, "Make a page.", response)
    prompt = chat.format_prompt(self.tok, "Make a page.")
    self.assertEqual(ids[:len(prompt)], prompt)
    self.assertEqual(len(ids), len(mask))
    self.assertEqual(mask, [0] * len(prompt) + [1] * (len(ids) - len(prompt)))
    self.assertEqual(ids[-1], self.ids["<|end|>"])
    self.assertEqual(self.tok.decode(ids[len(prompt):]), response + "<|end|>")


class LingFormatTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tok = _tiny_tokenizer(["<|endoftext|>", "<role>", "</role>", "<|role_end|>"],
                               eos="<|endoftext|>")

  def test_detected_and_laid_out_like_the_ling_template(self):
    self.assertTrue(chat.is_ling(self.tok))
    ids = chat.format_prompt(self.tok, "Build a counter.")
    self.assertEqual(
        self.tok.decode(ids),
        f"<role>SYSTEM</role>{chat.SYSTEM_PROMPT}\ndetailed thinking off<|role_end|>"
        "<role>HUMAN</role>Build a counter.<|role_end|><role>ASSISTANT</role>")
    role_end = self.tok.convert_tokens_to_ids("<|role_end|>")
    self.assertEqual(ids.count(role_end), 2)

  def test_eos_ids_by_name(self):
    self.assertEqual(chat.eos_ids(self.tok), (self.tok.convert_tokens_to_ids("<|role_end|>"),
                                              self.tok.convert_tokens_to_ids("<|endoftext|>")))

  def test_sft_ends_with_role_end(self):
    ids, mask = chat.format_sft_example(self.tok, "x", "```html\n<p>x</p>\n```", system=None)
    self.assertEqual(ids[-1], self.tok.convert_tokens_to_ids("<|role_end|>"))
    self.assertEqual(sum(mask), len(ids) - len(chat.format_prompt(self.tok, "x", system=None)))

  def test_unknown_tokenizer_is_a_clear_error(self):
    plain = _tiny_tokenizer(["<s>"], eos="<s>")
    with self.assertRaisesRegex(chat.ChatFormatError, "no '<\\|user\\|>' token"):
      chat.format_prompt(plain, "x")


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# A template without a system role (as Gemma's): it raises, the system joins the request.
NO_SYSTEM = ("{% for m in messages %}{% if m['role'] == 'system' %}"
             "{{ raise_exception('System role not supported') }}{% endif %}"
             "<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
             "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


class TemplateFormatTest(absltest.TestCase):
  """A checkpoint tokenizer with its own chat template (ChatML, as SmolLM2 and Qwen2)."""

  def setUp(self):
    super().setUp()
    self.tok = _tiny_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                               "<|endoftext|>")
    self.tok.chat_template = CHATML
    self.end = self.tok.convert_tokens_to_ids("<|im_end|>")

  def test_prompt_equals_the_templates_own_rendering(self):
    self.assertTrue(chat.uses_template(self.tok))
    ids = chat.format_prompt(self.tok, "Build a counter app.")
    messages = [{"role": "system", "content": chat.SYSTEM_PROMPT},
                {"role": "user", "content": "Build a counter app."}]
    ref = self.tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    self.assertEqual(ids, list(ref["input_ids"]))
    self.assertTrue(self.tok.decode(ids).endswith(
        "<|im_start|>user\nBuild a counter app.<|im_end|>\n<|im_start|>assistant\n"))

  def test_special_looking_request_stays_text(self):
    ids = chat.format_prompt(self.tok, "say <|im_end|> now", system=None)
    self.assertEqual(ids.count(self.end), 1)  # the template's own, after the request
    self.assertIn("say <|im_end|> now", self.tok.decode(ids))

  def test_turn_end_eos_pad_and_sft_example(self):
    self.assertEqual(chat.eos_ids(self.tok),
                     (self.end, self.tok.convert_tokens_to_ids("<|endoftext|>")))
    self.assertEqual(chat.pad_id(self.tok), self.end)
    response = chat.format_response("<p>hi</p>")
    ids, mask = chat.format_sft_example(self.tok, "Make a page.", response)
    prompt = chat.format_prompt(self.tok, "Make a page.")
    self.assertEqual(ids[:len(prompt)], prompt)
    self.assertEqual(ids[-1], self.end)
    self.assertEqual(mask, [0] * len(prompt) + [1] * (len(ids) - len(prompt)))
    self.assertEqual(self.tok.decode(ids[len(prompt):-1]), response)

  def test_template_without_system_role_gets_it_in_the_request(self):
    tok = _tiny_tokenizer(["<eos>", "<start_of_turn>", "<end_of_turn>"], "<eos>")
    tok.chat_template = NO_SYSTEM
    text = tok.decode(chat.format_prompt(tok, "Make a page."))
    self.assertEqual(text, f"<start_of_turn>user\n{chat.SYSTEM_PROMPT}\n\nMake a page."
                           "<end_of_turn>\n<start_of_turn>model\n")
    self.assertEqual(chat.eos_ids(tok)[0], tok.convert_tokens_to_ids("<end_of_turn>"))


if __name__ == "__main__":
  absltest.main()
