"""Supervised fine-tuning: next-token loss on response tokens, same train machinery.

The loss is the mean negative log-likelihood over all response tokens of the batch
(one global token count, so micro-batching and sharding do not change it); prompts
and padding carry no loss. Batches come from `data.batching.sft_batch`.
"""

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from rcca_jax.rl import objective
from rcca_jax.rl import optim
from rcca_jax.rl import train_step

SFT_KEYS = ("input_ids", "attention_mask", "loss_mask")
# With `sft.head_on_loss_positions`: the positions the loss reads
# (`batching.loss_positions`), where alone the LM head runs.
POSITION_KEYS = ("loss_positions",)


@dataclasses.dataclass(frozen=True)
class NextTokenObjective:
  """Mean negative log-likelihood of the response tokens."""
  keys: tuple[str, ...] = SFT_KEYS

  def denominator(self, batch):
    return objective.loss_denominator(batch["loss_mask"], "token-mean")

  def terms(self, logp, entropy, batch):
    mask = batch["loss_mask"].astype(jnp.float32)
    numerator = -jnp.sum(jnp.where(mask > 0, logp, 0.0) * mask)
    stats = {
        "tokens": jnp.sum(mask),
        "sequences": jnp.sum((jnp.sum(mask, axis=-1) > 0).astype(jnp.float32)),
        "token_sums": {"nll": jax.lax.stop_gradient(numerator),
                       "entropy": jnp.sum(entropy * mask)},
        "seq_sums": {}, "mins": {}, "maxs": {}}
    return numerator, stats

  def batch_metrics(self, batch):
    del batch
    return {}


def next_token_objective(head_on_loss_positions: bool = False) -> NextTokenObjective:
  """The SFT objective of the `sft` section: with `head_on_loss_positions` it reads
  the batch's `loss_positions` (the LM head runs there alone)."""
  return NextTokenObjective(SFT_KEYS + (POSITION_KEYS if head_on_loss_positions else ()))


def make_sft_step(fmodel: train_step.FunctionalModel,
                  opt_config: optim.OptimizerConfig,
                  config: train_step.StepConfig = train_step.StepConfig(), *,
                  batch_spec: Optional[PartitionSpec] = None):
  """The pure SFT step `(state, batch) -> (state, metrics)`; compile with
  `train_step.compile_step(..., batch_keys=SFT_KEYS)`."""
  return train_step.make_train_step(fmodel, NextTokenObjective(), opt_config, config,
                                    batch_spec=batch_spec)
