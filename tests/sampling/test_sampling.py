"""`rcca_jax.sampling` against transformers' greedy `generate` and a full forward.

Tolerance: sampled log-probs within 1e-4 of log_softmax(logits / T) of a full fp32
forward over prompt + sample, and of the RL loss's log-probs at T (they agree to
~1e-6). Greedy tokens must be identical.
"""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from absl.testing import absltest, parameterized

from tests.fixtures.hf_tiny import MLA_ONLY, YARN, make_hf_model
from tests.fixtures.hf_tiny import load_ling as load
from rcca_jax.rl.functional import FunctionalModel
from rcca_jax.sampling import JaxSampler, SampleOutput, Sampler, generate
from rcca_jax.sampling.generate import (batch_bucket, filter_logits, first_argmax,
                                        gumbel_choice, new_tokens_bucket, prompt_bucket)
from rcca_jax.sampling.noise import gumbel_rows

jax.config.update("jax_default_matmul_precision", "highest")

LOGP_TOL = 1e-4


def hf_greedy(hf_model, prompt, max_new_tokens, eos_id):
  """transformers' greedy continuation of one prompt, alone (no padding)."""
  with torch.no_grad():
    out = hf_model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens,
                            do_sample=False, eos_token_id=eos_id, pad_token_id=0)
  return out[0, len(prompt):].numpy()


def prompts_for(seed, lengths, vocab):
  rng = np.random.default_rng(seed)
  return [rng.integers(2, vocab, size=n).tolist() for n in lengths]


def left_padded(prompts, out: SampleOutput) -> tuple[np.ndarray, np.ndarray]:
  """(ids, mask) [B, W] of each prompt + its sample, left-padded to the longest."""
  seqs = [p + out.tokens[i, :out.lengths[i]].tolist() for i, p in enumerate(prompts)]
  width = max(map(len, seqs))
  ids = np.zeros((len(seqs), width), np.int32)
  mask = np.zeros((len(seqs), width), bool)
  for i, s in enumerate(seqs):
    ids[i, width - len(s):] = s
    mask[i, width - len(s):] = True
  return ids, mask


def full_forward_logprobs(model, prompts, out: SampleOutput, temperature: float):
  """log_softmax(logits / T) of every sampled token from one left-padded forward."""
  ids, mask = left_padded(prompts, out)
  width = ids.shape[1]
  logits = np.asarray(model(jnp.asarray(ids), attention_mask=jnp.asarray(mask)), np.float64)
  result = []
  for i, p in enumerate(prompts):
    n = int(out.lengths[i])
    start = width - n - 1  # Logits at position t predict token t + 1.
    step_logits = logits[i, start:start + n] / (temperature or 1.0)
    logp = step_logits - np.log(np.exp(step_logits - step_logits.max(-1, keepdims=True))
                                .sum(-1, keepdims=True)) - step_logits.max(-1, keepdims=True)
    chosen = out.tokens[i, :n]
    result.append((logp[np.arange(n), chosen], logits[i, start:start + n], chosen))
  return result


def check_greedy(test, overrides, lengths, max_new_tokens, *, prefill_chunk=256, seed=0):
  """Greedy `generate` on a batch equals transformers' greedy `generate` per prompt."""
  hf = make_hf_model(seed, **overrides)
  model = load(hf)
  prompts = prompts_for(seed + 1, lengths, hf.config.vocab_size)
  eos = hf.config.eos_token_id
  out = generate(model, prompts, max_new_tokens=max_new_tokens, temperature=0.0,
                 eos_ids=(eos,), prefill_chunk=prefill_chunk)
  for i, prompt in enumerate(prompts):
    ref = hf_greedy(hf, prompt, max_new_tokens, eos)
    test.assertEqual(int(out.lengths[i]), len(ref), f"prompt {i}")
    np.testing.assert_array_equal(out.tokens[i, :len(ref)], ref, err_msg=f"prompt {i}")


@pytest.mark.slow
class MoreGreedyParityTest(parameterized.TestCase):
  """More shapes, longer prompts, end tokens (slow: a compile per model)."""

  @parameterized.named_parameters(
    ("mla_q_lora_bias_yarn", dict(layer_types=MLA_ONLY, q_lora_rank=24, attention_bias=True,
                                  rope_parameters=YARN, max_position_embeddings=64),
     (9, 3), 16, 256),
    ("scanned_groups_prompt_past_kda_chunk", dict(num_hidden_layers=6), (70, 4, 33), 10, 256),
    ("single_token_prompts_no_prefill", dict(), (1, 1), 8, 256),
    ("several_prefill_chunks", dict(num_hidden_layers=6), (40, 17, 2), 10, 16),
    ("moe_ungrouped_no_shared", dict(n_group=1, topk_group=1, n_shared_experts=0,
                                     first_k_dense_replace=0), (6, 11), 20, 256),
  )
  def test_more_shapes(self, overrides, lengths, max_new_tokens, prefill_chunk):
    check_greedy(self, overrides, lengths, max_new_tokens, prefill_chunk=prefill_chunk)

  def test_end_token_stops_each_row_like_transformers(self):
    hf = make_hf_model(3)
    model = load(hf)
    prompts = prompts_for(4, (7, 3, 10), hf.config.vocab_size)
    free = generate(model, prompts, max_new_tokens=12, temperature=0.0)
    eos = int(free.tokens[1, 4])  # Row 1 ends at step 4; the others may not.
    out = generate(model, prompts, max_new_tokens=12, temperature=0.0, eos_ids=(eos,))
    self.assertLessEqual(int(out.lengths[1]), 5)
    for i, prompt in enumerate(prompts):
      ref = hf_greedy(hf, prompt, 12, eos)
      self.assertEqual(int(out.lengths[i]), len(ref))
      np.testing.assert_array_equal(out.tokens[i, :len(ref)], ref)


class SamplingTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.hf = make_hf_model(7)
    cls.model = load(cls.hf)
    cls.vocab = cls.hf.config.vocab_size
    cls.prompts = prompts_for(8, (6, 12, 1), cls.vocab)

  def test_greedy_matches_transformers_on_ragged_prompts(self):
    # Layers: KDA+dense, MLA+MoE, KDA+MoE, MLA+MoE; prompts of 6, 12 and 1 tokens.
    eos = self.hf.config.eos_token_id
    out = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.0,
                   eos_ids=(eos,))
    for i, prompt in enumerate(self.prompts):
      ref = hf_greedy(self.hf, prompt, 14, eos)
      self.assertEqual(int(out.lengths[i]), len(ref), f"prompt {i}")
      np.testing.assert_array_equal(out.tokens[i, :len(ref)], ref, err_msg=f"prompt {i}")

  @parameterized.named_parameters(
    ("plain", 0.8, 1.0, 0),
    ("top_k_top_p", 1.3, 0.9, 7),
    ("greedy", 0.0, 1.0, 0),
  )
  def test_logprobs_match_full_forward(self, temperature, top_p, top_k):
    out = generate(self.model, self.prompts, max_new_tokens=14, temperature=temperature,
                   top_p=top_p, top_k=top_k, seed=3)
    np.testing.assert_array_equal(out.lengths, [14] * 3)
    for i, (logp, logits, chosen) in enumerate(
        full_forward_logprobs(self.model, self.prompts, out, temperature)):
      np.testing.assert_allclose(out.logprobs[i, :len(chosen)], logp, atol=LOGP_TOL, rtol=0)
      rank = (logits > logits[np.arange(len(chosen)), chosen][:, None]).sum(-1)
      if temperature == 0:
        np.testing.assert_array_equal(rank, 0)
      if top_k:
        self.assertLess(rank.max(), top_k)
      if top_p < 1:  # Inside the nucleus of the renormalised top-k distribution.
        kth = -np.sort(-logits, axis=-1)[:, top_k - 1:top_k]
        scaled = np.where(logits >= kth, logits / temperature, -np.inf)
        probs = np.exp(scaled - scaled.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        own = probs[np.arange(len(chosen)), chosen]
        mass_above = np.where(probs > own[:, None], probs, 0).sum(-1)
        self.assertTrue(np.all(mass_above < top_p))

  @parameterized.named_parameters(("whole_logits", 0), ("chunked_logits", 5))
  def test_policy_logprobs_at_the_sampling_temperature_are_the_samplers(self, chunk):
    # RL's ratio at the first update on a batch: the loss's log-probs at rl.temperature
    # (FunctionalModel.logprobs, the numerator) equal the sampler's (the denominator).
    out = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.6, seed=4)
    ids, mask = left_padded(self.prompts, out)
    width = ids.shape[1]
    fmodel = FunctionalModel(self.model)
    at = {t: np.asarray(fmodel.logprobs(fmodel.params, fmodel.model_state, jnp.asarray(ids),
                                        jnp.asarray(mask), chunk, temperature=t)[0])
          for t in (0.6, 1.0)}
    for i in range(len(self.prompts)):
      n = int(out.lengths[i])
      np.testing.assert_allclose(at[0.6][i, width - n:], out.logprobs[i, :n],
                                 atol=LOGP_TOL, rtol=0, err_msg=f"row {i}")
      # At temperature 1 the same tokens have other log-probs: the temperature is used.
      self.assertGreater(np.abs(at[1.0][i, width - n:] - out.logprobs[i, :n]).max(), 1e-2)

  def test_seed_reproducibility_and_row_independence(self):
    first = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.8, seed=11)
    again = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.8, seed=11)
    other = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.8, seed=12)
    np.testing.assert_array_equal(first.tokens, again.tokens)
    np.testing.assert_array_equal(first.logprobs, again.logprobs)
    self.assertFalse(np.array_equal(first.tokens, other.tokens))
    # Identical prompts in one batch still get different samples.
    twins = generate(self.model, [self.prompts[1]] * 3, max_new_tokens=14,
                     temperature=0.8, seed=11)
    np.testing.assert_array_equal(twins.tokens[1], first.tokens[1])
    self.assertFalse(np.array_equal(twins.tokens[0], twins.tokens[1]))

  def test_end_tokens_pad_the_rest(self):
    free = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.8, seed=5)
    eos = (int(free.tokens[0, 2]), int(free.tokens[2, 5]))
    out = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.8, seed=5,
                   eos_ids=eos, pad_id=0)
    for i in range(3):
      n = int(out.lengths[i])
      row = free.tokens[i].tolist()
      expected = next((j + 1 for j, t in enumerate(row) if t in eos), 14)
      self.assertEqual(n, expected)
      np.testing.assert_array_equal(out.tokens[i, :n], free.tokens[i, :n])
      np.testing.assert_array_equal(out.tokens[i, n:], 0)
      np.testing.assert_array_equal(out.logprobs[i, n:], 0.0)
      self.assertTrue(n == 14 or out.tokens[i, n - 1] in eos)
    self.assertLessEqual(int(out.lengths[0]), 3)

  @parameterized.named_parameters(
      # End tokens that stop rows at different steps: the batch of 8 moves to 4, 2, 1
      # rows as they finish.
      ("compacting_finished_rows", dict(compact=False), dict(compact=True), (3, 9, 5), 0),
      # grow=8: the cache gains 8 slots at a time (twice or more over 24 new tokens,
      # rows compacting as they end), against all 32 slots at once.
      ("growing_the_cache", dict(grow=0), dict(grow=8), (16, 24, 13), 16))
  def test_changes_no_token(self, off, on, eos_window, longest_over):
    # Each row's arithmetic is its own, but XLA may block a matmul of 8 rows and one of
    # 2 differently, or sum a shorter row of scores in another order (slots not yet
    # grown held masked scores whose softmax weight is exactly 0): log-probs agree to
    # float32 rounding through the layers (measured 1.2e-6 on values ~3; 1e-5 bounds a
    # few ulps per layer), and the tokens exactly (a near-tie within rounding aside).
    prompts = prompts_for(21, (5, 9, 3, 7, 4, 8, 6, 2), self.vocab)
    free = generate(self.model, prompts, max_new_tokens=24, temperature=1.0, seed=3)
    first, last, every = eos_window
    eos = tuple({int(t) for t in free.tokens[:, first:last].ravel()[::every]})
    for temperature in (1.0, 0.0):
      base, changed = (generate(self.model, prompts, max_new_tokens=24, eos_ids=eos,
                                temperature=temperature, seed=3, pad_id=0, **options)
                       for options in (off, on))
      self.assertGreater(len(set(base.lengths.tolist())), 2)  # rows end apart
      self.assertGreater(int(base.lengths.max()), longest_over)  # (growth: twice at least)
      np.testing.assert_array_equal(changed.tokens, base.tokens)
      np.testing.assert_allclose(changed.logprobs, base.logprobs, rtol=1e-5, atol=1e-5)
      np.testing.assert_array_equal(changed.lengths, base.lengths)

  def test_max_new_tokens_smaller_than_bucket(self):
    out = generate(self.model, self.prompts, max_new_tokens=10, temperature=0.0)
    full = generate(self.model, self.prompts, max_new_tokens=14, temperature=0.0)
    self.assertEqual(out.tokens.shape, (3, 10))
    np.testing.assert_array_equal(out.lengths, [10] * 3)
    np.testing.assert_array_equal(out.tokens, full.tokens[:, :10])

  def test_jax_sampler_groups_samples_by_prompt(self):
    sampler = JaxSampler(self.model)
    self.assertIsInstance(sampler, Sampler)
    out = sampler.sample(self.prompts[:2], n=2, max_new_tokens=14, temperature=0.8, seed=11)
    self.assertEqual(out.tokens.shape, (4, 14))
    direct = generate(self.model, [self.prompts[0]] * 2 + [self.prompts[1]] * 2,
                      max_new_tokens=14, temperature=0.8, seed=11)
    np.testing.assert_array_equal(out.tokens, direct.tokens)
    with self.assertRaisesRegex(ValueError, "n=0"):
      sampler.sample(self.prompts, n=0, max_new_tokens=4)

  def test_bad_requests_name_every_problem(self):
    with self.assertRaisesRegex(ValueError, r"prompt 1 is empty.*prompt 2 has token ids "
                                r"outside \[0, 96\): \[96\].*top_p=0"):
      generate(self.model, [[3], [], [4, 96]], max_new_tokens=4, top_p=0.0)
    with self.assertRaisesRegex(ValueError, "no prompts"):
      generate(self.model, [], max_new_tokens=4)
    with self.assertRaisesRegex(ValueError, "max_new_tokens=0"):
      generate(self.model, [[3]], max_new_tokens=0)
    with self.assertRaisesRegex(ValueError, "grow=-1 must be >= 0"):
      generate(self.model, [[3]], max_new_tokens=4, grow=-1)


class PureFunctionsTest(parameterized.TestCase):

  def test_token_choice_is_jax_random_categorical(self):
    """The decode loop's argmax and Gumbel sampling pick exactly the tokens of
    jnp.argmax and jax.random.categorical (ties: the first index; -inf logits)."""
    for seed in range(6):
      rng = np.random.default_rng(seed)
      x = jnp.asarray(rng.standard_normal((16, 700)) * (4.0 if seed % 2 else 0.2),
                      jnp.float32)
      x = x.at[:, 3].set(-jnp.inf).at[0, 10].set(50.0).at[0, 20].set(50.0)
      keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(seed), jnp.arange(16))
      np.testing.assert_array_equal(first_argmax(x), jnp.argmax(x, axis=-1))
      self.assertEqual(int(first_argmax(x)[0]), 10)
      step = jnp.int32(seed * 7)
      step_keys = jax.vmap(jax.random.fold_in, (0, None))(keys, step)
      np.testing.assert_array_equal(gumbel_choice(gumbel_rows(keys, step, 700), x),
                                    jax.vmap(jax.random.categorical)(step_keys, x))

  def test_filter_logits(self):
    logits = jnp.log(jnp.asarray([[0.1, 0.4, 0.2, 0.3], [0.24, 0.26, 0.3, 0.2]]))
    keep = lambda p, k: np.isfinite(np.asarray(filter_logits(logits, p, k)))
    np.testing.assert_array_equal(keep(1.0, 2), [[0, 1, 0, 1], [0, 1, 1, 0]])
    np.testing.assert_array_equal(keep(0.65, 0), [[0, 1, 0, 1], [1, 1, 1, 0]])
    np.testing.assert_array_equal(keep(0.05, 0), [[0, 1, 0, 0], [0, 0, 1, 0]])
    np.testing.assert_array_equal(keep(1.0, 0), np.ones((2, 4)))
    # top-p applies to the renormalised top-k distribution: 0.4/0.7 < 0.6.
    np.testing.assert_array_equal(keep(0.6, 2)[0], [0, 1, 0, 1])

  def test_buckets(self):
    self.assertEqual([batch_bucket(b) for b in (1, 3, 8, 9, 17, 24, 25)],
                     [1, 4, 8, 16, 24, 24, 32])
    self.assertEqual(batch_bucket(3, shards=8), 8)
    self.assertEqual(batch_bucket(20, shards=6), 24)
    self.assertEqual([prompt_bucket(n, 64) for n in (0, 1, 9, 64, 65)], [0, 8, 16, 64, 128])
    self.assertEqual([prompt_bucket(n, 256) for n in (33, 65, 142, 200, 257)],
                     [64, 128, 192, 256, 512])
    self.assertEqual([new_tokens_bucket(n) for n in (1, 8, 9)], [8, 8, 16])


if __name__ == "__main__":
  absltest.main()
