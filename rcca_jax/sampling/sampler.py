"""The `Sampler` interface between the RL trainer and whatever produces rollouts.

The trainer only calls `sample(...)` and, after each optimizer step,
`update_weights(model)`. `JaxSampler` runs `generate` in-process on the trainer's own
model (weights are shared, so updating is free), or on a copy of it whose matmul
weights are rounded to a narrower dtype (`rollout_dtype`, `rl.rollout_dtype`).

An external serving engine (vLLM or SGLang behind an OpenAI-compatible API) fits the
same interface with a class that:
  - in `sample`, sends one `/v1/completions` request per prompt with `prompt` given as
    the token-id list (no re-tokenisation), `n`, `max_tokens=max_new_tokens`,
    `temperature`, `top_p`, `top_k` and `seed` (engine extensions), the end tokens as
    `stop_token_ids`, and `logprobs=0` (the chosen token's log-prob only); it must ask
    for log-probs after the temperature but before top-k/top-p (the engines' log-prob
    "mode" setting) to match `SampleOutput.logprobs`, or leave them to the trainer's
    recomputation. It then right-pads the returned token ids with `pad_id` into the
    [len(prompts) * n, max_new_tokens] arrays, rows prompt-major;
  - in `update_weights`, writes the new parameters where the engine reads them
    (`LingForCausalLM.to_hf` produces a loadable checkpoint directory, or a shared
    memory / NCCL transfer) and calls the engine's weight-reload endpoint, returning
    only once the engine serves the new weights (otherwise rollouts go off-policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from flax import nnx
from jax.sharding import Mesh

from rcca_jax.models.layers import Embed, Linear
from rcca_jax.sampling.generate import GROW, PREFILL_CHUNK, SampleOutput, generate

ROLLOUT_DTYPES = ("", "bfloat16")


def rollout_copy(model: nnx.Module, dtype: str) -> nnx.Module:
  """A copy of `model` whose matmul weights (`Linear` kernels, embedding tables) are
  rounded to `dtype`; norms, biases, routers and gates stay as they are, and the
  compute dtype too: those layers then multiply in `dtype` and sum in the compute
  dtype (`layers.weight_product`). On CPUs with bfloat16 dot instructions (AVX512-BF16,
  AMX) the decode step runs faster; the samples and their log-probs are those of the
  rounded weights, not the policy's (`rl.recompute_old_logprobs` scores them with the
  policy's)."""
  copy = nnx.clone(model)  # new modules and variables over the same arrays
  for _, node in nnx.iter_graph(copy):
    if isinstance(node, Linear):
      node.kernel.set_value(node.kernel[...].astype(dtype))
    elif isinstance(node, Embed):
      node.embedding.set_value(node.embedding[...].astype(dtype))
  return copy


@runtime_checkable
class Sampler(Protocol):
  """Produces `n` continuations of each prompt with their log-probabilities."""

  def sample(self, prompts: Sequence[Sequence[int]], *, n: int = 1, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
             eos_ids: Sequence[int] = ()) -> SampleOutput:
    """Returns [len(prompts) * n, max_new_tokens] arrays; rows prompt-major (prompt i's
    samples are rows i*n ... i*n + n - 1). Semantics as `generate`."""

  def update_weights(self, model: nnx.Module) -> None:
    """Makes the next `sample` call use `model`'s current parameters."""


class JaxSampler:
  """In-process `Sampler` running `generate` on a `LingForCausalLM` (or a `rollout_copy`
  of it in `rollout_dtype`, made once per weight update)."""

  def __init__(self, model: nnx.Module, *, mesh: Mesh | None = None,
               pad_id: int | None = None, prefill_chunk: int = PREFILL_CHUNK,
               grow: int = GROW, rollout_dtype: str = ""):
    if rollout_dtype not in ROLLOUT_DTYPES:
      raise ValueError(f"JaxSampler: rollout_dtype={rollout_dtype!r} must be one of "
                       f"{ROLLOUT_DTYPES}")
    self.mesh = mesh
    self.pad_id = pad_id
    self.prefill_chunk = prefill_chunk
    self.grow = grow
    self.rollout_dtype = rollout_dtype
    self.update_weights(model)

  def update_weights(self, model: nnx.Module) -> None:
    self.model = rollout_copy(model, self.rollout_dtype) if self.rollout_dtype else model

  def sample(self, prompts: Sequence[Sequence[int]], *, n: int = 1, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
             eos_ids: Sequence[int] = ()) -> SampleOutput:
    if n < 1:
      raise ValueError(f"JaxSampler.sample: n={n} must be >= 1")
    rows = [list(prompt) for prompt in prompts for _ in range(n)]
    return generate(self.model, rows, max_new_tokens=max_new_tokens,
                    temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                    eos_ids=eos_ids, pad_id=self.pad_id, mesh=self.mesh,
                    prefill_chunk=self.prefill_chunk, grow=self.grow)
