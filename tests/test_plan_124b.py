"""benchmarks/plan_124b.py compiles the full-width train step ahead of time (8 devices)."""

import json
import os
import subprocess
import sys

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PlanTest(absltest.TestCase):

  def test_six_layer_plan_compiles_every_long_sequence_path(self):
    # 1,024 tokens: blockwise MLA (blocks of 256), KDA chunk groups, MoE slices of 512
    # and loss logits in chunks of 256 all take their chunked paths.
    out = subprocess.run(
        [sys.executable, "benchmarks/plan_124b.py", "--devices", "8",
         "--mesh", "fsdp=4,expert=2", "--layers", "6", "--seq-len", "1024",
         "--batch", "16", "--micro-batches", "2", "--logits-chunk", "256",
         "--attention-block", "256", "--moe-chunk", "512", "--kda-chunks-per-step", "4"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    report = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(report["mesh"], {"data": 1, "fsdp": 4, "expert": 2, "tensor": 1})
    self.assertAlmostEqual(report["params_b"], 13.35, delta=0.01)
    # fp32 params + AdamW moments (12 bytes/param) spread over 8 devices, experts 2-way.
    self.assertBetween(report["state_gb_per_device"], 12 * 13.35 / 8, 12 * 13.35 / 4)
    self.assertGreater(report["temp_gb"], 0.1)
    self.assertAlmostEqual(report["peak_gb"], report["argument_gb"] + report["output_gb"]
                           - report["alias_gb"] + report["temp_gb"], places=6)
    self.assertTrue(report["fits"])


if __name__ == "__main__":
  absltest.main()
