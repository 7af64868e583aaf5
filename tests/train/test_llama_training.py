"""Training from a Llama-family checkpoint: `init_from_hf` with a tiny random qwen2
model and a ChatML tokenizer in one directory (as a Hugging Face model ships them)."""

import os

import jax
import numpy as np
import pytest
from absl.testing import absltest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from experiments import tiny_cpu
from tests.fixtures.hf_tiny import make_hf_llama
from rcca_jax.data import chat
from rcca_jax.data.selection import select_tasks
from rcca_jax.models import LlamaForCausalLM
from rcca_jax.train import config_check
from rcca_jax.train import trainer as trainer_lib
from tests.fixtures.trainer_fixtures import FakeGrader

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REWARDS = (0.5, 0.1)  # of even and odd jobs


def make_checkpoint(path: str) -> None:
  """A tiny qwen2 model and a ChatML byte-level BPE tokenizer (trained on the dark_mode
  train tasks) saved into `path`."""
  tasks = select_tasks(os.path.join(ROOT, "data", "tasks", "train.jsonl"),
                       families=("dark_mode",))
  texts = [chat.SYSTEM_PROMPT] + [t.request for t in tasks] + [t.reference for t in tasks]
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
      vocab_size=1000, special_tokens=SPECIALS, show_progress=False,
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                      chat_template=CHATML)
  tokenizer.save_pretrained(path)
  hf = make_hf_llama("qwen2", seed=0, vocab_size=1024, max_position_embeddings=2048,
                     tie_word_embeddings=True)
  hf.save_pretrained(path)


def config_for(path: str):
  config = tiny_cpu.get_config()
  config.init_from_hf = path
  config.data.tokenizer = ""
  config.data.setting = "natural"  # tiny_cpu's is controlled
  config.data.families = ("dark_mode",)
  config.sft.update(num_steps=1, batch_size=2, max_len=512, log_every=1)
  config.rl.update(num_steps=1, group_size=2, prompts_per_step=1, max_new_tokens=8,
                   max_prompt_len=192, reference=path)
  config.rl.loss.kl_beta = 0.05
  config.eval.update(enabled=False, per_family=1, max_new_tokens=8)
  return config


class LlamaInitTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.path = absltest.get_default_test_tmpdir() + "/qwen2_tiny"
    os.makedirs(cls.path, exist_ok=True)
    make_checkpoint(cls.path)

  def test_trainer_builds_the_checkpoints_model_and_chat_format(self):
    workdir = self.create_tempdir().full_path
    trainer = trainer_lib.Trainer(config_for(self.path), workdir, grader=FakeGrader(REWARDS))
    try:
      self.assertIsInstance(trainer.programs.fmodel.merge(trainer.programs.fmodel.params,
                                                 trainer.programs.fmodel.model_state),
                            LlamaForCausalLM)
      self.assertEqual(trainer.programs.model_cfg.model_type, "qwen2")
      self.assertTrue(trainer.programs.model_cfg.tie_word_embeddings)
      end = trainer.tokenizer.convert_tokens_to_ids("<|im_end|>")
      self.assertEqual(chat.eos_ids(trainer.tokenizer)[0], end)
      ids = chat.format_prompt(trainer.tokenizer, "Make a page.")
      self.assertTrue(trainer.tokenizer.decode(ids).endswith("<|im_start|>assistant\n"))
      self.assertEqual(trainer.programs.fmodel.model_state, {})
    finally:
      trainer.close()

  def test_family_that_contradicts_the_checkpoint_is_refused(self):
    config = config_for(self.path)
    config.model.family = "llama"
    problems = config_check.problems(config, num_devices=1, mode="train")
    self.assertIn(f"model.family='llama' but init_from_hf={self.path!r} is a 'qwen2' "
                  "checkpoint", problems)

  @pytest.mark.slow
  def test_sft_rl_with_reference_and_base_eval(self):
    workdir = self.create_tempdir().full_path
    config = config_for(self.path)
    with trainer_lib.Trainer(config, workdir, grader=FakeGrader(REWARDS)) as trainer:
      before = jax.tree.leaves(trainer.programs.fmodel.params)
      trainer.train()
      rows = trainer.metrics.rows()
      sft = [r for r in rows if r["stage"] == "sft"]
      rl = [r for r in rows if r["stage"] == "rl"]
      self.assertEqual([r["step"] for r in sft + rl], [1, 1])
      self.assertTrue(np.isfinite(sft[0]["loss"]) and sft[0]["loss"] > 0)
      self.assertTrue(np.isfinite(rl[0]["kl"]))
      self.assertGreater(rl[0]["kl"], 0.0)  # SFT moved the policy off the checkpoint
      state, _ = trainer.checkpoints.restore(trainer.checkpoints.rl)
      moved = [float(np.abs(np.asarray(a) - np.asarray(b)).max())
               for a, b in zip(before, jax.tree.leaves(state.params))]
      self.assertGreater(max(moved), 0.0)
    with trainer_lib.Trainer(config, workdir, mode="eval", grader=FakeGrader(REWARDS)) as trainer:
      summary = trainer.evaluate_checkpoint(checkpoint="base", out_name="base")
    self.assertEqual(summary["samples"], 1)
    self.assertAlmostEqual(summary["reward_mean"], 0.5)
    self.assertTrue(os.path.isdir(os.path.join(workdir, "eval", "base")))

if __name__ == "__main__":
  absltest.main()
