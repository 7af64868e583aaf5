"""`python -m rcca_jax.models.summary`: counts from abstract shapes."""

import json
import os
import subprocess
import sys

from absl.testing import absltest

from experiments import moe_124b, tiny_cpu
from rcca_jax.models import summary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The embedded default's model as a 6-layer MoE: routed experts to place, groups to scan.
TINY_MOE = dict(vocab_size=512, num_hidden_layers=6, first_k_dense_replace=1,
                num_local_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2)


def tiny_moe() -> dict:
  model = tiny_cpu.model_config()
  model.update(TINY_MOE)
  return model.to_dict()


class SummaryTest(absltest.TestCase):

  def test_moe_124b_counts(self):
    result = summary.summarize(moe_124b.get_config().model.to_dict(),
                               "data:1,fsdp:64,expert:8,tensor:1")
    self.assertAlmostEqual(result["total_params"] / 1e9, 124.4, delta=0.05)
    self.assertAlmostEqual(result["active_params"] / 1e9, 5.10, delta=0.01)
    self.assertEqual(result["layer_schedule"], {"unrolled": 6, "period": 6, "groups": 6})
    # bf16 parameters spread over 512 devices: at least the even share, well under 2x it.
    even = result["total_params"] * 2 / 512
    self.assertBetween(result["param_bytes_per_device"], even, 2 * even)
    self.assertEqual(result["optimizer_bytes_per_device"] % 8, 0)

  def test_one_device_holds_everything(self):
    result = summary.summarize(tiny_moe(), "data:1")
    self.assertEqual(result["param_bytes_per_device"], 4 * result["total_params"])
    self.assertEqual(result["optimizer_bytes_per_device"], 8 * result["total_params"])

  def test_expert_axis_splits_experts(self):
    cfg = tiny_moe()
    one = summary.summarize(cfg, "data:1")
    four = summary.summarize(cfg, "expert:4")
    self.assertGreater(one["routed_expert_params"], 0)
    saved = one["param_bytes_per_device"] - four["param_bytes_per_device"]
    self.assertEqual(saved, 4 * one["routed_expert_params"] * 3 // 4)

  def test_cli_prints_json_last_line(self):
    out = subprocess.run(
      [sys.executable, "-m", "rcca_jax.models.summary",
       "--config=experiments/tiny_cpu.py", "--mesh=data:2,expert:4",
       *(f"--config.model.{k}={v}" for k, v in TINY_MOE.items())],
      cwd=ROOT, capture_output=True, text=True, check=True, timeout=300,
      env=dict(os.environ, JAX_PLATFORMS="cpu"))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertGreater(result["total_params"], result["active_params"])
    self.assertEqual(result["num_devices"], 8)


if __name__ == "__main__":
  absltest.main()
