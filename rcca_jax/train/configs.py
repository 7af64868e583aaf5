"""The run's typed parts from its experiment config: tokenizer, model, optimizer, updates,
credit and loss (the translation the trainer and `--mode=plan` share)."""

import os
from typing import Any

import ml_collections

from rcca_jax.credit import blame
from rcca_jax.data import chat
from rcca_jax.data import sentencepiece_tokenizer
from rcca_jax.data.selection import resolve_path
from rcca_jax.models import families
from rcca_jax.rl import losses
from rcca_jax.rl import optim
from rcca_jax.rl import updates as updates_lib


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


def pretrained_source(config: ml_collections.ConfigDict) -> str:
  """The checkpoint the run starts from: `init_from_hf` or `init_from_gguf` ("" for
  none)."""
  return config.get("init_from_hf") or config.get("init_from_gguf") or ""


def model_config(config: ml_collections.ConfigDict, tokenizer: Any) -> families.ModelConfig:
  """The model config of `config.model` (its `family` picks the class, default Ling);
  `vocab_size` 0 takes the tokenizer's (rounded up to a multiple of 64), pad/eos ids
  come from the tokenizer."""
  fields = dict(config.model.to_dict())
  if not fields.get("vocab_size"):
    fields["vocab_size"] = -(-len(tokenizer) // 64) * 64
  if fields["vocab_size"] < len(tokenizer):
    raise ValueError(f"model.vocab_size={fields['vocab_size']} is smaller than the "
                     f"tokenizer's {len(tokenizer)} tokens")
  fields["pad_token_id"] = chat.pad_id(tokenizer)
  fields["eos_token_id"] = chat.eos_ids(tokenizer)[0]
  return families.config_from_fields(fields)


def optimizer_config(values: ml_collections.ConfigDict, num_steps: int
                     ) -> optim.OptimizerConfig:
  fields = dict(values.to_dict())
  fields.setdefault("total_steps", max(num_steps, 1))
  fields["total_steps"] = max(fields["total_steps"], 1)
  fields["warmup_steps"] = min(fields.get("warmup_steps", 0), fields["total_steps"])
  return optim.OptimizerConfig.from_mapping(fields)


def update_config(config: ml_collections.ConfigDict) -> updates_lib.UpdateConfig:
  r = config.rl
  return updates_lib.UpdateConfig(
      num_iterations=r.get("num_iterations", 1), mini_batches=r.get("mini_batches", 1),
      recompute_old_logprobs=r.get("recompute_old_logprobs", False))


def credit_config(config: ml_collections.ConfigDict) -> blame.CreditConfig:
  """The typed `credit` section (defaults when the config has none)."""
  return blame.CreditConfig.from_mapping(
      config.credit.to_dict() if "credit" in config else None)


def loss_config(config: ml_collections.ConfigDict) -> losses.LossConfig:
  """`rl.loss` and `rl.policy_loss`, with `credit.negative_unblamed` (its one name)."""
  fields = dict(config.rl.loss.to_dict()) if "loss" in config.rl else {}
  fields["policy_loss"] = config.rl.policy_loss
  fields["rcca_negative_unblamed"] = credit_config(config).negative_unblamed
  return losses.LossConfig.from_mapping(fields)
