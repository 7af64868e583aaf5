"""The RL (and SFT) train step: one pure function, compiled once on the mesh.

`step(state, batch) -> (state, metrics)`, where `state` is a `TrainState` of pure
pytrees. The step accumulates gradients over `micro_batches` slices with `lax.scan`;
every loss is a (numerator, denominator) pair whose denominator comes from the whole
batch, so the result does not depend on the number of micro-batches or on how the
batch is sharded. The MoE router correction biases (aux-loss-free balancing) are model
state outside the gradient, updated from the step's expert counts.

RL batch (all arrays, per-token ones aligned with `input_ids`: entry t describes token
`input_ids[:, t]`, which the logits at t-1 predict; rows right-padded):
  input_ids [B, L] int32, attention_mask [B, L] (1 on real tokens),
  loss_mask [B, L] (1 on response tokens, 0 at t=0), old_logp [B, L] (sampler),
  advantages [B], wbar [B, L] (diagnostic weights, ones when there are none),
  optional ref_logp [B, L] (needed when the loss has kl_beta > 0).
The SFT batch (`rl.sft`) needs only input_ids, attention_mask and loss_mask.

Modules: `functional` (the NNX model as pure functions and its log-probs),
`objective` (what is optimised: the whole RL loss), `batch_check` (a host batch checked
and cast), and this one (gradient accumulation, the optimizer update, shardings,
compilation).
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import flax
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rcca_jax.parallel.partitioning import batch_partition_spec
from rcca_jax.rl import optim
# The step's building blocks live in their own modules; their names are re-exported
# here because callers build steps from them together.
from rcca_jax.rl.batch_check import numpy_batch  # noqa: F401
from rcca_jax.rl.functional import (  # noqa: F401
    CORRECTION_BIAS_NAMES, FunctionalModel, chunked_token_logprobs, token_logprobs)
from rcca_jax.rl.objective import RL_KEYS, Objective, PolicyObjective  # noqa: F401
from rcca_jax.rl.objective import PROMPT_KEYS
from rcca_jax.rl.objective import finalize_stats, merge_stats

Array = jax.Array
PyTree = Any


@flax.struct.dataclass
class TrainState:
  """Everything a step changes; checkpointed as a whole."""
  step: Array  # int32 scalar: optimizer updates done.
  params: PyTree  # Trainable parameters (pure dict).
  model_state: PyTree  # Other model variables, e.g. router correction biases.
  opt_state: PyTree
  rng: Array  # uint32 [2]: the run's PRNG key (for sampling), carried through.


def expert_counts(aux: Mapping[str, Any]) -> Optional[Array]:
  """The per-MoE-layer expert token counts in the model's aux output (or None)."""
  return aux.get("expert_counts") if isinstance(aux, Mapping) else None


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """Gradient-accumulation slices per step, the router-bias update rate, and the
  temperature of the policy whose log-probs the loss takes."""
  micro_batches: int = 1
  expert_bias_rate: float = 1e-3  # 0 disables the correction-bias update.
  # Positions per logits chunk in the loss (0: whole sequence). Long sequences with a
  # large vocabulary need it: 8k tokens x 157k vocab is 5 GB of float32 logits per row.
  logits_chunk: int = 0
  # The loss's policy is softmax(logits / temperature): RL's sampling temperature
  # (`rl.temperature`), so that the ratio's numerator is the distribution the sampler
  # drew from and whose log-probs it returned; 1.0 for SFT.
  temperature: float = 1.0


def split_micro_batches(batch: Mapping[str, Array], k: int) -> dict[str, Array]:
  """[B, ...] -> [k, B/k, ...]; micro-batch i holds rows i, i+k, ...

  Strided rows keep each device's rows local when B is sharded over devices.
  """
  out = {}
  for name, x in batch.items():
    if x.shape[0] % k:
      raise ValueError(f"batch of {x.shape[0]} rows ({name}) is not divisible into "
                       f"{k} micro-batches")
    x = x.reshape((x.shape[0] // k, k) + x.shape[1:])
    out[name] = jnp.swapaxes(x, 0, 1)
  return out


def _init_stats(stats_shape: PyTree) -> PyTree:
  out = {}
  for key, sub in stats_shape.items():
    fill = {"mins": jnp.inf, "maxs": -jnp.inf}.get(key, 0.0)
    out[key] = jax.tree.map(lambda s, f=fill: jnp.full(s.shape, f, s.dtype), sub)
  return out


def make_gradient_fn(fmodel: FunctionalModel, objective: Objective,
                     micro_batches: int = 1, *, logits_chunk: int = 0,
                     temperature: float = 1.0,
                     batch_spec: Optional[PartitionSpec] = None,
                     grad_shardings: Optional[PyTree] = None) -> Callable:
  """`(params, model_state, batch) -> (loss, grads, stats, expert_counts)`.

  Gradients are accumulated in float32 over `micro_batches` slices of the batch with
  `lax.scan`; each slice's loss is divided by the whole batch's denominator, so the
  sums equal the loss and gradient of the whole batch. One micro-batch is one gradient,
  with no accumulator. `batch_spec` shards a
  micro-batch's leading dimension inside the loop and `grad_shardings` (those of
  the params) keep the float32 accumulator sharded (when compiled on a mesh).
  """

  def loss_fn(params, model_state, batch, denominator):
    logp, entropy, aux = fmodel.batch_logprobs(params, model_state, batch, logits_chunk,
                                               temperature)
    numerator, stats = objective.terms(logp, entropy, batch)
    return numerator / denominator, (stats, expert_counts(aux))

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  def constrain(mb):
    if batch_spec is None:
      return mb
    return {n: jax.lax.with_sharding_constraint(
        x, PartitionSpec(*batch_spec, *([None] * (x.ndim - 1)))) for n, x in mb.items()}

  def shard_like_params(grads):
    if grad_shardings is None:
      return grads
    return jax.tree.map(jax.lax.with_sharding_constraint, grads, grad_shardings)

  def gradients(params, model_state, batch):
    batch = {name: batch[name] for name in objective.keys}
    denominator = objective.denominator(batch)
    # Shared prompts go whole to every micro-batch (whose strided rows keep their
    # groups in order: `split_micro_batches`); the rows are split.
    prompts = {k: batch.pop(k) for k in PROMPT_KEYS if k in batch}
    if micro_batches == 1:  # nothing to accumulate: no zero-filled float32 copy of
      # the parameters to add the one gradient to (the same sums: 0 + g = g). More
      # micro-batches keep the zero start: starting the scan from the first one's
      # gradient would put the gradient program in the executable twice.
      (loss, (stats, counts)), grads = grad_fn(params, model_state,
                                               {**constrain(batch), **prompts}, denominator)
      return loss, shard_like_params(grads), stats, counts
    micro = split_micro_batches(batch, micro_batches)

    def body(carry, mb):
      grads_acc, loss_acc, stats_acc, counts_acc = carry
      (loss, (stats, counts)), grads = grad_fn(params, model_state,
                                               {**constrain(mb), **prompts}, denominator)
      grads_acc = shard_like_params(
          jax.tree.map(lambda a, g: a + g.astype(a.dtype), grads_acc, grads))
      counts_acc = jax.tree.map(jnp.add, counts_acc, counts)
      return (grads_acc, loss_acc + loss, merge_stats(stats_acc, stats),
              counts_acc), None

    first = {**jax.tree.map(lambda x: x[0], micro), **prompts}
    _, (stats_shape, counts_shape) = jax.eval_shape(
        loss_fn, params, model_state, first, denominator)
    init = (shard_like_params(
        jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)),
            jnp.zeros((), jnp.float32), _init_stats(stats_shape),
            jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), counts_shape))
    (grads, loss, stats, counts), _ = jax.lax.scan(body, init, micro)
    grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grads, params)
    return loss, grads, stats, counts

  return gradients


def make_train_step(fmodel: FunctionalModel, objective: Objective,
                    opt_config: optim.OptimizerConfig,
                    config: StepConfig = StepConfig(), *,
                    batch_spec: Optional[PartitionSpec] = None,
                    grad_shardings: Optional[PyTree] = None
                    ) -> Callable[[TrainState, Mapping[str, Array]],
                                  tuple[TrainState, dict]]:
  """The pure (uncompiled) step `(state, batch) -> (state, metrics)`; see
  `make_gradient_fn` for the sharding arguments."""
  optimizer = optim.make_optimizer(opt_config)
  schedule = optim.learning_rate_schedule(opt_config)
  gradients = make_gradient_fn(fmodel, objective, config.micro_batches,
                               logits_chunk=config.logits_chunk,
                               temperature=config.temperature, batch_spec=batch_spec,
                               grad_shardings=grad_shardings)

  def step(state: TrainState, batch: Mapping[str, Array]):
    loss, grads, stats, counts = gradients(state.params, state.model_state, batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    model_state = state.model_state
    if counts is not None and config.expert_bias_rate:
      model_state = fmodel.balance_experts(state.params, model_state, counts,
                                           config.expert_bias_rate)
    grad_norm = optax.tree.norm(grads)  # before clipping
    # A non-finite loss or gradient norm skips the update: parameters, optimizer and
    # model state stay as they were; the step still counts (train.faults.NonFiniteGuard).
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    params, opt_state, model_state = jax.tree.map(
        lambda new, old: jnp.where(finite, new, old),
        (params, opt_state, model_state),
        (state.params, state.opt_state, state.model_state))
    metrics = {"loss": loss, "grad_norm": grad_norm,
               "clipped": optim.clip_fired(grad_norm, opt_config),
               "learning_rate": schedule(state.step),
               "skipped_nonfinite": 1.0 - finite.astype(jnp.float32),
               **finalize_stats(stats), **objective.batch_metrics(batch)}
    new_state = state.replace(step=state.step + 1, params=params,
                              model_state=model_state, opt_state=opt_state)
    return new_state, metrics

  return step


def init_state(fmodel: FunctionalModel, opt_config: optim.OptimizerConfig,
               seed: int = 0, shardings: Optional[TrainState] = None) -> TrainState:
  """A fresh TrainState (new buffers, laid out as `shardings`, default all on the first
  local device) from the model's current variables; `seed` seeds the run's PRNG key.

  Its arrays are committed to their devices, as a restored state's and every step's
  output are: a jitted step compiles once for all of them (a state mixing uncommitted
  and committed arrays compiles a second time at the next step)."""
  optimizer = optim.make_optimizer(opt_config)

  def make(params, model_state):
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      model_state=model_state, opt_state=optimizer.init(params),
                      rng=jax.random.PRNGKey(seed))

  if shardings is None:
    shardings = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  return jax.jit(make, out_shardings=shardings)(fmodel.params, fmodel.model_state)


def abstract_state(fmodel: FunctionalModel, opt_config: optim.OptimizerConfig,
                   shardings: Optional[TrainState] = None) -> TrainState:
  """ShapeDtypeStructs of the TrainState laid out as `shardings` (default: all on
  the first local device): the target for restoring a checkpoint."""
  shapes = jax.eval_shape(lambda: init_state(fmodel, opt_config))
  if shardings is None:
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    shardings = jax.tree.map(lambda _: device, shapes)
  return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                      shapes, shardings)


def state_shardings(fmodel: FunctionalModel, opt_config: optim.OptimizerConfig,
                    mesh: Mesh) -> TrainState:
  """NamedShardings of every TrainState leaf: optimizer moments follow params."""
  params_sh, rest_sh = fmodel.shardings(mesh)
  replicated = NamedSharding(mesh, PartitionSpec())
  optimizer = optim.make_optimizer(opt_config)
  opt_shape = jax.eval_shape(optimizer.init, fmodel.params)
  opt_sh = optax.tree_map_params(
      optimizer, lambda _, sharding: sharding, opt_shape, params_sh,
      transform_non_params=lambda _: replicated)
  return TrainState(step=replicated, params=params_sh, model_state=rest_sh,
                    opt_state=opt_sh, rng=replicated)


def compile_step(step: Callable, batch_keys: Sequence[str],
                 mesh: Optional[Mesh] = None,
                 shardings: Optional[TrainState] = None) -> Callable:
  """`jax.jit` of `step` with the state donated; on `mesh`, with in/out shardings
  (`shardings` of the state, the batch split over the data axes, metrics
  replicated) and traced under that mesh."""
  if mesh is None:
    return jax.jit(step, donate_argnums=0)
  replicated = NamedSharding(mesh, PartitionSpec())
  batch_sh = {k: replicated if k in PROMPT_KEYS else
              NamedSharding(mesh, batch_partition_spec(mesh)) for k in batch_keys}
  jitted = jax.jit(step, in_shardings=(shardings, batch_sh),
                   out_shardings=(shardings, replicated), donate_argnums=0)

  def run(state, batch):
    with jax.set_mesh(mesh):
      return jitted(state, batch)

  run.jitted = jitted
  return run


def build_step(fmodel: FunctionalModel, objective: Objective,
               opt_config: optim.OptimizerConfig, config: StepConfig = StepConfig(),
               mesh: Optional[Mesh] = None) -> tuple[Callable, Optional[TrainState]]:
  """The compiled step for `objective` (and the state shardings on `mesh`)."""
  if mesh is None:
    step = make_train_step(fmodel, objective, opt_config, config)
    return compile_step(step, objective.keys), None
  shardings = state_shardings(fmodel, opt_config, mesh)
  step = make_train_step(fmodel, objective, opt_config, config,
                         batch_spec=batch_partition_spec(mesh),
                         grad_shardings=shardings.params)
  return compile_step(step, objective.keys, mesh, shardings), shardings
