"""What the RL train step optimises: the `Objective` protocol and the policy loss.

An objective names the batch entries it reads (`keys`), gives the loss as a
(numerator, global denominator) pair, and adds batch-level metrics. The SFT objective
(`rl.sft.NextTokenObjective`) is the other implementation.
"""

import dataclasses
from typing import Mapping, Protocol

import jax
import jax.numpy as jnp

from rcca_jax.rl import grpo
from rcca_jax.rl import losses

Array = jax.Array

RL_KEYS = ("input_ids", "attention_mask", "loss_mask", "old_logp", "advantages",
           "wbar")


class Objective(Protocol):
  """What a train step optimises: a loss as (numerator, global denominator)."""

  keys: tuple[str, ...]

  def denominator(self, batch: Mapping[str, Array]) -> Array:
    ...

  def terms(self, logp: Array, entropy: Array,
            batch: Mapping[str, Array]) -> tuple[Array, dict]:
    ...

  def batch_metrics(self, batch: Mapping[str, Array]) -> dict[str, Array]:
    ...


@dataclasses.dataclass(frozen=True)
class PolicyObjective:
  """The RL objective: a registered policy loss (`grpo`, `rcca`, ...)."""
  loss: losses.LossConfig
  group_size: int

  @property
  def keys(self) -> tuple[str, ...]:
    return RL_KEYS + (("ref_logp",) if self.loss.kl_beta else ())

  def denominator(self, batch):
    return grpo.loss_denominator(batch["loss_mask"], self.loss.aggregation)

  def terms(self, logp, entropy, batch):
    loss_fn = losses.get_policy_loss(self.loss.policy_loss)
    numerator, stats = loss_fn(
        logp, batch["old_logp"], batch["advantages"], batch["wbar"],
        batch["loss_mask"], batch.get("ref_logp"), self.loss, entropy=entropy)
    stats["token_sums"]["entropy"] = jnp.sum(entropy * batch["loss_mask"])
    return numerator, stats

  def batch_metrics(self, batch):
    return {"zero_advantage_groups": grpo.zero_advantage_group_fraction(
        batch["advantages"], self.group_size)}
