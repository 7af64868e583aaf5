"""RL batches that store each group's prompt once (`rl.shared_prefix`, issue 50): the
layout, and the same log-probs, loss and gradients as rows that each carry their
prompt, within float32 rounding, on the tiny Llama and the tiny Ling (KDA and MLA)."""

import dataclasses
import re

import jax
import numpy as np

from absl.testing import absltest, parameterized

from rcca_jax.data import batching
from rcca_jax.rl import batch_updates
from rcca_jax.rl import logprobs as logprobs_lib
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step as ts
from rcca_jax.train import rollouts
from tests.fixtures import rl_fixtures

OPT = optim.OptimizerConfig(learning_rate=1e-3, total_steps=10)
GROUP = 4
# Two groups: prompts of 5 and 3 tokens, responses of 2 to 14.
PROMPTS = (5, 3)
RESPONSES = ((4, 12, 9, 14), (2, 11, 8, 6))


def _rollouts(seed: int = 0) -> list[rollouts.Rollout]:
  rng = np.random.default_rng(seed)
  out = []
  for p, lengths in zip(PROMPTS, RESPONSES):
    prompt = [int(t) for t in rng.integers(2, 64, p)]
    out += [rl_fixtures.random_rollout(rng, prompt, n, i) for i, n in enumerate(lengths)]
  return out


def _batches(items, bucket: int = 0):
  """(rows with their prompts, max_len 24; the shared-prefix batch, prompts <= 8)."""
  adv = rollouts.group_advantages(items, GROUP)
  plain = rollouts.rl_batch(items, adv, max_len=24, pad_id=0)
  shared = rollouts.rl_batch(items, adv, max_len=24, pad_id=0, length_bucket=bucket,
                             shared_prefix=(GROUP, 8))
  return plain, shared


def _response_part(plain, shared, values):
  """`values` [B, L] of the plain layout at the shared layout's response positions."""
  starts = plain["loss_mask"].argmax(axis=1)
  width = shared["input_ids"].shape[1]
  index = np.minimum(starts[:, None] + np.arange(width)[None], values.shape[1] - 1)
  return np.where(shared["attention_mask"] > 0,
                  np.take_along_axis(values, index, axis=1), 0.0)


class LayoutTest(absltest.TestCase):

  def test_prompts_once_left_padded_and_the_responses_alone(self):
    items = _rollouts()
    plain, shared = _batches(items)
    self.assertEqual(shared["prompt_ids"].shape, (2, 8))
    self.assertEqual(shared["input_ids"].shape, (8, 16))  # max_len 24 - 8
    for g, p in enumerate(PROMPTS):
      np.testing.assert_array_equal(shared["prompt_ids"][g, -p:], items[g * GROUP].prompt)
      np.testing.assert_array_equal(shared["prompt_ids"][g, :-p], 0)
      np.testing.assert_array_equal(shared["prompt_mask"][g], [0] * (8 - p) + [1] * p)
    for name in ("input_ids", "loss_mask", "old_logp"):
      np.testing.assert_array_equal(
          shared[name], _response_part(plain, shared, plain[name]), err_msg=name)
    np.testing.assert_array_equal(shared["attention_mask"], shared["loss_mask"])
    np.testing.assert_array_equal(shared["wbar"][0, 4:], 1.0)  # the fill off a response
    np.testing.assert_array_equal(shared["advantages"], plain["advantages"])
    # Bucketed: responses of at most 14 tokens in buckets of 4 -> 16; prompts -> 8.
    _, bucketed = _batches(items, bucket=4)
    self.assertEqual((bucketed["prompt_ids"].shape, bucketed["input_ids"].shape),
                     ((2, 8), (8, 16)))
    _, bucketed = _batches(items, bucket=3)
    self.assertEqual((bucketed["prompt_ids"].shape, bucketed["input_ids"].shape),
                     ((2, 6), (8, 15)))

  def test_a_group_must_share_its_prompt_and_fit(self):
    items = _rollouts()
    items[5] = dataclasses.replace(items[5], prompt=[7, 7, 7])
    prompts, responses = [r.prompt for r in items], [r.tokens for r in items]
    with self.assertRaisesRegex(ValueError, "row 5: its prompt differs from row 4's"):
      batching.prefix_batch(prompts, responses, group_size=4, prompt_len=8,
                            response_len=16)
    with self.assertRaisesRegex(ValueError, r"row 0: 5 prompt tokens > 4.*row 3: 14 "
                                            r"response tokens > 13"):
      batching.prefix_batch(prompts[:4], responses[:4], group_size=4, prompt_len=4,
                            response_len=13)
    with self.assertRaisesRegex(ValueError, "8 rows are not groups of 3"):
      batching.prefix_batch(prompts, responses, group_size=3, prompt_len=8,
                            response_len=16)

  def test_mini_batches_take_their_groups_prompts(self):
    _, shared = _batches(_rollouts())
    second = batch_updates.mini_batch(shared, 1, 2)
    np.testing.assert_array_equal(second["prompt_ids"], shared["prompt_ids"][1:])
    np.testing.assert_array_equal(second["input_ids"], shared["input_ids"][4:])


class ConfigTest(absltest.TestCase):

  def test_micro_batches_must_divide_a_group_and_one_process_only(self):
    from rcca_jax.train import config_check  # pylint: disable=import-outside-toplevel
    from tests.fixtures.trainer_fixtures import trainer_config  # pylint: disable=import-outside-toplevel
    config = trainer_config()  # groups of 2, mini-batches of 2, a KL reference
    config.rl.shared_prefix = True
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.micro_batches = 4
    config.rl.prompts_per_step = 4  # mini-batches of 4 rows: whole micro-batches
    self.assertIn("rl.shared_prefix: rl.group_size=2 is not divisible by "
                  "micro_batches=4 (each micro-batch holds a share of every group)",
                  config_check.problems(config, num_devices=1))
    config.micro_batches = 1
    self.assertIn("rl.shared_prefix with 2 processes: the step replicates a batch's "
                  "prompts, and each process holds its own (one process only)",
                  config_check.problems(config, num_devices=2, num_processes=2))


class SameStepTest(parameterized.TestCase):

  @parameterized.parameters(("llama", 1), ("ling", 1), ("llama", 2), ("ling_blocked", 1),
                            ("llama_blocked", 1))
  def test_logprobs_and_gradients_within_float32_rounding(self, family, micro):
    """The shared-prefix step against rows that carry their prompts.

    Both sum the same terms: a response token's log-prob reads the same prompt keys and
    values (each prompt's forward pass, run once, is the one every row ran) and the
    same earlier response tokens, at the same positions; the prompt's gradient is the
    sum over its group's rows, taken by the cache's row gather's transpose instead of
    by the batch sum. Only the order and blocking of the float32 sums differ (attention
    over the cache's slots, weight gradients over fewer positions), so the two
    gradients differ by at most 2 * gamma_n of the terms' magnitudes, n counted at the
    plain batch's width (`rl_fixtures.assert_within_rounding`); a response shifted by
    one position or a prompt given to the wrong group moves entries by a share of
    order one of that scale. With `micro` = 2 each micro-batch holds two rows of every
    group and runs the prompts again. "ling_blocked" and "llama_blocked" attend in blocks of 4 positions on
    both sides (the prompts and the responses over their cache too): the online
    softmax rescales each partial sum once per key block, a few more rounded
    operations per term than n counts, well inside the bound's factor of 2."""
    items = _rollouts(seed=1)
    plain, shared = _batches(items)
    rng = np.random.default_rng(2)
    plain["ref_logp"] = np.where(
        plain["loss_mask"] > 0,
        plain["old_logp"] + 0.1 * rng.standard_normal(plain["old_logp"].shape),
        0.0).astype(np.float32)
    shared["ref_logp"] = _response_part(plain, shared, plain["ref_logp"]).astype(np.float32)
    config = objective_lib.preset("rcca", kl_beta=0.05)
    fmodel = rl_fixtures.functional_model(family)
    out = {}
    for name, batch, prefix, m in (("plain", plain, False, 1), ("shared", shared, True,
                                                                 micro)):
      objective = ts.PolicyObjective(config, GROUP, prefix)
      fn = jax.jit(ts.make_gradient_fn(fmodel, objective, m))
      logp = jax.jit(logprobs_lib.make_logprob_fn(fmodel, m))
      out[name] = (fn(fmodel.params, fmodel.model_state,
                      ts.numpy_batch(batch, objective.keys)),
                   np.asarray(logp(fmodel.params, fmodel.model_state, batch)))
    (loss0, grads0, stats0, _), logp0 = out["plain"]
    (loss1, grads1, stats1, _), logp1 = out["shared"]
    self.assertEqual(logp1.shape, (8, 16))
    # Log-probs: each a log-softmax of logits from sums of at most n = 24 + hidden +
    # MLP terms of magnitude ~1 (unit-scale activations): well within 1e-5.
    np.testing.assert_allclose(logp1, _response_part(plain, shared, logp0), atol=1e-5)
    self.assertGreater(abs(float(loss0)), 1e-3)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-5, atol=1e-7)
    stats0, stats1 = (objective_lib.finalize_stats(s) for s in (stats0, stats1))
    for name in stats0:
      np.testing.assert_allclose(stats1[name], stats0[name], rtol=1e-5, atol=1e-7,
                                 err_msg=name)
    scale = rl_fixtures.gradient_term_scale(fmodel, plain, config)
    rl_fixtures.assert_within_rounding(grads1, grads0, scale,
                                       rl_fixtures.family_reduction_length(family, plain))

  @parameterized.parameters("llama", "ling")
  def test_logits_chunk_gives_the_same_step(self, family):
    """`logits_chunk` on a shared-prefix batch: the LM head and its softmax 5 of the
    16 predicting states at a time (the last chunk padded), each position computed
    as in one pass over all of them: the same log-probs, loss and gradients. The head's
    dot products run over the hidden size whatever the chunk, so values agree to
    within a few ulps (XLA may block a [B, 5] product apart from a [B, 16] one); the
    gradients sum the chunks' head gradients in another order: `assert_within_rounding`
    at n = the positions summed. A state fed to the wrong target (the chunks misaligned
    by one) moves log-probs by order one."""
    _, shared = _batches(_rollouts(seed=3))
    config = objective_lib.preset("grpo")
    fmodel = rl_fixtures.functional_model(family)
    objective = ts.PolicyObjective(config, GROUP, True)
    batch = ts.numpy_batch(shared, objective.keys)
    out, whole_logits = [], []
    for chunk in (0, 5):
      fn = jax.jit(ts.make_gradient_fn(fmodel, objective, 1, logits_chunk=chunk))
      logp = jax.jit(logprobs_lib.make_logprob_fn(fmodel, 1, logits_chunk=chunk))
      out.append((fn(fmodel.params, fmodel.model_state, batch),
                  np.asarray(logp(fmodel.params, fmodel.model_state, shared))))
      rows, width = shared["input_ids"].shape
      hlo = fn.lower(fmodel.params, fmodel.model_state, batch).as_text()
      # The log-softmax's max over the vocabulary of every position at once.
      whole_logits.append(re.search(
          rf"applies stablehlo.maximum across dimensions = \[2\] : "
          rf"\(tensor<{rows}x{width}x{rl_fixtures.VOCAB}xf32>", hlo) is not None)
    self.assertEqual(whole_logits, [True, False])  # the chunked step never does it
    ((loss0, grads0, _, _), logp0), ((loss1, grads1, _, _), logp1) = out
    np.testing.assert_allclose(logp1, logp0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-5, atol=1e-7)
    plain, _ = _batches(_rollouts(seed=3))
    scale = rl_fixtures.gradient_term_scale(fmodel, plain, config)
    rl_fixtures.assert_within_rounding(grads1, grads0, scale,
                                       rl_fixtures.family_reduction_length(family, plain))

  def test_the_compiled_programs_read_the_prompts_on_a_mesh_too(self):
    """The step and the log-prob program as the trainer compiles them, without and
    with a (one-device) mesh, whose shardings replicate the prompts."""
    fmodel = rl_fixtures.functional_model("llama")
    objective = ts.PolicyObjective(objective_lib.preset("grpo"), GROUP, True)
    self.assertEqual(objective.keys[-2:], ("prompt_ids", "prompt_mask"))
    _, shared = _batches(_rollouts())
    batch = ts.numpy_batch(shared, objective.keys)
    mesh = jax.make_mesh((1, 1, 1, 1), ("data", "fsdp", "expert", "tensor"),
                         axis_types=(jax.sharding.AxisType.Auto,) * 4)
    losses, logps = [], []
    for on in (None, mesh):
      step, shardings = ts.build_step(fmodel, objective, OPT, mesh=on)
      logp = logprobs_lib.compile_logprob_fn(fmodel, ts.StepConfig(), 1, on)
      state = ts.init_state(fmodel, OPT, shardings=shardings)
      logps.append(np.asarray(logp(state.params, state.model_state, shared)))
      state, metrics = step(state, batch)
      losses.append(float(metrics["loss"]))
      self.assertEqual(int(state.step), 1)
    self.assertTrue(np.isfinite(losses[0]))
    # The same program on one device: equal up to XLA's choices under a mesh.
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(logps[1], logps[0], atol=1e-6)
    self.assertEqual(logps[0].shape, shared["input_ids"].shape)


if __name__ == "__main__":
  absltest.main()
