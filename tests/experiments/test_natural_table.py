"""experiments/natural_table.py: the base -> SFT -> RL table from evaluation summaries."""

import json
import os

from absl.testing import absltest

from experiments import natural_table


def _summary(shares: dict[str, float], greedy: dict[str, float]) -> dict:
  """A summary of 4 samples per request: `shares` per task id, greedy pass per family."""
  families = {f: {"pass_rate": p, "reward_mean": p / 2, "gates_pass": 1.0}
              for f, p in greedy.items()}
  return {"pass_rate": sum(greedy.values()) / len(greedy), "pass_at_1": 0.0,
          "pass_at_4": 0.0, "reward_mean": 0.0, "gates_pass": 1.0,
          "samples_per_request": 4, "families": families, "pass_at_1_tasks": shares}


class NaturalTableTest(absltest.TestCase):

  def test_family_rows_pass_at_k_and_averaging(self):
    one = _summary({"counter-f0-000000": 0.25, "counter-00090": 0.0,
                    "dark_mode-f0-000001": 1.0}, {"counter": 0.5, "dark_mode": 1.0})
    two = _summary({"counter-f0-000000": 0.75, "counter-00090": 0.0,
                    "dark_mode-f0-000001": 0.0}, {"counter": 0.0, "dark_mode": 0.0})
    rows = natural_table.table([("RL", "dev", [one, two])])
    self.assertEqual([r["family"] for r in rows], ["all", "counter", "dark_mode"])
    counter = rows[1]
    self.assertEqual(counter["runs"], 2)
    # pass@1: the requests' shares averaged ((0.25 + 0) / 2 and (0.75 + 0) / 2), then
    # the runs; pass@4 of 4 samples is 1 when any passed: 0.5 in each run.
    self.assertAlmostEqual(counter["pass_at_1"], 0.25)
    self.assertAlmostEqual(counter["pass_at_4"], 0.5)
    self.assertAlmostEqual(counter["pass_rate"], 0.25)
    self.assertAlmostEqual(rows[2]["pass_at_4"], 0.5)
    self.assertIn("| RL | dev | counter | 2 | 0.250 | 0.250 | 0.500 | 0.125 | 1.000 |",
                  natural_table.markdown(rows))

  def test_cli_refuses_a_summary_without_pass_at_4(self):
    d = self.create_tempdir().full_path
    with open(os.path.join(d, "summary.json"), "w", encoding="utf-8") as f:
      json.dump({"samples_per_request": 0}, f)
    with self.assertRaisesRegex(SystemExit, "summary.json: no pass@4"):
      natural_table.main([f"SFT:dev={d}"])
    with self.assertRaisesRegex(SystemExit, "expected STAGE:SPLIT=DIR"):
      natural_table.main([d])


if __name__ == "__main__":
  absltest.main()
