"""Rollout sampling: `generate` (jitted prefill + `lax.while_loop` decode) and the
`Sampler` interface the trainer talks to."""

from rcca_jax.sampling.generate import SampleOutput, generate
from rcca_jax.sampling.sampler import JaxSampler, Sampler

__all__ = ["JaxSampler", "SampleOutput", "Sampler", "generate"]
