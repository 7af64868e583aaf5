"""The run's typed parts from its job config (`train.sections.JobConfig`): tokenizer,
model, optimizer, updates and loss (the translation the trainer and `--mode=plan`
share)."""

import os
from collections.abc import Mapping
from typing import Any

from rcca_jax.data import chat
from rcca_jax.data import sentencepiece_tokenizer
from rcca_jax.data.selection import resolve_path
from rcca_jax.models import families
from rcca_jax.rl import losses
from rcca_jax.rl import optim
from rcca_jax.rl import updates as updates_lib
from rcca_jax.train import sections


def load_tokenizer(path: str) -> Any:
  """A tokenizer directory's (or a checkpoint directory's) tokenizer, or a GGUF file's.

  A directory with a `tokenizer.model` and no `tokenizer.json` is a SentencePiece
  tokenizer (`data.sentencepiece_tokenizer`); otherwise transformers' AutoTokenizer.
  """
  path = resolve_path(path)
  if path.endswith(".gguf"):
    from rcca_jax.models import gguf_checkpoint  # pylint: disable=import-outside-toplevel
    return gguf_checkpoint.load_tokenizer(path)
  if (os.path.isfile(os.path.join(path, sentencepiece_tokenizer.MODEL_FILE))
      and not os.path.isfile(os.path.join(path, "tokenizer.json"))):
    return sentencepiece_tokenizer.SentencePieceTokenizer.from_directory(path)
  from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
  return AutoTokenizer.from_pretrained(path)


def model_config(job: sections.JobConfig, tokenizer: Any) -> families.ModelConfig:
  """The model config of `job.model` (its `family` picks the class, default Ling);
  `vocab_size` 0 takes the tokenizer's (rounded up to a multiple of 64), pad/eos ids
  come from the tokenizer."""
  fields = dict(job.model)
  if not fields.get("vocab_size"):
    fields["vocab_size"] = -(-len(tokenizer) // 64) * 64
  if fields["vocab_size"] < len(tokenizer):
    raise ValueError(f"model.vocab_size={fields['vocab_size']} is smaller than the "
                     f"tokenizer's {len(tokenizer)} tokens")
  fields["pad_token_id"] = chat.pad_id(tokenizer)
  fields["eos_token_id"] = chat.eos_ids(tokenizer)[0]
  return families.config_from_fields(fields)


def optimizer_config(values: Mapping[str, Any], num_steps: int) -> optim.OptimizerConfig:
  """A stage's optimizer: `values` (`sft.optimizer` / `rl.optimizer`) with the schedule
  as long as the stage's `num_steps` unless `total_steps` is set."""
  fields = dict(values)
  fields.setdefault("total_steps", max(num_steps, 1))
  fields["total_steps"] = max(fields["total_steps"], 1)
  fields["warmup_steps"] = min(fields.get("warmup_steps", optim.OptimizerConfig.warmup_steps),
                               fields["total_steps"])
  return optim.OptimizerConfig.from_mapping(fields)


def update_config(rl: sections.RlSection) -> updates_lib.UpdateConfig:
  return updates_lib.UpdateConfig(
      num_iterations=rl.num_iterations, mini_batches=rl.mini_batches,
      recompute_old_logprobs=rl.recompute_old_logprobs)


def loss_config(job: sections.JobConfig) -> losses.LossConfig:
  """`rl.loss` and `rl.policy_loss`, with `credit.negative_unblamed` (its one name)."""
  return losses.LossConfig.from_mapping(
      {**job.rl.loss, "policy_loss": job.rl.policy_loss,
       "rcca_negative_unblamed": job.credit.negative_unblamed})
