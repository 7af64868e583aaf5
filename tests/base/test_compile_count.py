"""compile_count counts XLA compiles: a new shape compiles once, a cached one not
(inputs are host arrays: creating a jax array compiles a program of its own)."""

from absl.testing import absltest
import jax
import jax.numpy as jnp
import numpy as np

from rcca_jax.base import compile_count


class CompileCountTest(absltest.TestCase):

  def test_new_shape_compiles_once_and_cached_call_not(self):
    fn = jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)
    start = compile_count.snapshot()
    fn(np.ones((3, 5), np.float32)).block_until_ready()
    first = compile_count.since(start)
    self.assertEqual(first["compiles"], 1.0)
    self.assertGreater(first["compile_s"], 0.0)
    again = compile_count.snapshot()
    fn(np.zeros((3, 5), np.float32)).block_until_ready()  # the same shape: the cached program
    self.assertEqual(compile_count.since(again), {"compiles": 0.0, "compile_s": 0.0})
    fn(np.ones((4, 5), np.float32)).block_until_ready()
    self.assertEqual(compile_count.since(again)["compiles"], 1.0)


if __name__ == "__main__":
  absltest.main()
