"""Router and expert kernels of the MoE layer."""

import jax
import jax.numpy as jnp
import numpy as np
import torch
from absl.testing import absltest, parameterized
from flax import nnx
from transformers import BailingHybridConfig
from transformers.models.bailing_hybrid import modeling_bailing_hybrid as hf_mod

from rcca_jax.models import moe
from rcca_jax.models.config import LingConfig

jax.config.update("jax_default_matmul_precision", "highest")


def _tiny(**kw):
  base = dict(vocab_size=32, hidden_size=32, moe_intermediate_size=16, num_hidden_layers=1,
              num_local_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
              first_k_dense_replace=0, layer_group_size=1)
  base.update(kw)
  return LingConfig(**base)


class RouterTest(parameterized.TestCase):

  @parameterized.parameters((4, 2, True), (1, 1, True), (8, 3, False))
  def test_matches_transformers_router(self, n_group, topk_group, renorm):
    e, d, k = 16, 32, 4
    cfg = BailingHybridConfig(hidden_size=d, num_local_experts=e, num_experts_per_tok=k,
                              n_group=n_group, topk_group=topk_group, norm_topk_prob=renorm,
                              routed_scaling_factor=2.5, pad_token_id=0, vocab_size=8)
    torch.manual_seed(0)
    router = hf_mod.BailingHybridTopkRouter(cfg)
    with torch.no_grad():
      router.weight.normal_(0, 0.5)
      router.e_score_correction_bias.normal_(0, 0.3)
    x = torch.randn(40, d)
    _, w_ref, idx_ref = router(x)
    routing = moe.route(jnp.asarray(x.numpy()), jnp.asarray(router.weight.detach().numpy().T),
                        jnp.asarray(router.e_score_correction_bias.numpy()), top_k=k,
                        n_group=n_group, topk_group=topk_group, renormalize=renorm,
                        scaling=2.5)
    # Same expert sets and weights per token (order within top-k may differ).
    for t in range(40):
      ref = dict(zip(idx_ref[t].tolist(), w_ref[t].tolist()))
      ours = dict(zip(np.asarray(routing.experts[t]).tolist(),
                      np.asarray(routing.weights[t]).tolist()))
      self.assertEqual(set(ref), set(ours))
      for expert, weight in ref.items():
        self.assertAlmostEqual(ours[expert], weight, places=5)

  def test_bias_changes_selection_not_weights(self):
    x = jax.random.normal(jax.random.key(0), (8, 32))
    w = jax.random.normal(jax.random.key(1), (32, 16))
    bias = jnp.zeros(16).at[3].set(10.0)
    routing = moe.route(x, w, bias, top_k=2, n_group=1, topk_group=1, renormalize=False,
                        scaling=1.0)
    self.assertTrue(bool((routing.experts == 3).any(-1).all()))
    scores = jax.nn.sigmoid(x @ w)
    np.testing.assert_allclose(routing.weights,
                               jnp.take_along_axis(scores, routing.experts, 1), rtol=1e-6)

  def test_group_limit_keeps_experts_in_chosen_groups(self):
    x = jax.random.normal(jax.random.key(2), (64, 32))
    w = jax.random.normal(jax.random.key(3), (32, 16))
    routing = moe.route(x, w, jnp.zeros(16), top_k=4, n_group=4, topk_group=2,
                        renormalize=True, scaling=1.0)
    groups = np.asarray(routing.experts) // 4
    self.assertTrue(all(len(set(row)) <= 2 for row in groups.tolist()))
    np.testing.assert_allclose(np.asarray(routing.weights).sum(-1), 1.0, rtol=1e-5)


class ExpertsTest(parameterized.TestCase):

  def test_ragged_and_dense_paths_agree(self):
    cfg = _tiny()
    layer = moe.MoE(cfg, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(4), (3, 11, 32))
    ragged, counts = layer(x)
    layer.cfg = cfg.replace(moe_impl="dense")
    dense, counts_dense = layer(x)
    np.testing.assert_allclose(ragged, dense, atol=1e-5, rtol=0)
    self.assertGreater(float(jnp.abs(ragged).max()), 1e-3)
    np.testing.assert_array_equal(counts, counts_dense)
    self.assertEqual(int(counts.sum()), 3 * 11 * cfg.num_experts_per_tok)

  @parameterized.parameters(("ragged",), ("dense",))
  def test_token_chunks_give_the_same_output_and_gradients(self, impl):
    cfg = _tiny(moe_impl=impl)
    layer = moe.MoE(cfg, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(6), (3, 12, 32))

    def loss(layer, x):
      y, _ = layer(x)
      return jnp.sum(y * y), y

    grad = nnx.grad(loss, argnums=(0, 1), has_aux=True)
    (g_layer, g_x), y = grad(layer, x)
    layer.cfg = cfg.replace(moe_token_chunk=4)  # three slices of each row
    (c_layer, c_x), y_chunked = grad(layer, x)
    self.assertGreater(float(jnp.abs(y).max()), 1e-3)
    np.testing.assert_allclose(y_chunked, y, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(c_x, g_x, atol=1e-6, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(nnx.state(c_layer)), jax.tree.leaves(nnx.state(g_layer))):
      np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)

  def test_grouped_equals_ragged_when_nothing_is_dropped(self):
    cfg = _tiny(moe_impl="grouped", moe_capacity_factor=16.0)  # C = every assignment
    layer = moe.MoE(cfg, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(7), (3, 11, 32))
    grouped, counts = layer(x)
    layer.cfg = cfg.replace(moe_impl="ragged")
    ragged, counts_ragged = layer(x)
    self.assertGreater(float(jnp.abs(ragged).max()), 1e-3)
    np.testing.assert_allclose(grouped, ragged, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(counts, counts_ragged)

  def test_grouped_drops_assignments_past_capacity_in_token_order(self):
    x, weights_, experts, weights = _expert_problem(seed=1, e=4, n=9)
    experts[:6, 0] = 2  # expert 2 is oversubscribed
    capacity = int(np.ceil(9 * 2 / 4 * 0.75))  # 4 slots per expert
    self.assertGreater(int((np.bincount(experts.ravel(), minlength=4) > capacity).sum()), 0)
    ref = _loop_reference(x, weights_, experts, weights, capacity)
    got = moe.experts_grouped(*_jax_args(x, weights_, experts, weights), capacity_factor=0.75)
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-5)

  def test_counts_ignore_masked_tokens(self):
    layer = moe.MoE(_tiny(), rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(5), (2, 6, 32))
    mask = jnp.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    _, counts = layer(x, mask)
    self.assertEqual(int(counts.sum()), 9 * 4)

  def test_ragged_experts_match_loop_reference(self):
    x, weights_, experts, weights = _expert_problem(seed=0, e=6, n=10, d=8)
    got = moe.experts_ragged(*_jax_args(x, weights_, experts, weights))
    np.testing.assert_allclose(got, _loop_reference(x, weights_, experts, weights),
                               atol=1e-4, rtol=1e-5)


def _expert_problem(seed: int, e: int, n: int, d: int = 6, i: int = 5, k: int = 2):
  """Tokens [n, d], expert weights (gate, up, down), k distinct experts per token."""
  rng = np.random.default_rng(seed)
  weights_ = (rng.normal(size=(e, d, i)), rng.normal(size=(e, d, i)),
              rng.normal(size=(e, i, d)))
  x = rng.normal(size=(n, d))
  experts = np.stack([rng.choice(e, k, replace=False) for _ in range(n)])
  return x, weights_, experts, rng.uniform(size=(n, k))


def _loop_reference(x, weights_, experts, weights, capacity=None):
  """SwiGLU experts token by token; past `capacity` an expert takes no more (token order)."""
  wg, wu, wd = weights_
  out, used = np.zeros_like(x), np.zeros(wg.shape[0], int)
  for t in range(x.shape[0]):
    for j in range(experts.shape[1]):
      c = experts[t, j]
      if capacity is not None and used[c] >= capacity:
        continue
      used[c] += 1
      g, u = x[t] @ wg[c], x[t] @ wu[c]
      out[t] += weights[t, j] * ((g / (1 + np.exp(-g)) * u) @ wd[c])
  return out


def _jax_args(x, weights_, experts, weights):
  routing = moe.Routing(jnp.asarray(weights, jnp.float32), jnp.asarray(experts, jnp.int32),
                        jnp.zeros((x.shape[0], weights_[0].shape[0])))
  return (jnp.asarray(x, jnp.float32), routing,
          *(jnp.asarray(w, jnp.float32) for w in weights_))


if __name__ == "__main__":
  absltest.main()
