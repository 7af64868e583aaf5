"""orbax checkpoints: kill-and-resume equals an uninterrupted run; restore on a new mesh."""

import json
import sys

import jax
import numpy as np
import pytest
from absl.testing import absltest

from tests.fixtures import rl_fixtures
from rcca_jax.rl import checkpoint
from rcca_jax.rl import objective
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts

OPT = optim.OptimizerConfig(learning_rate=1e-2, warmup_steps=1, total_steps=8)
OBJECTIVE = ts.PolicyObjective(objective.preset("rcca"), group_size=4)
TOTAL_STEPS, STOP_AFTER = 5, 3


def make_batch(position: int, key: jax.Array) -> dict:
  """The batch at data `position`; the PRNG key perturbs it like a sampler would."""
  batch = rl_fixtures.rl_batch(seed=100 + position)
  noise = np.asarray(jax.random.normal(key, batch["old_logp"].shape))
  batch["old_logp"] = batch["old_logp"] + 0.1 * noise
  return ts.numpy_batch(batch, OBJECTIVE.keys)


def train(step, state, position: int, num_steps: int, ckpt=None, order=()):
  """`num_steps` steps from data `position`; returns state, position and the data
  order so far (`order`: the positions consumed before)."""
  order = list(order)
  for _ in range(num_steps):
    rng, key = jax.random.split(state.rng)
    state, _ = step(state.replace(rng=rng), make_batch(position, key))
    order.append(position)
    position += 1
    if ckpt is not None:
      ckpt.save(state, {"position": position, "order": list(order)})
  return state, position, order


def fresh_run(workdir: str, num_steps: int) -> dict:
  """What a (re)started job does: build everything anew, resume if a checkpoint
  exists, train, and report the final state."""
  with checkpoint.Checkpointer(workdir, max_to_keep=2) as ckpt:
    resuming = ckpt.latest_step() is not None
    # A resumed job's new model has other weights: the checkpoint must win.
    fmodel = ts.FunctionalModel(rl_fixtures.small_model(seed=123 if resuming else 0))
    step, _ = ts.build_step(fmodel, OBJECTIVE, OPT)
    if resuming:
      state, data = ckpt.restore(ts.abstract_state(fmodel, OPT))
      position, order = data["position"], list(data["order"])
    else:
      state, position, order = ts.init_state(fmodel, OPT, seed=7), 0, []
    state, position, order = train(step, state, position, num_steps, ckpt, order)
  with checkpoint.Checkpointer(workdir) as ckpt:
    kept = ckpt.all_steps()
  return {"state": jax.device_get(state), "order": order, "steps_kept": kept}


def uninterrupted():
  fmodel = ts.FunctionalModel(rl_fixtures.small_model(seed=0))
  step, _ = ts.build_step(fmodel, OBJECTIVE, OPT)
  state, _, order = train(step, ts.init_state(fmodel, OPT, seed=7), 0, TOTAL_STEPS)
  return step, jax.device_get(state), order


class ResumeTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    step, cls.final, cls.order = uninterrupted()
    cls.step = staticmethod(step)  # A jitted function would bind as a method.

  def assert_same_run(self, state, order):
    self.assertEqual(order, list(range(TOTAL_STEPS)))
    self.assertEqual(order, self.order)
    self.assertEqual(int(state.step), TOTAL_STEPS)
    np.testing.assert_array_equal(state.rng, self.final.rng)
    for name in ("params", "model_state", "opt_state"):
      self.assertEqual(rl_fixtures.max_scaled_diff(getattr(self.final, name),
                                                   getattr(state, name)), 0.0, name)

  def test_resume_with_fresh_objects_equals_uninterrupted_run(self):
    workdir = self.create_tempdir().full_path
    # First run: seed-0 model, stopped after STOP_AFTER steps.
    fmodel = ts.FunctionalModel(rl_fixtures.small_model(seed=0))
    with checkpoint.Checkpointer(workdir, max_to_keep=2) as ckpt:
      train(self.step, ts.init_state(fmodel, OPT, seed=7), 0, STOP_AFTER, ckpt)
    # Resume: new model object with other weights, new checkpointer, same data.
    other = ts.FunctionalModel(rl_fixtures.small_model(seed=123))
    with checkpoint.Checkpointer(workdir, max_to_keep=2) as ckpt:
      self.assertEqual(ckpt.all_steps(), [STOP_AFTER - 1, STOP_AFTER])  # Keep 2.
      state, data = ckpt.restore(ts.abstract_state(other, OPT))
      self.assertEqual(data["position"], STOP_AFTER)
      state, _, order = train(self.step, state, data["position"],
                              TOTAL_STEPS - STOP_AFTER, order=data["order"])
    self.assert_same_run(jax.device_get(state), order)

  @pytest.mark.slow
  def test_resume_in_fresh_processes(self):
    workdir = self.create_tempdir().full_path
    first = rl_fixtures.run_child(__file__, workdir, str(STOP_AFTER), devices=1)
    self.assertEqual(first["order"], list(range(STOP_AFTER)))
    second = rl_fixtures.run_child(__file__, workdir, str(TOTAL_STEPS - STOP_AFTER),
                                   devices=1)
    with checkpoint.Checkpointer(workdir) as ckpt:
      state, data = ckpt.restore(ts.abstract_state(
          ts.FunctionalModel(rl_fixtures.small_model()), OPT))
    self.assertEqual(second["steps_kept"], [TOTAL_STEPS - 1, TOTAL_STEPS])
    self.assert_same_run(jax.device_get(state), data["order"])


def mesh_child() -> None:
  """Saves a state sharded on one 8-device mesh; restores it on another and on one
  device; prints whether values and layouts came back right."""
  from jax.sharding import AxisType  # pylint: disable=import-outside-toplevel
  workdir = sys.argv[sys.argv.index("--mesh") + 1]
  fmodel = ts.FunctionalModel(rl_fixtures.small_model())
  names = ("data", "fsdp", "expert", "tensor")
  auto = (AxisType.Auto,) * 4
  mesh_a = jax.make_mesh((2, 2, 1, 2), names, axis_types=auto)
  mesh_b = jax.make_mesh((1, 4, 2, 1), names, axis_types=auto)
  sh_a = ts.state_shardings(fmodel, OPT, mesh_a)
  sh_b = ts.state_shardings(fmodel, OPT, mesh_b)
  state = ts.init_state(fmodel, OPT, seed=3, shardings=sh_a)
  with checkpoint.Checkpointer(workdir) as ckpt:
    ckpt.save(state, {"position": 9})
  with checkpoint.Checkpointer(workdir) as ckpt:
    on_b, data = ckpt.restore(ts.abstract_state(fmodel, OPT, sh_b))
    single, _ = ckpt.restore(ts.abstract_state(fmodel, OPT))
  host = jax.device_get(state)
  layouts_b = jax.tree.leaves(jax.tree.map(
      lambda x, s: x.sharding.is_equivalent_to(s, x.ndim), on_b, sh_b))
  print(json.dumps({
      "diff_b": rl_fixtures.max_scaled_diff(host, jax.device_get(on_b)),
      "diff_single": rl_fixtures.max_scaled_diff(host, jax.device_get(single)),
      "layouts_b": all(layouts_b),
      "changed_layouts": sum(
          not a.sharding.is_equivalent_to(b.sharding, a.ndim)
          for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(on_b))),
      "devices_single": max(len(x.sharding.device_set)
                            for x in jax.tree.leaves(single)),
      "position": data["position"]}))


class MeshChangeTest(absltest.TestCase):

  def test_restore_onto_another_mesh_and_one_device(self):
    out = rl_fixtures.run_child(__file__, "--mesh", self.create_tempdir().full_path)
    self.assertEqual(out["position"], 9)
    self.assertEqual(out["diff_b"], 0.0)
    self.assertEqual(out["diff_single"], 0.0)
    self.assertTrue(out["layouts_b"])
    self.assertGreater(out["changed_layouts"], 0)
    self.assertEqual(out["devices_single"], 1)


if __name__ == "__main__":
  if "--child" in sys.argv and "--mesh" in sys.argv:
    mesh_child()
  elif "--child" in sys.argv:
    workdir, num_steps = sys.argv[-2], int(sys.argv[-1])
    result = fresh_run(workdir, num_steps)
    print(json.dumps({"order": result["order"], "steps_kept": result["steps_kept"]}))
  else:
    absltest.main()
