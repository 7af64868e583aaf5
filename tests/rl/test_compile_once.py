"""A jitted train step compiles once over a run: fresh, restored and stepped states
all hold committed arrays. (Once per RL row length: `test_length_bucket.py` counts the
programs of steps whose batches fall in several `rl.length_bucket` lengths.)"""

import jax
import numpy as np
from absl.testing import absltest

from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step
from tests.fixtures import rl_fixtures


class CompileOnceTest(absltest.TestCase):

  def test_fresh_state_is_committed(self):
    fmodel = train_step.FunctionalModel(rl_fixtures.tiny_model())
    state = train_step.init_state(fmodel, optim.OptimizerConfig(total_steps=4))
    self.assertTrue(all(x.committed for x in jax.tree.leaves(state)))

  def test_restored_parameters_in_a_fresh_state_compile_once(self):
    # The RL stage: a fresh optimizer state around parameters restored from the SFT
    # checkpoint (committed to their device, as orbax restores them).
    fmodel = train_step.FunctionalModel(rl_fixtures.tiny_model())
    opt = optim.OptimizerConfig(learning_rate=1e-3, total_steps=4)
    objective = train_step.PolicyObjective(objective_lib.LossConfig(), 4)
    step, _ = train_step.build_step(fmodel, objective, opt)
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    fresh = train_step.init_state(fmodel, opt)
    state = fresh.replace(params=jax.device_put(fresh.params, device))
    batch = {k: np.asarray(v) for k, v in rl_fixtures.rl_batch().items()
             if k in objective.keys}
    for _ in range(3):
      state, _ = step(state, batch)
    self.assertEqual(step._cache_size(), 1)  # pylint: disable=protected-access


if __name__ == "__main__":
  absltest.main()
