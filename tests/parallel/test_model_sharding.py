"""Sharded forward on 8 fake CPU devices equals the unsharded forward.

Runs tests/fixtures/sharded_forward_check.py in a subprocess (XLA_FLAGS must be set before JAX
starts) over several mesh layouts per MoE kernel: one subprocess for the kernels of the
fast tests (run once for both), one for the slow test's.
"""

import functools
import json
import os
import subprocess
import sys

import pytest
from absl.testing import absltest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# MoE kernel -> mesh layouts. Fast: experts over an `expert` axis with the kernel the
# large configs use (grouped), fsdp x tensor with the default one (ragged); the slow
# test covers the other kernel on each axis and all three axes together.
FAST = {"ragged": "fsdp2_tensor4", "grouped": "data2_expert4"}
SLOW = {"ragged": "data2_expert4", "dense": "data2_expert4,data2_fsdp2_tensor2"}


def run_check(requests: dict[str, str]) -> dict:
  """The child's {moe_impl: {layout: result}} for `requests` ({moe_impl: layouts})."""
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                       "--xla_force_host_platform_device_count=8",
             PYTHONPATH=os.path.dirname(TESTS))
  out = subprocess.run([sys.executable, os.path.join(TESTS, "fixtures", "sharded_forward_check.py"),
                        *(f"{impl}={layouts}" for impl, layouts in requests.items())],
                       capture_output=True, text=True, env=env, timeout=900)
  if out.returncode:
    raise AssertionError(f"sharded_forward_check failed ({out.returncode}):\n"
                         f"{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


@functools.cache
def fast_results() -> dict:
  """The fast tests' child, run once (by whichever of them runs first)."""
  return run_check(FAST)


class ShardedForwardTest(absltest.TestCase):

  def test_ragged_experts(self):
    self.check(fast_results()["ragged"], FAST["ragged"])

  def test_grouped_experts(self):
    self.check(fast_results()["grouped"], FAST["grouped"])

  @pytest.mark.slow
  def test_expert_sharded_ragged_and_dense_experts(self):
    results = run_check(SLOW)
    for impl, layouts in SLOW.items():
      self.check(results[impl], layouts)

  def check(self, result, layouts):
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
