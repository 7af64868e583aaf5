"""`generate` on a (data, fsdp, expert, tensor) mesh of 8 fake CPU devices, its cache
grown as it goes, matches the single-device result.

JAX fixes its device count when it initialises, so the test runs this file as a child
process, which sets XLA_FLAGS at the very top, before importing jax (setting it from
pytest would give every other test in the session 8 devices too).
"""

import os
import sys

if __name__ == "__main__":
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_force_host_platform_device_count=8")
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# pylint: disable=wrong-import-position
import json
import subprocess

import jax
import numpy as np
import pytest
from absl.testing import absltest

from tests.fixtures.hf_tiny import load_ling, make_hf_model
from rcca_jax.parallel.mesh import make_mesh
from rcca_jax.parallel.partitioning import shard_module
from rcca_jax.sampling import JaxSampler
from rcca_jax.sampling.generate import init_cache
# pylint: enable=wrong-import-position

TOL = 1e-5


def child() -> None:
  """Samples on one device and on the mesh; prints a JSON summary."""
  jax.config.update("jax_default_matmul_precision", "highest")
  assert jax.device_count() == 8, jax.devices()
  model = load_ling(make_hf_model(11, num_hidden_layers=6))
  rng = np.random.default_rng(0)
  prompts = [rng.integers(2, 96, size=n).tolist() for n in (7, 3, 12)]
  kwargs = dict(n=2, max_new_tokens=12, temperature=0.9, top_k=20, seed=4)
  single = JaxSampler(model).sample(prompts, **kwargs)

  mesh = make_mesh("data:2,fsdp:2,expert:1,tensor:2")
  shard_module(model, mesh)
  # On the mesh the cache also grows (4 slots at a time, twice over 12 new tokens).
  sharded = JaxSampler(model, mesh=mesh, grow=4).sample(prompts, **kwargs)
  cache = init_cache(model, 8, 16, mesh=mesh)
  kda_state = cache.prefix[0].recurrent  # Unrolled layer 0: [B, H, K, V].
  mla_latent = cache.groups[1].latent  # Stacked over groups: [G, B, S, C].
  print(json.dumps({
      "tokens_equal": bool(np.array_equal(single.tokens, sharded.tokens)),
      "lengths_equal": bool(np.array_equal(single.lengths, sharded.lengths)),
      "logprob_diff": float(np.max(np.abs(single.logprobs - sharded.logprobs))),
      "kda_state_spec": str(kda_state.sharding.spec),
      "mla_latent_spec": str(mla_latent.sharding.spec),
      "embed_spec": str(model.embed_tokens.embedding[...].sharding.spec),
  }))


@pytest.mark.slow
class ShardedSamplingTest(absltest.TestCase):

  def test_mesh_matches_single_device(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    self.assertTrue(result["tokens_equal"], result)
    self.assertTrue(result["lengths_equal"], result)
    self.assertLess(result["logprob_diff"], TOL)
    self.assertEqual(result["kda_state_spec"], "P(('data', 'fsdp'),)")
    self.assertEqual(result["mla_latent_spec"], "P(None, ('data', 'fsdp'))")
    self.assertIn("tensor", result["embed_spec"])


if __name__ == "__main__":
  child()
