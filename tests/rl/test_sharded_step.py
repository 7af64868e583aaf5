"""The train step sharded over 8 fake CPU devices matches the single-device step.

JAX fixes its device count when it initialises, so the 8-device part runs in a child
process started with XLA_FLAGS=--xla_force_host_platform_device_count=8.
"""

import json
import sys

import pytest
from absl.testing import absltest

from tests.fixtures import rl_fixtures


def child() -> None:
  """Runs 2 steps on one device and on a (data, fsdp, expert, tensor) mesh."""
  import jax  # pylint: disable=import-outside-toplevel
  from jax.sharding import AxisType  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import objective as objective_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import optim  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import train_step as ts  # pylint: disable=import-outside-toplevel

  assert len(jax.devices()) == 8, jax.devices()
  opt = optim.OptimizerConfig(learning_rate=1e-3, warmup_steps=1, total_steps=10)
  fmodel = ts.FunctionalModel(rl_fixtures.small_model())
  objective = ts.PolicyObjective(objective_lib.preset("rcca", kl_beta=0.02), group_size=4)
  batches = [ts.numpy_batch(rl_fixtures.rl_batch(seed=s), objective.keys)
             for s in (11, 12)]

  def run(step, state):
    history = []
    for batch in batches:
      state, metrics = step(state, batch)
      history.append(jax.device_get(metrics))
    return jax.device_get(state), history, state

  single_step, _ = ts.build_step(fmodel, objective, opt, ts.StepConfig(micro_batches=1))
  single, single_metrics, _ = run(single_step, ts.init_state(fmodel, opt))

  mesh = jax.make_mesh((2, 2, 1, 2), ("data", "fsdp", "expert", "tensor"),
                       axis_types=(AxisType.Auto,) * 4)
  step, shardings = ts.build_step(fmodel, objective, opt,
                                  ts.StepConfig(micro_batches=2), mesh=mesh)
  sharded, sharded_metrics, live = run(
      step, ts.init_state(fmodel, opt, shardings=shardings))
  specs = {str(leaf.sharding.spec) for leaf in jax.tree.leaves(live.params)}

  # The gradients at the initial parameters, on the mesh (2 micro-batches) and on one
  # device, within float32 rounding of the summed terms (rl_fixtures).
  raw = rl_fixtures.rl_batch(seed=11)
  whole = jax.jit(ts.make_gradient_fn(fmodel, objective, 1))
  grads_single = whole(fmodel.params, fmodel.model_state, batches[0])[1]
  spec = ts.batch_partition_spec(mesh)
  on_mesh = jax.jit(
      ts.make_gradient_fn(fmodel, objective, 2, batch_spec=spec,
                          grad_shardings=shardings.params),
      in_shardings=(shardings.params, shardings.model_state,
                    {k: jax.sharding.NamedSharding(mesh, spec) for k in batches[0]}))
  with jax.set_mesh(mesh):
    grads_mesh = on_mesh(fmodel.params, fmodel.model_state, batches[0])[1]
  try:
    rl_fixtures.assert_within_rounding(
        jax.device_get(grads_mesh), jax.device_get(grads_single),
        rl_fixtures.gradient_term_scale(fmodel, raw, objective.loss),
        rl_fixtures.reduction_length(rl_fixtures.tiny_config(**rl_fixtures.SMALL), raw))
    grads = "within rounding"
  except AssertionError as e:
    grads = str(e)
  # AdamW moves an entry by at most lr * (1 - b1) / sqrt(1 - b2) per step (Kingma & Ba,
  # 2015, section 2.1; 3.16 lr here), plus the decay lr * wd * |p|: that bounds how far
  # two runs whose gradients differ only in rounding can drift (a near-zero gradient's
  # sign is rounding), here over two steps.
  lrs = [float(m["learning_rate"]) for m in single_metrics]
  move = sum(lr * ((1 - opt.b1) / (1 - opt.b2) ** 0.5 + opt.weight_decay) for lr in lrs)
  drift = max(float(abs(a - b).max())
              for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)))
  metric_diff = max(
      abs(float(a[n]) - float(b[n])) / max(abs(float(a[n])), 1e-6)
      for a, b in zip(single_metrics, sharded_metrics) for n in a)
  print(json.dumps({
      "grads": grads, "drift": drift, "max_move": 2 * move,
      "opt_state": rl_fixtures.max_scaled_diff(single.opt_state, sharded.opt_state),
      "model_state": rl_fixtures.max_scaled_diff(single.model_state,
                                                 sharded.model_state),
      "metrics": metric_diff,
      "loss": [float(m["loss"]) for m in sharded_metrics],
      "specs": sorted(specs),
      "step": int(sharded.step)}))


class ShardedStepTest(absltest.TestCase):

  @pytest.mark.slow
  def test_eight_device_step_matches_single_device(self):
    out = rl_fixtures.run_child(__file__)
    self.assertEqual(out["step"], 2)
    # The mesh really shards parameters over fsdp and tensor axes.
    self.assertTrue(any("fsdp" in s for s in out["specs"]), out["specs"])
    self.assertTrue(any("tensor" in s for s in out["specs"]), out["specs"])
    self.assertEqual(out["grads"], "within rounding", out)
    self.assertLess(out["drift"], out["max_move"], out)  # AdamW's own bound, see child
    self.assertLess(out["opt_state"], 1e-5, out)
    self.assertLess(out["model_state"], 1e-6, out)
    self.assertLess(out["metrics"], 1e-5, out)


if __name__ == "__main__":
  if "--child" in sys.argv:
    child()
  else:
    absltest.main()
