"""The run's outcome from its metrics rows: collapse warning, table, curves plot."""

import os

from absl.testing import absltest

from rcca_jax.train import outcome

POST_SFT = {"stage": "eval", "after": "sft", "step": 300, "reward_mean": 0.60,
            "gate_format": 1.0, "gate_source": 1.0, "gate_runtime": 0.9,
            "gates_pass": 0.9, "pass_rate": 0.0, "a/reward_mean": 0.5,
            "a/gates_pass": 1.0, "a/pass_rate": 0.0, "b/reward_mean": 0.7,
            "b/gates_pass": 0.8, "b/pass_rate": 0.0, "category/x/pass_rate": 0.0}


def _rl_eval(step, **values):
  row = dict(POST_SFT, after="rl", step=step)
  row.update(values)
  return row


class CollapseTest(absltest.TestCase):

  def test_a_drop_beyond_the_margin_is_named_with_before_and_now(self):
    now = _rl_eval(8, reward_mean=0.40, gate_runtime=0.6, gates_pass=0.85)
    self.assertEqual(outcome.drops(POST_SFT, now, 0.1),
                     [("reward_mean", 0.6, 0.4), ("gate_runtime", 0.9, 0.6)])
    line = outcome.collapse_warning(POST_SFT, now, 0.1, "after RL step 8")
    self.assertEqual(len(line.splitlines()), 1)
    self.assertIn("after RL step 8", line)
    self.assertIn("reward_mean 0.600 -> 0.400", line)
    self.assertIn("gate_runtime 0.900 -> 0.600", line)
    self.assertNotIn("gates_pass", line)  # 0.05 below: inside the margin

  def test_a_rise_or_a_small_dip_is_quiet(self):
    rise = _rl_eval(8, reward_mean=0.9, gate_runtime=1.0, gates_pass=1.0, pass_rate=0.7)
    self.assertIsNone(outcome.collapse_warning(POST_SFT, rise, 0.1, "after RL step 8"))
    dip = _rl_eval(8, reward_mean=0.55, gate_format=0.95)
    self.assertIsNone(outcome.collapse_warning(POST_SFT, dip, 0.1, "after RL step 8"))
    self.assertIsNotNone(outcome.collapse_warning(POST_SFT, dip, 0.0, "after RL step 8"))


class TableAndPlotTest(absltest.TestCase):

  def test_table_has_both_evaluations_and_each_family(self):
    after = _rl_eval(16, reward_mean=0.9, pass_rate=0.5, **{"b/pass_rate": 1.0})
    text = outcome.table(POST_SFT, after)
    lines = text.splitlines()
    self.assertIn("| after SFT step 300 | 0.600 | 1.000 | 1.000 | 0.900 | 0.900 | 0.000 |",
                  lines)
    self.assertIn("| after RL step 16 | 0.900 | 1.000 | 1.000 | 0.900 | 0.900 | 0.500 |",
                  lines)
    self.assertIn("| b | 0.70 -> 0.70 | 0.80 -> 0.80 | 0.00 -> 1.00 |", lines)
    self.assertEqual(outcome.groups(after), ["a", "b"])

  def test_splits_in_the_table_and_the_pass_curve(self):
    splits = {"split/dev/reward_mean": 0.4, "split/dev/gates_pass": 0.85,
              "split/dev/pass_rate": 0.2, "split/novel/reward_mean": 0.2,
              "split/novel/gates_pass": 0.7, "split/novel/pass_rate": 0.0}
    before = dict(POST_SFT, **splits)
    mid = _rl_eval(25, **{**splits, "split/dev/pass_rate": 0.3, "pass_rate": 0.2})
    after = _rl_eval(50, **{**splits, "split/dev/pass_rate": 0.35, "pass_rate": 0.25})
    self.assertEqual(outcome.splits(after), ["dev", "novel"])
    lines = outcome.table(before, after).splitlines()
    self.assertIn("| dev | 0.40 -> 0.40 | 0.85 -> 0.85 | 0.20 -> 0.35 |", lines)
    self.assertIn("| novel | 0.20 -> 0.20 | 0.70 -> 0.70 | 0.00 -> 0.00 |", lines)
    rows = [before, {"stage": "rl", "step": 1, "pass_rate": 0.1}, mid, after]
    self.assertEqual(outcome.pass_curve(rows).splitlines(), [
        "| pass rate by RL step | 0 | 25 | 50 |", "| --- | --- | --- | --- |",
        "| all | 0.000 | 0.200 | 0.250 |", "| split dev | 0.200 | 0.300 | 0.350 |",
        "| split novel | 0.000 | 0.000 | 0.000 |"])
    self.assertEqual(outcome.pass_curve([]), "")
    self.assertNotIn("split", outcome.table(POST_SFT, _rl_eval(16)))

  def test_plot_is_a_png(self):
    rows = [POST_SFT, {"stage": "rl", "step": 1, "reward_mean": 0.5, "pass_rate": 0.1},
            {"stage": "rl", "step": 2, "reward_mean": 0.7, "pass_rate": 0.3},
            _rl_eval(2, reward_mean=0.8, pass_rate=0.5)]
    path = os.path.join(self.create_tempdir().full_path, "curves.png")
    self.assertEqual(outcome.plot_curves(rows, path), path)
    with open(path, "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    self.assertGreater(os.path.getsize(path), 5000)


if __name__ == "__main__":
  absltest.main()
