"""`--mode=plan` (through benchmarks/plan_124b.py) on a 6-layer moe_124b, 8 devices."""

import json
import os
import subprocess
import sys

import pytest
from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# 1,024 tokens per row: blockwise MLA (blocks of 256), KDA chunk groups, MoE slices of
# 512 and loss logits in chunks of 256 all take their chunked paths.
SMALL = ("--config.mesh.fsdp=4", "--config.mesh.expert=2",
         "--config.model.num_hidden_layers=6", "--config.micro_batches=2",
         "--config.sft.batch_size=16", "--config.sft.max_len=1024",
         "--config.rl.prompts_per_step=2", "--config.rl.max_prompt_len=256",
         "--config.rl.max_new_tokens=768", "--config.logits_chunk=256",
         "--config.model.attention_block_size=256", "--config.model.moe_token_chunk=512",
         "--config.model.kda_chunks_per_step=4", "--config.rl.loss.kl_beta=0.05")


@pytest.mark.slow
class PlanTest(absltest.TestCase):

  def test_six_layer_plan_reports_every_program(self):
    out = subprocess.run([sys.executable, "benchmarks/plan_124b.py", *SMALL],
                         cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    report = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertEqual(report["devices"], 8)
    self.assertEqual(report["mesh"], {"data": 1, "fsdp": 4, "expert": 2, "tensor": 1})
    self.assertAlmostEqual(report["params_b"], 13.35, delta=0.01)
    # bf16 params and AdamW moments (6 bytes/param) over 8 devices, experts 2-way.
    params = report["params_gb_per_device"]
    self.assertBetween(params, 2 * 13.35 / 8, 2 * 13.35 / 4)
    self.assertAlmostEqual(report["optimizer_gb_per_device"], 2 * params, delta=0.01)
    # kl_beta > 0: a reference as large as the parameters is held beside the state
    # (params, two moments, reference; model state twice).
    self.assertAlmostEqual(report["reference_gb_per_device"],
                           params + report["model_state_gb_per_device"], places=6)
    self.assertAlmostEqual(report["state_gb_per_device"],
                           4 * params + 2 * report["model_state_gb_per_device"],
                           delta=0.01)
    self.assertEqual(sorted(report["programs"]), ["logprobs", "rl_step", "sft_step"])
    rl = report["programs"]["rl_step"]
    self.assertGreater(rl["temp_gb"], 0.1)
    # The train state is donated: the step's outputs reuse its buffers (parameters, both
    # moments, model state), so they are not counted twice in the peak.
    trained = 3 * params + report["model_state_gb_per_device"]
    self.assertGreaterEqual(rl["alias_gb"], trained - 0.01)
    self.assertGreaterEqual(rl["argument_gb"], rl["alias_gb"])
    self.assertAlmostEqual(report["peaks_gb"]["rl_step"],
                           rl["peak_gb"] + report["reference_gb_per_device"], places=6)
    self.assertEqual(report["peak_gb_per_device"], max(report["peaks_gb"].values()))


if __name__ == "__main__":
  absltest.main()
