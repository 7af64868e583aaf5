"""Configs are checked before any work: every problem named, exit status 2."""

import os
import subprocess
import sys
import types

from absl.testing import absltest

from experiments import ablation_small
from experiments import moe_124b
from experiments import natural_v2
from experiments import tiny_cpu
from experiments import tiny_natural
from rcca_jax.base import mapping
from rcca_jax.train import config_check
from rcca_jax.train import sections
from rcca_jax.train import prompts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ConfigCheckTest(absltest.TestCase):

  def test_shipped_configs_pass(self):
    for devices in (1, 8):
      for config in (tiny_natural, ablation_small):
        self.assertEqual(config_check.problems(config.get_config(),
                                               num_devices=devices), [])
    for devices in (1, 4):  # the demo's SFT batch is 4
      self.assertEqual(config_check.problems(tiny_cpu.get_config(),
                                             num_devices=devices), [])
    self.assertEqual(config_check.problems(moe_124b.get_config(), num_devices=256,
                                           mode="plan"), [])

  def test_every_problem_is_named(self):
    config = tiny_natural.get_config()
    config.rl.typo_field = 1
    config.rl.loss.kl_betta = 0.1
    config.eval.evaluator.load_timeout_s = 3.0
    config.sft.batch_size = 6
    config.rl.mini_batches = 2
    config.rl.prompts_per_step = 3
    config.rl.temperature = 0.0
    config.rl.loss.kl_beta = -1.0
    config.rl.max_new_tokens = 1000
    # (A warm-up longer than total_steps is cut to it, by the constructor the job uses.)
    config.sft.optimizer.warmup_steps = -1
    config.sft.optimizer.total_steps = 10
    config.data.train_tasks = "no/such/file.jsonl"
    found = config_check.problems(config, num_devices=4)
    text = "\n".join(found)
    for field in ("rl.typo_field: unknown field", "rl.loss.kl_betta: unknown field",
                  "eval.evaluator.load_timeout_s: unknown field",
                  "sft.batch_size=6 is not divisible by the 4-way batch axis (data)",
                  "rl.prompts_per_step=3 is not divisible by rl.mini_batches=2",
                  "rl.temperature=0.0 must be a finite number > 0",
                  "rl.loss.kl_beta=-1.0 must be >= 0",
                  "rl.max_prompt_len + rl.max_new_tokens = 1160 exceeds "
                  "model.max_position_embeddings=1024",
                  "sft.optimizer: need 0 <= warmup_steps (-1)",
                  "data.train_tasks='no/such/file.jsonl': no such file"):
      self.assertIn(field, text)
    self.assertLen(found, 10, text)  # each problem once
    with self.assertRaises(config_check.ConfigError) as raised:
      config_check.check(config, num_devices=4)
    self.assertEqual(raised.exception.problems, found)
    self.assertIn("invalid config (10 problems)", str(raised.exception))

  def test_mini_batches_and_micro_batches_split_over_the_mesh(self):
    config = moe_124b.get_config()
    config.rl.mini_batches = 2  # 256-row mini-batches in 2 micro-batches: 128 < 256
    found = config_check.problems(config, num_devices=256, mode="plan")
    self.assertEqual(found, [
        "rl.mini_batches=2: a mini-batch of rl.prompts_per_step x rl.group_size / "
        "rl.mini_batches = 256 rows is not divisible by micro_batches=2 x the 256-way "
        "batch axis (fsdp×expert) = 512"])
    config.mesh.fsdp = 16
    self.assertIn("mesh: mesh", config_check.problems(config, num_devices=256,
                                                     mode="plan")[0])

  def test_sft_packing_needs_the_dense_model_without_blocked_attention(self):
    config = natural_v2.get_config("pilot")  # the dense Llama
    config.sft.pack = True
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.model.attention_block_size = 64
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "sft.pack=True needs model.attention_block_size=0 (blocked attention reads one "
        "sequence per row)"])
    config = tiny_natural.get_config()  # the hybrid MoE
    config.sft.pack = True
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "sft.pack=True needs model.family='llama' (packed segments are read by the dense "
        "model's attention only), not 'ling'"])

  def test_length_bucket(self):
    config = tiny_natural.get_config()
    self.assertEqual(config.rl.length_bucket, 64)
    config.rl.length_bucket = 0  # pad to the maximum
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.rl.length_bucket = -8
    self.assertIn("rl.length_bucket=-8 must be >= 0",
                  config_check.problems(config, num_devices=1))

  def test_overlap_backend_and_processes(self):
    config = tiny_natural.get_config()
    config.rl.overlap_steps = 2
    config.eval.backend = "threads"
    config.eval.ray_address = "head:6379"
    config.rl.prompts_per_step = 3
    text = "\n".join(config_check.problems(config, num_devices=4, num_processes=2))
    for message in ("rl.overlap_steps=2 must be 0 or 1", "eval.backend='threads'",
                    "eval.ray_address='head:6379' needs eval.backend='ray'",
                    "rl.prompts_per_step=3 is not divisible by the 2 processes"):
      self.assertIn(message, text)
    config = tiny_natural.get_config()
    config.rl.overlap_steps = 1
    config.rl.recompute_old_logprobs = True
    self.assertIn("rl.overlap_steps=1 with rl.recompute_old_logprobs=True",
                  "\n".join(config_check.problems(config, num_devices=1)))
    config.rl.recompute_old_logprobs = False
    config.rl.overlap_steps = 0
    config.rl.rollout_dtype = "bfloat16"
    self.assertIn("rl.rollout_dtype='bfloat16' needs rl.recompute_old_logprobs=True",
                  "\n".join(config_check.problems(config, num_devices=1)))
    config.rl.rollout_dtype = "float16"
    self.assertIn("rl.rollout_dtype='float16' must be one of ('', 'bfloat16')",
                  "\n".join(config_check.problems(config, num_devices=1)))
    config.rl.rollout_dtype, config.rl.recompute_old_logprobs = "bfloat16", True
    self.assertEqual(config_check.problems(config, num_devices=1), [])
    config.rl.rollout_dtype, config.rl.recompute_old_logprobs = "", False
    config.rl.overlap_steps = 1
    config.eval.backend, config.eval.ray_address = "ray", "ray://head:10001"
    self.assertEqual(config_check.problems(config, num_devices=4, num_processes=2), [])

  def test_reference_checks(self):
    config = tiny_natural.get_config()
    config.rl.reference = "/no/such/checkpoint"
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "rl.reference='/no/such/checkpoint' is set but rl.loss.kl_beta=0 (no KL term)"])
    config.rl.loss.kl_beta = 0.05
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "rl.reference='/no/such/checkpoint': no such checkpoint directory"])

  def test_main_exits_2_naming_the_field_without_traceback(self):
    out = subprocess.run(
        [sys.executable, "-m", "rcca_jax.main", "--mode=plan",
         "--config=experiments/moe_124b.py", "--config.sft.batch_size=100",
         "--config.rl.temperature=-0.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertIn("sft.batch_size=100 is not divisible by micro_batches=2 x the "
                  "256-way batch axis (fsdp×expert) = 512", out.stderr)
    self.assertIn("rl.temperature=-0.5 must be a finite number > 0", out.stderr)
    self.assertNotIn("Traceback", out.stderr)
    self.assertEqual(out.stdout, "")


class RangesAndOverridesTest(absltest.TestCase):

  def test_loss_and_credit_ranges(self):
    config = tiny_cpu.get_config()
    config.rl.loss.update(eps_low=2.0, eps_high=0.0, rcca_c=-1.0)
    config.credit.update(direct=0.5, context=0.9)
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "credit: direct=0.5, context=0.9 must be >= 1 (a blamed token's weight; 1 = not "
        "blamed)",
        "rl.loss.eps_low=2.0 must be in (0, 1)", "rl.loss.eps_high=0.0 must be > 0",
        "rl.loss.rcca_c=-1.0 must be > 0"])
    config = tiny_cpu.get_config()
    config.credit.update(direct=3.0, cap=2.0)
    config.eval.collapse_margin = -0.1
    self.assertEqual(config_check.problems(config, num_devices=1), [
        "eval.collapse_margin=-0.1 must be >= 0",
        "credit.cap=2.0 must be >= credit.direct=3.0 (the cap bounds the accumulated "
        "weight)"])
    config = tiny_cpu.get_config()
    config.rl.loss.update(eps_low=0.999, eps_high=5.0, rcca_c=0.01)
    config.credit.update(direct=1.0, context=1.0, cap=1.0)
    self.assertEqual(config_check.problems(config, num_devices=1), [])

  def test_fault_budgets(self):
    # As a plain mapping: a ConfigDict already refuses 0.5 for an int field.
    config = tiny_cpu.get_config().to_dict()
    config["rl"]["max_unscorable"] = 1.5
    config["rl"]["unscorable_retries"] = -1
    config["max_nonfinite_in_row"] = 0.5
    config["checkpoint"] = {"every_seconds": -1.0}
    problems = config_check.problems(config, num_devices=1)
    for want in ("rl.max_unscorable=1.5 must be in [0, 1]",
                 "checkpoint.every_seconds=-1.0 must be >= 0",
                 "rl.unscorable_retries", "max_nonfinite_in_row"):
      self.assertTrue(any(p.startswith(want) for p in problems), (want, problems))

  def test_unknown_path_names_the_closest_field(self):
    values = tiny_cpu.get_config().to_dict()
    self.assertEqual(mapping.unknown_path(values, "rl.gruop_size"),
                     "rl.gruop_size: unknown field (did you mean rl.group_size?)")
    self.assertEqual(mapping.unknown_path(values, "rl.loss.qqq"),
                     "rl.loss.qqq: unknown field")
    self.assertEqual(mapping.unknown_path(values, "seed.x"),
                     "seed.x: seed is a value, not a section")
    self.assertIsNone(mapping.unknown_path(values, "rl.loss.eps_low"))

  def test_misspelt_override_is_one_line_and_exit_2(self):
    out = subprocess.run(
        [sys.executable, "-m", "rcca_jax.main", "--config=experiments/tiny_cpu.py",
         "--workdir=/nonexistent", "--config.rl.gruop_size=3"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    self.assertEqual(out.returncode, 2, out.stderr[-2000:])
    self.assertEqual(out.stderr.strip().splitlines(), [
        "invalid config override: rl.gruop_size: unknown field (did you mean "
        "rl.group_size?)"])
    self.assertEqual(out.stdout, "")


class PromptsTest(absltest.TestCase):

  def test_long_prompts_refused_or_skipped(self):
    tokenizer = sections.load_tokenizer("data/tokenizer")
    tasks = [types.SimpleNamespace(id="short", request="A counter."),
             types.SimpleNamespace(id="long", request="Build a counter app. " * 40)]
    limit = len(prompts.chat.format_prompt(tokenizer, tasks[0].request)) + 5
    long_len = len(prompts.chat.format_prompt(tokenizer, tasks[1].request))
    with self.assertRaises(config_check.ConfigError) as raised:
      prompts.fit_prompts(tokenizer, tasks, limit)
    self.assertEqual(raised.exception.problems, [
        f"rl.max_prompt_len={limit}: 1 of 2 RL prompts are longer: long ({long_len} "
        "tokens) (raise it, or set rl.long_prompts='skip')"])
    kept, skipped = prompts.fit_prompts(tokenizer, tasks, limit, "skip")
    self.assertEqual(([t.id for t in kept], skipped), (["short"], 1))
    kept, skipped = prompts.fit_prompts(tokenizer, tasks, long_len, "refuse")
    self.assertEqual((len(kept), skipped), (2, 0))


if __name__ == "__main__":
  absltest.main()
