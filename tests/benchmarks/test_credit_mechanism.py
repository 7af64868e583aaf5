"""benchmarks/credit_mechanism.py: its math, and its report on a toy model and batch."""

import importlib.util
import pathlib
import sys

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from absl.testing import absltest

from experiments import tiny_cpu
from rcca_jax.data import chat
from rcca_jax.rl import optim
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import trainer as trainer_lib

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_script():
  spec = importlib.util.spec_from_file_location(
      "credit_mechanism", REPO / "benchmarks" / "credit_mechanism.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # dataclasses look their module up
  spec.loader.exec_module(module)
  return module


cm = load_script()


class MathTest(absltest.TestCase):

  def test_compare(self):
    got = cm.compare(np.asarray([3.0, 0.0]), np.asarray([1.0, 1.0]))
    self.assertAlmostEqual(got["cos"], 3 / (3 * np.sqrt(2)))
    self.assertAlmostEqual(got["norm_ratio"], 3 / np.sqrt(2))
    self.assertEqual(cm.compare(np.zeros(2), np.ones(2)), {"cos": 0.0, "norm_ratio": 0.0})

  def test_part_masks_cover_the_nonzero_advantage_tokens_once(self):
    adv = np.asarray([-1.0, 0.0, 2.0])
    wbar = np.asarray([[1, 3, 1, 1], [3, 1, 1, 1], [1.5, 1, 1, 1]], np.float32)
    mask = np.asarray([[0, 1, 1, 1], [1, 1, 1, 0], [0, 1, 1, 0]], np.float32)
    parts = cm.part_masks(adv, wbar, mask)
    np.testing.assert_array_equal(parts["neg_blamed"][0], [0, 1, 0, 0])
    np.testing.assert_array_equal(parts["neg_unblamed"][0], [0, 0, 1, 1])
    np.testing.assert_array_equal(parts["pos_unblamed"][2], [0, 1, 1, 0])
    self.assertEqual(parts["pos_blamed"].sum(), 0)  # the blamed token is outside the mask
    total = sum(parts.values())
    np.testing.assert_array_equal(total[1], 0)  # zero advantage: in no part
    np.testing.assert_array_equal(total[[0, 2]], mask[[0, 2]])

  def test_optimizer_update_accumulates_moments_at_fixed_params(self):
    params = {"w": jnp.ones((2, 2))}
    g1, g2 = {"w": jnp.full((2, 2), 1.0)}, {"w": jnp.full((2, 2), -3.0)}
    config = optim.OptimizerConfig(learning_rate=0.1, weight_decay=0.0, end_lr_ratio=1.0,
                                   max_grad_norm=0.0, eps=0.0)
    got = cm.optimizer_update(config, [g1, g2], params)["w"]
    m = (0.9 * 0.1 * 1.0 + 0.1 * -3.0) / (1 - 0.9**2)
    v = (0.999 * 0.001 * 1.0 + 0.001 * 9.0) / (1 - 0.999**2)
    np.testing.assert_allclose(got, np.full((2, 2), -0.1 * m / np.sqrt(v)), rtol=1e-5)


def toy_config():
  config = tiny_cpu.get_config()
  config.model.update(hidden_size=32, intermediate_size=64)
  config.data.families = ("dark_mode",)
  config.rl.update(group_size=4, prompts_per_step=2, max_new_tokens=12)
  config.rl.optimizer.max_grad_norm = 1e-3  # clipping fires
  config.eval.enabled = False
  config.credit = ml_collections.ConfigDict(dict(direct=3.0, context=1.5, cap=4.0,
                                                 blame="evaluator", negative_unblamed=1.0))
  config.arms = ml_collections.ConfigDict(dict(
      grpo="rl.policy_loss=grpo", rcca="rl.policy_loss=rcca",
      rcca_focus="rl.policy_loss=rcca;credit.negative_unblamed=0.0",
      rcca_placebo="rl.policy_loss=rcca;credit.blame=placebo",
      # RCCA without blame and c = 1 is GRPO.
      flat="rl.policy_loss=rcca;rl.loss.rcca_c=1.0;credit.direct=1.0;credit.context=1.0"))
  return config


def toy_batch(trainer, seed):
  """Two prompts x 4 random responses with hand-made rewards and issues."""
  rng = np.random.default_rng(seed)
  tasks = trainer.tasks.rl()[:2]
  end = chat.eos_ids(trainer.tokenizer)
  out = []
  for t, task in enumerate(tasks):
    prompt = chat.format_prompt(trainer.tokenizer, task.request)
    for i in range(4):
      tokens = [int(x) for x in rng.integers(10, 3000, 12)]
      text, offsets = rollouts_lib.decode_with_offsets(trainer.tokenizer, tokens, end)
      issues = [{"direct": [[0, max(len(text) // 3, 1)]], "context": []}] if i % 2 else []
      out.append(rollouts_lib.Rollout(
          task=task, sample_id=i, prompt=prompt, tokens=tokens,
          logprobs=np.full(len(tokens), -8.0, np.float32), text=text, offsets=offsets,
          seed=seed, record={"reward": [0.2, 0.9, 0.5, 0.1][(i + t) % 4],
                             "issues": issues}))
  return out


@pytest.mark.slow  # compiles the gradient of five losses
class MeasureTest(absltest.TestCase):

  def test_report_on_a_toy_batch(self):
    workdir = self.create_tempdir().full_path
    with trainer_lib.Trainer(toy_config(), workdir) as trainer:
      state = trainer.rl_state_from(trainer.programs.fresh_state(trainer.checkpoints.sft.opt_config))
      batches = [toy_batch(trainer, 1), toy_batch(trainer, 2)]
      arms = ["rcca", "rcca_focus", "rcca_placebo", "flat"]
      report = cm.measure(trainer, state, batches, [0, 1], arms, 0, 0.5)
    self.assertLen(report["batches"], 2)
    for b in report["batches"]:
      flat = b["arms"]["flat"]
      for what in ("grad", "clipped_grad", "adam_fresh", "sgd"):
        self.assertAlmostEqual(flat[what]["cos"], 1.0, places=5)
        self.assertAlmostEqual(flat[what]["norm_ratio"], 1.0, places=4)
      for name in arms:
        a = b["arms"][name]
        self.assertTrue(a["clip_fired"])  # |g| > 1e-3
        # SGD's first step is -lr times the clipped gradient; clipping keeps directions.
        self.assertAlmostEqual(a["sgd"]["cos"], a["clipped_grad"]["cos"], places=5)
        self.assertAlmostEqual(a["grad"]["cos"], a["clipped_grad"]["cos"], places=5)
        self.assertAlmostEqual(a["sgd"]["norm_ratio"], a["clipped_grad"]["norm_ratio"],
                               places=4)
      # negative_unblamed=0 reaches the loss: the focused gradient is another one.
      self.assertGreater(abs(b["arms"]["rcca_focus"]["grad"]["norm_ratio"]
                             - b["arms"]["rcca"]["grad"]["norm_ratio"]), 1e-3)
      self.assertLess(b["split_residual"], 1e-4)  # the parts add up to the whole
      self.assertGreater(b["split"]["neg_blamed"]["tokens"], 0)
      tokens = sum(p["tokens"] for p in b["split"].values())
      self.assertLessEqual(tokens, 8 * 12)
      self.assertAlmostEqual(b["grpo"]["sgd_update_norm"], 0.5 * 1e-3, delta=1e-7)
    self.assertEqual(report["adam_after_k"]["k"], 2)
    self.assertAlmostEqual(report["adam_after_k"]["flat"]["cos"], 1.0, places=5)
    text = cm.table(report)
    self.assertIn("rcca_placebo", text)
    self.assertIn("neg_unblamed", text)

    saved = self.create_tempdir().full_path
    cm.save_batches(saved, [0, 1], batches, workdir)
    again = cm.load_batches(saved, [1], workdir)
    self.assertEqual([r.text for r in again[0]], [r.text for r in batches[1]])
    with self.assertRaisesRegex(ValueError, "holds batches of"):
      cm.load_batches(saved, [1], saved)
    with self.assertRaisesRegex(ValueError, "no batches of steps \\[5\\]"):
      cm.load_batches(saved, [5], workdir)
    cm.save_batches(saved, [7], batches[:1], workdir)  # added to the steps held
    self.assertEqual([[r.text for r in b] for b in cm.load_batches(saved, [0, 7], workdir)],
                     [[r.text for r in batches[0]]] * 2)
    with self.assertRaisesRegex(ValueError, "holds batches of"):
      cm.save_batches(saved, [8], batches[:1], saved)


if __name__ == "__main__":
  absltest.main()
