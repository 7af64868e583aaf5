"""Sharded forward on 8 fake CPU devices equals the unsharded forward.

Runs tests/sharded_forward_check.py in a subprocess (XLA_FLAGS must be set before JAX
starts), once per MoE kernel, over several mesh layouts.
"""

import json
import os
import subprocess
import sys

import pytest
from absl.testing import absltest

HERE = os.path.dirname(os.path.abspath(__file__))


class ShardedForwardTest(absltest.TestCase):

  def test_ragged_experts(self):
    self.check("ragged", "data2_expert4,fsdp2_tensor4")

  def test_grouped_experts(self):
    self.check("grouped", "data2_expert4")

  @pytest.mark.slow
  def test_dense_experts(self):
    self.check("dense", "data2_expert4,data2_fsdp2_tensor2")

  def check(self, moe_impl, layouts):
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                         "--xla_force_host_platform_device_count=8",
               PYTHONPATH=os.path.dirname(HERE))
    out = subprocess.run([sys.executable, os.path.join(HERE, "sharded_forward_check.py"),
                          moe_impl, layouts], capture_output=True, text=True, env=env,
                         timeout=900)
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(sorted(result), sorted(layouts.split(",")))
    for name, item in result.items():
      self.assertLess(item["max_diff"], 1e-4, name)
    if "data2_expert4" in result:
      self.assertIn("expert", result["data2_expert4"]["specs"]["w_gate"])
    for name in ("fsdp2_tensor4", "data2_fsdp2_tensor2"):
      if name in result:
        self.assertIn("tensor", result[name]["specs"]["q_proj"])


if __name__ == "__main__":
  absltest.main()
