"""The RL start's three conditions, read from an evaluation's files
(experiments/natural_v2_select.py)."""

import json
import os

import numpy as np
from absl.testing import absltest

from experiments import natural_v2
from experiments import natural_v2_select as select
from rcca_jax.data import chat
from rcca_jax.models import llama_checkpoint
from rcca_jax.sampling import generate
from rcca_jax.study import ablation
from rcca_jax.study import ablation_report
from rcca_jax.train import sections
from rcca_jax.train import workdir_guard


def _write(directory, summary, sampled):
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "summary.json"), "w") as f:
    json.dump(summary, f)
  with open(os.path.join(directory, "sampled.jsonl"), "w") as f:
    for task_id, reward in sampled:
      f.write(json.dumps({"task_id": task_id, "reward": reward}) + "\n")


class ConditionsTest(absltest.TestCase):

  def test_signal_share_and_the_three_conditions(self):
    root = self.create_tempdir().full_path
    dev, dry = os.path.join(root, "dev"), os.path.join(root, "dry")
    summary = {"pass_rate": 0.3, "pass_at_1": 0.2, "pass_at_8": 0.4, "reward_mean": 0.5,
               "gates_pass": 0.9, "splits": {"dev": {"pass_rate": 0.35}}}
    # a: rewards differ; b: all equal; c: one graded sample (no difference); d: differ.
    _write(dev, summary, [])
    _write(dry, {}, [("a", 0.1), ("a", 0.4), ("b", 0.2), ("b", 0.2), ("c", 0.3),
                     ("c", None), ("d", 1.0), ("d", 0.2)])
    self.assertEqual(select.signal_share(os.path.join(dry, "sampled.jsonl")), 0.5)
    got = select.conditions(dev, dry)
    self.assertAlmostEqual(got["pass_gap"], 0.2)
    self.assertEqual((got["in_band"], got["gap_ok"], got["signal_ok"], got["meets_all"]),
                     (True, True, True, True))
    self.assertEqual(got["splits"], {"dev": 0.35})
    _write(dev, {**summary, "pass_at_8": 0.3}, [])
    got = select.conditions(dev, dry)
    self.assertEqual((got["gap_ok"], got["meets_all"]), (False, False))
    _write(dev, {**summary, "pass_rate": 0.7}, [])
    self.assertFalse(select.conditions(dev, dry)["in_band"])

  def test_conditions_on_one_split(self):
    """Greedy pass from the greedy records, pass@1 and pass@8 from the samples, of the
    split's requests only (novel-word task ids end in `-nNNNNNN`)."""
    root = self.create_tempdir().full_path
    dev, dry = os.path.join(root, "dev"), os.path.join(root, "dry")
    t, n = "f-f0-000000", "f-f0-n000000"
    _write(dev, {"reward_mean": 0.5, "gates_pass": 0.9}, [])
    passed = [{"gates": {"format": True, "source": True, "runtime": True},
               "rubrics": [{"passed": ok}]} for ok in (True, False)]
    with open(os.path.join(dev, "evaluations.jsonl"), "w") as f:
      for task_id, record in ((t, passed[0]), ("g-f0-000001", passed[1]), (n, passed[0])):
        f.write(json.dumps({"task_id": task_id, **record}) + "\n")
    with open(os.path.join(dev, "sampled.jsonl"), "w") as f:
      # t: 2 of 8 samples pass; g: none; n: 8 of 8.
      for task_id, passes in ((t, 2), ("g-f0-000001", 0), (n, 8)):
        for i in range(8):
          f.write(json.dumps({"task_id": task_id, "reward": 0.5, "passed": i < passes})
                  + "\n")
    _write(dry, {}, [("a", 0.1), ("a", 0.4)])
    got = select.conditions(dev, dry, "dev")
    self.assertEqual((got["split"], got["greedy_pass"]), ("dev", 0.5))
    self.assertAlmostEqual(got["pass_at_1"], (2 / 8 + 0) / 2)
    self.assertAlmostEqual(got["pass_at_8"], 0.5)  # t holds a pass among its 8, g none
    got = select.conditions(dev, dry, "novel")
    self.assertEqual((got["greedy_pass"], got["pass_at_1"], got["pass_at_8"]), (1.0, 1.0, 1.0))

  def test_evaluations_are_named_by_checkpoint_and_not_rerun(self):
    # An evaluation whose summary exists is reused (no subprocess runs here): SFT steps
    # and the starting policy (`--policy`: the run's `base` checkpoint) apart.
    root = self.create_tempdir().full_path
    for name in ("sft_000250_", "base_000000_dry", "base_000000_"):
      _write(os.path.join(root, "eval", name), {}, [])
    self.assertEqual(select._eval(root, 250, None, 8),
                     os.path.join(root, "eval", "sft_000250_"))
    self.assertEqual(select._eval(root, "base", "/x/dry.jsonl", 8),
                     os.path.join(root, "eval", "base_000000_dry"))
    self.assertEqual(select._eval(root, "base", None, 8), os.path.join(root, "eval", "base_000000_"))


class StudyConfigTest(absltest.TestCase):

  def test_the_rl_study_checks_and_keeps_the_report_keys(self):
    config = natural_v2.get_config("rl")
    self.assertEqual(ablation.check_configs(config, 3), natural_v2.ARMS.split(","))
    self.assertIn("pass_at_1_tasks", ablation_report.point_keys(config))
    job = sections.job_config(config)
    self.assertEqual((job.eval.samples_per_request, job.eval.end_samples_per_request),
                     (0, 16))

  def test_the_demo_is_the_studys_grpo_arm_shortened(self):
    demo = natural_v2.get_config("demo")
    grpo = ablation.arm_config(natural_v2.get_config("rl"), 0, "grpo")
    changes = workdir_guard.config_changes(grpo.to_dict(), demo.to_dict())
    self.assertEqual([(name, old, new) for name, old, new in changes],
                     [("eval.after_sft", False, True),
                      ("eval.end_samples_per_request", 16, -1),
                      ("rl.num_steps", 200, 50)])


class PackedPolicyTest(absltest.TestCase):

  def test_the_rl_start_is_natural_v2s_model_and_greedy_writes_a_page(self):
    # The packed SFT policy every RL run starts from (`natural_v2.SFT_POLICY`): the
    # `rl` preset's model, parameters only (a few MB), and it answers a request.
    job = sections.job_config(natural_v2.get_config("rl"))
    self.assertEqual(job.init_from_hf, natural_v2.SFT_POLICY)
    size = sum(os.path.getsize(os.path.join(natural_v2.SFT_POLICY, f))
               for f in os.listdir(natural_v2.SFT_POLICY))
    self.assertLess(size, 16 << 20)
    tokenizer = sections.load_tokenizer(job.data.tokenizer)
    expected = sections.model_config(job, tokenizer)
    model = llama_checkpoint.load(natural_v2.SFT_POLICY,
                                  attention_block_size=expected.attention_block_size)
    self.assertEqual(model.config, expected)
    prompt = chat.format_prompt(tokenizer, "Make a counter in one HTML page. Ids: "
                                           "`#count-sers-fff` for the display.")
    out = generate(model, [prompt], max_new_tokens=16, temperature=0.0,
                   eos_ids=[tokenizer.eos_token_id])
    text = tokenizer.decode(out.tokens[0, :int(out.lengths[0])])
    self.assertIn("<!DOCTYPE html>", text)
    self.assertTrue(np.all(np.isfinite(out.logprobs)))


if __name__ == "__main__":
  absltest.main()
