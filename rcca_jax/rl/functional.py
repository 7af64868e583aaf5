"""The NNX adapter: a Flax NNX model as pure functions of (params, model_state).

`FunctionalModel` splits a module into a graph definition and pure-dict state (the
trainable parameters, and the rest: router correction biases, which load balancing
updates outside the gradient), merges them back inside jitted code, and computes the
per-token log-probabilities every objective needs (optionally without materialising
the [B, L, V] logits).
"""

from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from rcca_jax.models import layers
from rcca_jax.parallel import partitioning
from rcca_jax.sampling.generate import take_cache_rows

Array = jax.Array
PyTree = Any

# Names of router correction-bias variables (aux-loss-free balancing).
CORRECTION_BIAS_NAMES = ("correction_bias", "expert_bias", "e_score_correction_bias")


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
               attention_mask: Optional[Array], logits_chunk: int = 0,
               temperature: float = 1.0) -> tuple[Array, Array, Mapping[str, Any]]:
    """`token_logprobs` of the model's predictions at `temperature` (the policy
    softmax(logits / temperature): RL's sampling distribution), and its aux outputs.

    With `logits_chunk > 0` and a model that can return its final hidden states
    (`return_hidden=True`) and project them (`project_logits`), the [B, L, V] logits
    are never materialised: see `chunked_token_logprobs`.
    """
    model = self.merge(params, model_state)
    if logits_chunk and hasattr(model, "project_logits"):
      hidden, aux = model(input_ids, attention_mask=attention_mask, return_aux=True,
                          return_hidden=True)
      logp, entropy = chunked_token_logprobs(model.project_logits, hidden, input_ids,
                                             logits_chunk, temperature)
      return logp, entropy, aux
    out = model(input_ids, attention_mask=attention_mask, return_aux=True)
    logits, aux = out if isinstance(out, tuple) else (out, {})
    return (*token_logprobs(logits, input_ids, temperature), aux)

  def batch_logprobs(self, params: PyTree, model_state: PyTree,
                     batch: Mapping[str, Array], logits_chunk: int = 0,
                     temperature: float = 1.0) -> tuple[Array, Array, Mapping[str, Any]]:
    """`logprobs` of an RL batch's rows: `prefix_logprobs` when it stores each group's
    prompt once (`PROMPT_KEYS`: `batching.prefix_batch`), `loss_logprobs` when it
    lists the positions the loss reads (`loss_positions`), else of `input_ids` whole."""
    if "loss_positions" in batch:
      return self.loss_logprobs(params, model_state, batch["input_ids"],
                                batch["attention_mask"], batch["loss_positions"],
                                logits_chunk, temperature)
    if "prompt_ids" in batch:
      return self.prefix_logprobs(params, model_state, batch["prompt_ids"],
                                  batch["prompt_mask"], batch["input_ids"],
                                  batch["attention_mask"], temperature, logits_chunk)
    return self.logprobs(params, model_state, batch["input_ids"], batch["attention_mask"],
                         logits_chunk, temperature)

  def loss_logprobs(self, params: PyTree, model_state: PyTree, input_ids: Array,
                    attention_mask: Array, positions: Array, logits_chunk: int = 0,
                    temperature: float = 1.0) -> tuple[Array, Array, Mapping[str, Any]]:
    """`logprobs` [B, L] at the target `positions` [B, R] alone (0 elsewhere): the
    model's final hidden states, and the LM head and its softmax at the states that
    predict those targets only (`selected_token_logprobs`, `logits_chunk` of them at a
    time; models with `return_hidden` and `project_logits`)."""
    model = self.merge(params, model_state)
    hidden, aux = model(input_ids, attention_mask=attention_mask, return_aux=True,
                        return_hidden=True)
    logp, entropy = selected_token_logprobs(model.project_logits, hidden, input_ids,
                                            positions, temperature, logits_chunk)
    return logp, entropy, aux

  def prefix_logprobs(self, params: PyTree, model_state: PyTree, prompt_ids: Array,
                      prompt_mask: Array, input_ids: Array, attention_mask: Array,
                      temperature: float = 1.0, logits_chunk: int = 0
                      ) -> tuple[Array, Array, Mapping[str, Any]]:
    """Log-probs and entropies [B, R] of responses `input_ids` [B, R] whose groups of
    B / G rows share the left-padded prompts `prompt_ids` [G, P]: position j is token j
    given its prompt and tokens < j. Each prompt runs once, into a decoding cache
    (the model's `init_cache` / cached call) whose rows are repeated for its group; the
    responses then run over that cache, so the gradient of a prompt's positions is
    the sum over its group's responses, as when every row carried its prompt. The LM
    head runs once, on the final hidden states that predict the responses (the
    prompt's last, then each response's own but its last; `logits_chunk` of them at a
    time when > 0): no logits of prompt positions, and no [B, R, V] concatenation. Aux:
    expert counts of both calls (a prompt's tokens counted once)."""
    model = self.merge(params, model_state)
    groups, prompt_len = prompt_ids.shape
    rows, response_len = input_ids.shape
    cache = model.init_cache(groups, prompt_len + response_len)
    prompt_hidden, cache, prompt_aux = model(prompt_ids, attention_mask=prompt_mask,
                                             cache=cache, return_aux=True,
                                             return_hidden=True)
    per_group = rows // groups
    cache = take_cache_rows(cache, jnp.arange(rows) // per_group)
    hidden, _, aux = model(input_ids, attention_mask=attention_mask, cache=cache,
                           return_aux=True, return_hidden=True)
    hidden = jnp.concatenate(
        [jnp.repeat(prompt_hidden[:, -1:], per_group, axis=0), hidden[:, :-1]], axis=1)
    logp, entropy = _projected_logprobs(model.project_logits, hidden, input_ids,
                                        logits_chunk, temperature)
    counts = [a["expert_counts"] for a in (prompt_aux, aux) if "expert_counts" in a]
    return logp, entropy, {"expert_counts": sum(counts)} if counts else {}

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


def _target_logprobs(logits: Array, targets: Array, temperature: float = 1.0
                     ) -> tuple[Array, Array]:
  """log p(target) and the predictive entropy (no gradient) at each position, of
  softmax(logits / temperature)."""
  scaled = logits.astype(jnp.float32)
  if temperature != 1.0:
    scaled = scaled / temperature
  log_probs = jax.nn.log_softmax(scaled, axis=-1)
  # The target's entry by a one-hot select, not a gather: the same value (the other
  # entries add exact zeros), and its gradient is an elementwise select that fuses into
  # log_softmax's, where a gather's is a scatter into a zero-filled [.., vocab] buffer.
  vocab = jax.lax.broadcasted_iota(jnp.int32, log_probs.shape, log_probs.ndim - 1)
  logp = jnp.sum(jnp.where(vocab == targets[..., None], log_probs, 0.0), axis=-1)
  entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
  return logp, jax.lax.stop_gradient(entropy)


def _aligned(values: Array) -> Array:
  """Predictions for tokens 1.. -> aligned with `input_ids` (position 0 gets 0)."""
  return jnp.concatenate([jnp.zeros_like(values[:, :1]), values], axis=1)


def token_logprobs(logits: Array, input_ids: Array, temperature: float = 1.0
                   ) -> tuple[Array, Array]:
  """Log-probability of each token given the prefix, and the predictive entropy, under
  softmax(logits / temperature).

  Both [B, L] aligned with `input_ids`; position 0 (no prefix) is 0.
  """
  logp, entropy = _target_logprobs(logits[:, :-1], input_ids[:, 1:], temperature)
  return _aligned(logp), _aligned(entropy)


def selected_token_logprobs(project: Callable[[Array], Array], hidden: Array,
                            input_ids: Array, positions: Array, temperature: float = 1.0,
                            chunk: int = 0) -> tuple[Array, Array]:
  """`token_logprobs(project(hidden), input_ids, temperature)` at `positions` [B, R]
  (targets t >= 1; 0 pads) and 0 elsewhere, projecting only the states at t - 1
  (`chunk` > 0: that many positions at a time, as `chunked_token_logprobs`)."""
  rows = jnp.arange(hidden.shape[0])[:, None]
  logp, entropy = _projected_logprobs(project, hidden[rows, jnp.maximum(positions - 1, 0)],
                                      input_ids[rows, positions], chunk, temperature)
  keep = positions > 0
  zeros = jnp.zeros(input_ids.shape, jnp.float32)
  return (zeros.at[rows, positions].add(jnp.where(keep, logp, 0.0)),
          zeros.at[rows, positions].add(jnp.where(keep, entropy, 0.0)))


def _projected_logprobs(project: Callable[[Array], Array], h: Array, targets: Array,
                        chunk: int, temperature: float) -> tuple[Array, Array]:
  """`_target_logprobs(project(h), targets)` [B, N], `chunk` positions at a time when
  `chunk` > 0 (each chunk's logits made, reduced, dropped and remade in the backward
  pass: `layers.checkpointed_chunks`)."""
  if not chunk:
    return _target_logprobs(project(h), targets, temperature)
  width = h.shape[1]
  pad = -width % chunk
  logp, entropy = layers.checkpointed_chunks(
      lambda h_c, t_c: _target_logprobs(project(h_c), t_c, temperature),
      (jnp.pad(h, ((0, 0), (0, pad), (0, 0))), jnp.pad(targets, ((0, 0), (0, pad)))),
      chunk)
  return logp[:, :width], entropy[:, :width]


def chunked_token_logprobs(project: Callable[[Array], Array], hidden: Array,
                           input_ids: Array, chunk: int, temperature: float = 1.0
                           ) -> tuple[Array, Array]:
  """`token_logprobs(project(hidden), input_ids, temperature)` computed `chunk`
  positions at a time, so memory holds one chunk of logits [B, chunk, V] instead of
  the sequence's (`_projected_logprobs`).
  """
  logp, entropy = _projected_logprobs(project, hidden[:, :-1], input_ids[:, 1:], chunk,
                                      temperature)
  return _aligned(logp), _aligned(entropy)
