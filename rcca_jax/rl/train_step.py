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
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rcca_jax.models import layers
from rcca_jax.parallel import partitioning
from rcca_jax.rl import grpo
from rcca_jax.rl import losses
from rcca_jax.rl import optim

Array = jax.Array
PyTree = Any

RL_KEYS = ("input_ids", "attention_mask", "loss_mask", "old_logp", "advantages",
           "wbar")
# Names of router correction-bias variables (aux-loss-free balancing).
CORRECTION_BIAS_NAMES = ("correction_bias", "expert_bias", "e_score_correction_bias")


@flax.struct.dataclass
class TrainState:
  """Everything a step changes; checkpointed as a whole."""
  step: Array  # int32 scalar: optimizer updates done.
  params: PyTree  # Trainable parameters (pure dict).
  model_state: PyTree  # Other model variables, e.g. router correction biases.
  opt_state: PyTree
  rng: Array  # uint32 [2]: the run's PRNG key (for sampling), carried through.


class FunctionalModel:
  """An NNX module split into a graph definition and pure-dict state.

  `trainable` selects the variables that get gradients (default: every nnx.Param
  except router correction biases); all other variables are `model_state`.
  """

  def __init__(self, model: nnx.Module, trainable: Any = None):
    if trainable is None:
      trainable = nnx.All(nnx.Param, nnx.Not(_is_correction_bias))
    self._trainable = trainable
    self.graphdef, params, rest = nnx.split(model, trainable, ...)
    self._params_def = jax.tree.structure(params)
    self._rest_def = jax.tree.structure(rest)
    self._params_template = params
    self._rest_template = rest
    self.params = nnx.to_pure_dict(params)
    self.model_state = nnx.to_pure_dict(rest)
    self._pure_params_def = jax.tree.structure(self.params)
    self._pure_rest_def = jax.tree.structure(self.model_state)

  def merge(self, params: PyTree, model_state: PyTree) -> nnx.Module:
    params = jax.tree.unflatten(self._params_def, jax.tree.leaves(params))
    rest = jax.tree.unflatten(self._rest_def, jax.tree.leaves(model_state))
    return nnx.merge(self.graphdef, params, rest)

  def balance_experts(self, params: PyTree, model_state: PyTree, counts: Array,
                      rate: float) -> PyTree:
    """model_state after the model's aux-loss-free router-bias update.

    Uses the model's `update_correction_bias(counts, rate)`; unchanged for models
    without one.
    """
    model = self.merge(params, model_state)
    if not hasattr(model, "update_correction_bias"):
      return model_state
    model.update_correction_bias(counts, rate)
    _, _, rest = nnx.split(model, self._trainable, ...)
    return jax.tree.unflatten(self._pure_rest_def, jax.tree.leaves(rest))

  def logprobs(self, params: PyTree, model_state: PyTree, input_ids: Array,
               attention_mask: Optional[Array], logits_chunk: int = 0
               ) -> tuple[Array, Array, Mapping[str, Any]]:
    """`token_logprobs` of the model's predictions, and its aux outputs.

    With `logits_chunk > 0` and a model that can return its final hidden states
    (`return_hidden=True`) and project them (`project_logits`), the [B, L, V] logits
    are never materialised: see `chunked_token_logprobs`.
    """
    model = self.merge(params, model_state)
    if logits_chunk and hasattr(model, "project_logits"):
      hidden, aux = model(input_ids, attention_mask=attention_mask, return_aux=True,
                          return_hidden=True)
      logp, entropy = chunked_token_logprobs(model.project_logits, hidden, input_ids,
                                             logits_chunk)
      return logp, entropy, aux
    out = model(input_ids, attention_mask=attention_mask, return_aux=True)
    logits, aux = out if isinstance(out, tuple) else (out, {})
    return (*token_logprobs(logits, input_ids), aux)

  def shardings(self, mesh: Mesh) -> tuple[PyTree, PyTree]:
    """NamedShardings of (params, model_state) from the logical-axis metadata."""
    def to_pure(template, pure_def):
      shardings = partitioning.state_shardings(template, mesh)
      leaves = jax.tree.leaves(shardings,
                               is_leaf=lambda x: isinstance(x, NamedSharding))
      return jax.tree.unflatten(pure_def, leaves)
    return (to_pure(self._params_template, self._pure_params_def),
            to_pure(self._rest_template, self._pure_rest_def))


def _is_correction_bias(path, variable) -> bool:
  """Router correction biases: updated by load balancing, not by the optimizer."""
  del variable
  return bool(path) and str(path[-1]) in CORRECTION_BIAS_NAMES


def _target_logprobs(logits: Array, targets: Array) -> tuple[Array, Array]:
  """log p(target) and the predictive entropy (no gradient) at each position."""
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  logp = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
  entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
  return logp, jax.lax.stop_gradient(entropy)


def _aligned(values: Array) -> Array:
  """Predictions for tokens 1.. -> aligned with `input_ids` (position 0 gets 0)."""
  return jnp.concatenate([jnp.zeros_like(values[:, :1]), values], axis=1)


def token_logprobs(logits: Array, input_ids: Array) -> tuple[Array, Array]:
  """Log-probability of each token given the prefix, and the predictive entropy.

  Both [B, L] aligned with `input_ids`; position 0 (no prefix) is 0.
  """
  logp, entropy = _target_logprobs(logits[:, :-1], input_ids[:, 1:])
  return _aligned(logp), _aligned(entropy)


def chunked_token_logprobs(project: Callable[[Array], Array], hidden: Array,
                           input_ids: Array, chunk: int) -> tuple[Array, Array]:
  """`token_logprobs(project(hidden), input_ids)` computed `chunk` positions at a time.

  Each chunk's logits [B, chunk, V] are made, reduced and dropped, and remade in the
  backward pass (`layers.checkpointed_chunks`), so memory holds one chunk of logits
  instead of the sequence's.
  """
  length = hidden.shape[1] - 1
  pad = -length % chunk
  h = jnp.pad(hidden[:, :-1], ((0, 0), (0, pad), (0, 0)))
  targets = jnp.pad(input_ids[:, 1:], ((0, 0), (0, pad)))
  logp, entropy = layers.checkpointed_chunks(
      lambda h_c, t_c: _target_logprobs(project(h_c), t_c), (h, targets), chunk)
  return _aligned(logp[:, :length]), _aligned(entropy[:, :length])


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
        batch["loss_mask"], batch.get("ref_logp"), self.loss)
    stats["token_sums"]["entropy"] = jnp.sum(entropy * batch["loss_mask"])
    return numerator, stats

  def batch_metrics(self, batch):
    return {"zero_advantage_groups": grpo.zero_advantage_group_fraction(
        batch["advantages"], self.group_size)}


def expert_counts(aux: Mapping[str, Any]) -> Optional[Array]:
  """The per-MoE-layer expert token counts in the model's aux output (or None)."""
  return aux.get("expert_counts") if isinstance(aux, Mapping) else None


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """Gradient-accumulation slices per step, and the router-bias update rate."""
  micro_batches: int = 1
  expert_bias_rate: float = 1e-3  # 0 disables the correction-bias update.
  # Positions per logits chunk in the loss (0: whole sequence). Long sequences with a
  # large vocabulary need it: 8k tokens x 157k vocab is 5 GB of float32 logits per row.
  logits_chunk: int = 0


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
                     batch_spec: Optional[PartitionSpec] = None,
                     grad_shardings: Optional[PyTree] = None) -> Callable:
  """`(params, model_state, batch) -> (loss, grads, stats, expert_counts)`.

  Gradients are accumulated in float32 over `micro_batches` slices of the batch with
  `lax.scan`; each slice's loss is divided by the whole batch's denominator, so the
  sums equal the loss and gradient of the whole batch. `batch_spec` shards a
  micro-batch's leading dimension inside the loop and `grad_shardings` (those of
  the params) keep the float32 accumulator sharded (when compiled on a mesh).
  """

  def loss_fn(params, model_state, batch, denominator):
    logp, entropy, aux = fmodel.logprobs(params, model_state, batch["input_ids"],
                                         batch["attention_mask"], logits_chunk)
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
    micro = split_micro_batches(batch, micro_batches)

    def body(carry, mb):
      grads_acc, loss_acc, stats_acc, counts_acc = carry
      (loss, (stats, counts)), grads = grad_fn(params, model_state, constrain(mb),
                                               denominator)
      grads_acc = shard_like_params(
          jax.tree.map(lambda a, g: a + g.astype(a.dtype), grads_acc, grads))
      counts_acc = jax.tree.map(jnp.add, counts_acc, counts)
      return (grads_acc, loss_acc + loss, grpo.merge_stats(stats_acc, stats),
              counts_acc), None

    first = jax.tree.map(lambda x: x[0], micro)
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
                               logits_chunk=config.logits_chunk, batch_spec=batch_spec, grad_shardings=grad_shardings)

  def step(state: TrainState, batch: Mapping[str, Array]):
    loss, grads, stats, counts = gradients(state.params, state.model_state, batch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    model_state = state.model_state
    if counts is not None and config.expert_bias_rate:
      model_state = fmodel.balance_experts(state.params, model_state, counts,
                                           config.expert_bias_rate)
    metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads),
               "learning_rate": schedule(state.step),
               **grpo.finalize_stats(stats), **objective.batch_metrics(batch)}
    new_state = state.replace(step=state.step + 1, params=params,
                              model_state=model_state, opt_state=opt_state)
    return new_state, metrics

  return step


def init_state(fmodel: FunctionalModel, opt_config: optim.OptimizerConfig,
               seed: int = 0, shardings: Optional[TrainState] = None) -> TrainState:
  """A fresh TrainState (new buffers, laid out as `shardings` when given) from the
  model's current variables; `seed` seeds the run's PRNG key."""
  optimizer = optim.make_optimizer(opt_config)

  def make(params, model_state):
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      model_state=model_state, opt_state=optimizer.init(params),
                      rng=jax.random.PRNGKey(seed))

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


def batch_partition_spec(mesh: Mesh) -> PartitionSpec:
  """Leading (batch) dimension over the mesh's data-parallel axes."""
  return partitioning.logical_to_spec(("batch",), mesh.axis_names, dict(mesh.shape))


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
  batch_sh = {k: NamedSharding(mesh, batch_partition_spec(mesh)) for k in batch_keys}
  replicated = NamedSharding(mesh, PartitionSpec())
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


def numpy_batch(batch: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """Checks a host batch and returns the arrays the step uses, in its dtypes.

  Per-token values outside response tokens are replaced by neutral ones (0, or 1
  for `wbar`); raises ValueError naming the entry (and rows) that is wrong.
  """
  missing = [k for k in keys if k not in batch]
  if missing:
    raise ValueError(f"batch is missing {missing}; it has {sorted(batch)}")
  ids = np.asarray(batch["input_ids"])
  if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
    raise ValueError(f"input_ids must be an integer [B, L] array, got {ids.dtype} "
                     f"{ids.shape}")
  out = {"input_ids": ids.astype(np.int32)}
  for name in keys:
    if name == "input_ids":
      continue
    x = np.asarray(batch[name], np.float32)
    want = ids.shape[:1] if name == "advantages" else ids.shape
    if x.shape != want:
      raise ValueError(f"{name} has shape {x.shape}, expected {want}")
    out[name] = x
  mask = out["loss_mask"]
  if np.any(mask[:, 0]):
    raise ValueError("loss_mask[:, 0] must be 0: the first token has no prefix")
  for name, x in out.items():
    if name in ("input_ids", "loss_mask", "attention_mask", "advantages"):
      bad = ~np.isfinite(x) if x.dtype != np.int32 else np.zeros_like(x, bool)
    else:
      x = np.where(mask > 0, x, 1.0 if name == "wbar" else 0.0).astype(np.float32)
      out[name] = x
      bad = ~np.isfinite(x)
    if bad.any():
      rows = sorted(set(np.nonzero(bad.reshape(bad.shape[0], -1))[0].tolist()))
      raise ValueError(f"{name} has non-finite values in rows {rows}")
  return out


def pack_batch(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], *,
               max_len: int, pad_id: int = 0,
               per_token: Optional[Mapping[str, Sequence[Sequence[float]]]] = None,
               per_sequence: Optional[Mapping[str, Sequence[float]]] = None,
               token_fill: Optional[Mapping[str, float]] = None
               ) -> dict[str, np.ndarray]:
  """Right-padded [B, max_len] rows `prompt + response` in the step's batch layout.

  `per_token[name][i]` holds one value per response token of row i (e.g. the
  sampler's log-probs or the diagnostic weights); it is placed at those tokens'
  positions, `token_fill[name]` (default 0) elsewhere. A response that does not fit
  is cut at `max_len`; a prompt longer than `max_len - 1` keeps its last tokens.
  """
  if len(prompts) != len(responses):
    raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
  per_token = dict(per_token or {})
  token_fill = dict(token_fill or {})
  b = len(prompts)
  out = {"input_ids": np.full((b, max_len), pad_id, np.int32),
         "attention_mask": np.zeros((b, max_len), np.float32),
         "loss_mask": np.zeros((b, max_len), np.float32)}
  for name in per_token:
    out[name] = np.full((b, max_len), token_fill.get(name, 0.0), np.float32)
  for i, (prompt, response) in enumerate(zip(prompts, responses)):
    prompt = list(prompt)[-(max_len - 1):]
    n_resp = min(len(response), max_len - len(prompt))
    row = prompt + list(response)[:n_resp]
    out["input_ids"][i, :len(row)] = row
    out["attention_mask"][i, :len(row)] = 1.0
    out["loss_mask"][i, len(prompt):len(row)] = 1.0
    for name, values in per_token.items():
      if len(values[i]) != len(response):
        raise ValueError(f"row {i}: {name} has {len(values[i])} values for "
                         f"{len(response)} response tokens")
      out[name][i, len(prompt):len(row)] = np.asarray(values[i], np.float32)[:n_resp]
  for name, values in (per_sequence or {}).items():
    out[name] = np.asarray(values, np.float32).reshape(b)
  return out
