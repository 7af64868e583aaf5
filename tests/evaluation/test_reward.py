"""Tests for the gated reward (docs/method.md#2-gated-reward) against hand-computed values."""

from absl.testing import absltest, parameterized

from rcca_jax.evaluation import record, reward

CFG = reward.RewardConfig()


class RubricScoreTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("none", [], 1.0),
      ("behavior_major", [("behavior", "major")], 0.85),
      ("core_minor_no_cap", [("core", "minor")], 0.90),
      ("accumulates", [("behavior", "major"), ("behavior", "major"), ("rendering", "minor")],
       0.68),
      ("four_rendering_major", [("rendering", "major")] * 4, 0.76),
      ("core_major_capped", [("core", "major")], 0.70),
      ("core_major_below_cap", [("core", "major"), ("behavior", "critical")], 0.45),
      ("core_critical_capped", [("core", "critical")], 0.40),
      ("core_major_and_critical", [("core", "major"), ("core", "critical")], 0.30),
      ("clipped_at_floor", [("core", "critical"), ("behavior", "critical"),
                            ("behavior", "critical")], 0.20),
      ("rendering_critical", [("rendering", "critical")], 0.88),
  )
  def test_default_table(self, violations, expected):
    self.assertAlmostEqual(reward.rubric_score(violations, CFG), expected, places=12)

  def test_floor_applies_after_cap(self):
    cfg = reward.RewardConfig.from_dict({"ceilings": {"core": {"critical": 0.1}}})
    self.assertAlmostEqual(reward.rubric_score([("core", "critical")], cfg), 0.2)
    cfg = reward.RewardConfig.from_dict({"floor": 0.0, "ceilings": {"core": {"critical": 0.1}}})
    self.assertAlmostEqual(reward.rubric_score([("core", "critical")], cfg), 0.1)

  def test_top_clips(self):
    cfg = reward.RewardConfig.from_dict({"top": 0.9})
    self.assertAlmostEqual(reward.rubric_score([], cfg), 0.9)
    self.assertAlmostEqual(reward.rubric_score([("rendering", "minor")], cfg), 0.9)
    self.assertAlmostEqual(reward.rubric_score([("behavior", "major")], cfg), 0.85)

  def test_unknown_level_or_severity(self):
    with self.assertRaisesRegex(ValueError, "unknown rubric level/severity 'ui'/'major'"):
      reward.rubric_score([("ui", "major")], CFG)
    with self.assertRaisesRegex(ValueError, "'core'/'fatal'"):
      reward.rubric_score([("core", "fatal")], CFG)

  def test_ungraded_and_passed_rubrics_are_excluded(self):
    levels = {"r1": "core", "r2": "behavior", "r3": "core", "r4": "rendering"}
    results = [
        record.RubricResult("r1", passed=None),                 # ungraded: no judge
        record.RubricResult("r2", passed=False, severity="major"),
        record.RubricResult("r3", passed=True),
        record.RubricResult("r4", passed=False, severity="minor"),
    ]
    violations = reward.rubric_violations(levels, results)
    self.assertEqual(violations, [("behavior", "major"), ("rendering", "minor")])
    self.assertAlmostEqual(reward.rubric_score(violations, CFG), 0.83)

  def test_failed_rubric_needs_severity(self):
    with self.assertRaisesRegex(ValueError, "rubric r1: failed without a valid severity"):
      reward.rubric_violations({"r1": "core"}, [record.RubricResult("r1", passed=False)])


class GatedRewardTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("format_fails", (False,), 0.0),
      ("source_fails", (True, False), 0.05),
      ("runtime_fails", (True, True, False), 0.10),
      ("all_pass", (True, True, True), 0.55),
  )
  def test_gate_order(self, outcomes, expected):
    gates = reward.gate_values(*outcomes)
    self.assertAlmostEqual(reward.gated_reward(gates, 0.55, CFG), expected)

  def test_gate_values_are_none_after_first_failure(self):
    self.assertEqual(reward.gate_values(False, True, True),
                     {"format": False, "source": None, "runtime": None})
    self.assertEqual(reward.gate_values(True, False),
                     {"format": True, "source": False, "runtime": None})
    self.assertEqual(reward.gate_values(True, True, True),
                     {"format": True, "source": True, "runtime": True})
    with self.assertRaises(ValueError):
      reward.gate_values(True, True, True, True)

  def test_none_gate_counts_as_not_passed(self):
    gates = {"format": True, "source": None, "runtime": None}
    self.assertAlmostEqual(reward.gated_reward(gates, None, CFG), 0.05)

  def test_all_gates_passed_needs_score(self):
    with self.assertRaisesRegex(ValueError, "rubric_score is None"):
      reward.gated_reward(reward.gate_values(True, True, True), None, CFG)

  def test_gate_values_are_config(self):
    cfg = reward.RewardConfig.from_dict(
        {"format_fail": -1.0, "source_fail": 0.01, "runtime_fail": 0.02})
    self.assertEqual(reward.gated_reward(reward.gate_values(False), None, cfg), -1.0)
    self.assertEqual(reward.gated_reward(reward.gate_values(True, False), None, cfg), 0.01)
    self.assertEqual(reward.gated_reward(reward.gate_values(True, True, False), None, cfg), 0.02)


class ConfigTest(parameterized.TestCase):

  def test_defaults_match_method_table(self):
    self.assertEqual(dict(CFG.penalties["core"]), {"minor": 0.10, "major": 0.25, "critical": 0.45})
    self.assertEqual(dict(CFG.penalties["behavior"]),
                     {"minor": 0.05, "major": 0.15, "critical": 0.30})
    self.assertEqual(dict(CFG.penalties["rendering"]),
                     {"minor": 0.02, "major": 0.06, "critical": 0.12})
    self.assertEqual({l: dict(r) for l, r in CFG.ceilings.items()},
                     {"core": {"critical": 0.40, "major": 0.70}})
    self.assertEqual((CFG.format_fail, CFG.source_fail, CFG.runtime_fail, CFG.floor, CFG.top),
                     (0.0, 0.05, 0.10, 0.2, 1.0))

  def test_from_dict_merges_penalty_rows(self):
    cfg = reward.RewardConfig.from_dict({"penalties": {"core": {"minor": 0.2}}, "floor": 0.1})
    self.assertEqual(cfg.penalties["core"]["minor"], 0.2)
    self.assertEqual(cfg.penalties["core"]["major"], 0.25)
    self.assertEqual(cfg.penalties["rendering"]["minor"], 0.02)
    self.assertEqual(cfg.floor, 0.1)

  def test_round_trip_through_dict(self):
    cfg = reward.RewardConfig.from_dict({"ceilings": {"core": {"critical": 0.3}}, "top": 0.95})
    self.assertEqual(reward.RewardConfig.from_dict(cfg.to_dict()), cfg)

  @parameterized.named_parameters(
      ("unknown_key", {"flor": 0.1}, "unknown keys flor"),
      ("unknown_level", {"penalties": {"ui": {"minor": 0.1}}}, "unknown level 'ui'"),
      ("unknown_severity", {"ceilings": {"core": {"fatal": 0.1}}}, "unknown severity 'fatal'"),
      ("floor_above_top", {"floor": 0.9, "top": 0.5}, "floor 0.9 is above top 0.5"),
  )
  def test_bad_config(self, d, message):
    with self.assertRaisesRegex(ValueError, message):
      reward.RewardConfig.from_dict(d)

  def test_config_is_immutable(self):
    with self.assertRaises(TypeError):
      CFG.penalties["core"]["minor"] = 0.0  # type: ignore[index]


if __name__ == "__main__":
  absltest.main()
