"""Per-token log-probabilities under fixed parameters, in a jitted function of its own.

Two users: the frozen reference policy of the KL term (`Reference`), and the trainer's
recomputation of the old log-probs before the first update of a rollout batch
(`rl.recompute_old_logprobs`).

Why a function of its own and not inside the train step: with `rl.num_iterations`
x `rl.mini_batches` updates per rollout batch, the reference log-probs (and the
recomputed old ones) are needed once per rollout batch, not once per update; inside
the step they would be recomputed for every update (a forward pass of the full model
each time). It also keeps the train step the same program with and without a KL term
(`ref_logp` is one more batch input), and the reference parameters out of the step's
donated state. The cost is that the reference parameters stay resident between calls
(they are sharded like the policy's, so that is `state params` bytes again per device;
`--mode=plan` reports it).

The function runs the batch in `micro_batches` slices with `lax.scan` (as the train
step does), so its activations are those of one slice without gradients.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rcca_jax.rl import train_step
from rcca_jax.rl.objective import PROMPT_KEYS

Array = jax.Array
PyTree = Any
LOGPROB_KEYS = ("input_ids", "attention_mask", "loss_mask")


def make_logprob_fn(fmodel: train_step.FunctionalModel, micro_batches: int = 1, *,
                    logits_chunk: int = 0, temperature: float = 1.0,
                    batch_spec: Optional[PartitionSpec] = None,
                    with_entropy: bool = False) -> Callable:
  """`(params, model_state, batch) -> logp` [B, L] of softmax(logits / temperature),
  0 outside `loss_mask`; with `with_entropy`, `(logp, entropy)`, the predictive
  entropy at each position likewise.

  `batch` holds `LOGPROB_KEYS`; rows are processed `B / micro_batches` at a time.
  """

  def constrain(x):
    if batch_spec is None:
      return x
    return jax.lax.with_sharding_constraint(
        x, PartitionSpec(*batch_spec, *([None] * (x.ndim - 1))))

  def fn(params, model_state, batch):
    prompts = {k: batch[k] for k in PROMPT_KEYS if k in batch}
    batch = {k: batch[k] for k in LOGPROB_KEYS}
    micro = train_step.split_micro_batches(batch, micro_batches)

    def body(_, mb):
      mb = {**{k: constrain(x) for k, x in mb.items()}, **prompts}
      logp, entropy, _ = fmodel.batch_logprobs(params, model_state, mb, logits_chunk,
                                               temperature)
      keep = mb["loss_mask"] > 0
      out = jnp.where(keep, logp, 0.0)
      return None, (out, jnp.where(keep, entropy, 0.0)) if with_entropy else out

    def rows(x):  # [k, B/k, L]; slice i has rows i, i+k..
      return jnp.swapaxes(x, 0, 1).reshape(batch["input_ids"].shape)

    _, out = jax.lax.scan(body, None, micro)
    return jax.tree.map(rows, out)

  return fn


def compile_logprob_fn(fmodel: train_step.FunctionalModel,
                       config: train_step.StepConfig, micro_batches: int,
                       mesh: Optional[Mesh] = None, with_entropy: bool = False) -> Callable:
  """`make_logprob_fn` under `jax.jit`; on `mesh`, params and model state sharded as
  the policy's, the batch and the output split over the data axes."""
  if mesh is None:
    return jax.jit(make_logprob_fn(fmodel, micro_batches,
                                   logits_chunk=config.logits_chunk,
                                   temperature=config.temperature,
                                   with_entropy=with_entropy))
  spec = train_step.batch_partition_spec(mesh)
  fn = make_logprob_fn(fmodel, micro_batches, logits_chunk=config.logits_chunk,
                       temperature=config.temperature, batch_spec=spec,
                       with_entropy=with_entropy)
  params_sh, rest_sh = fmodel.shardings(mesh)
  batch_sh, replicated = NamedSharding(mesh, spec), NamedSharding(mesh, PartitionSpec())
  programs = {}  # one per batch layout: rows alone, or with shared prompts

  def jitted_for(keys):
    if keys not in programs:
      programs[keys] = jax.jit(
          fn, in_shardings=(params_sh, rest_sh, {
              k: replicated if k in PROMPT_KEYS else batch_sh for k in keys}),
          out_shardings=(batch_sh, batch_sh) if with_entropy else batch_sh)
    return programs[keys]

  def run(params, model_state, batch):
    keys = LOGPROB_KEYS + tuple(k for k in PROMPT_KEYS if k in batch)
    with jax.set_mesh(mesh):
      return jitted_for(keys)(params, model_state, {k: batch[k] for k in keys})

  run.jitted = jitted_for(LOGPROB_KEYS)
  return run


class Reference:
  """A frozen policy (parameters and model state) and its log-prob function."""

  def __init__(self, params: PyTree, model_state: PyTree, logprob_fn: Callable):
    self.params = params
    self.model_state = model_state
    self._fn = logprob_fn

  def logprobs(self, batch: dict[str, Any]) -> Array:
    """[B, L] reference log-probabilities of `batch`'s tokens (0 off the response)."""
    return self._fn(self.params, self.model_state, batch)
