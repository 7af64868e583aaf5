"""experiments/credit_onestep_lines.py: measurements merged (other arms) and joined
(other batches), and a committed summary read back as lines."""

import json
import os

import numpy as np
from absl.testing import absltest

from experiments import credit_onestep_lines as onestep_lines
from experiments import credit_onestep_stats as onestep_stats


class LinesTest(absltest.TestCase):
  def test_merged_measurements_join_the_arms_of_each_pair(self):
    def line(step, before, after):
      return {"step": step, "pairs": [{"step": step, "task_id": "t", "site": "b",
                                       "before": before, "after": after}],
              "updates": {a: {} for a in after}, "measure_s": 1.0}
    mine = {0: line(0, 0.5, {"grpo": 0.4}), 1: line(1, 0.5, {"grpo": 0.3})}
    theirs = {1: line(1, 0.5, {"rcca_focus": 0.2}), 2: line(2, 0.5, {"rcca_focus": 0.1})}
    got = onestep_lines.merge_lines(mine, [theirs])
    self.assertEqual(list(got), [1])
    self.assertEqual(got[1]["pairs"][0]["after"], {"grpo": 0.3, "rcca_focus": 0.2})
    self.assertEqual((got[1]["measure_s"], mine[1]["pairs"][0]["after"]),
                     (2.0, {"grpo": 0.3}))
    with self.assertRaisesRegex(ValueError, "step 1, site .*differ"):
      onestep_lines.merge_lines(mine, [{1: line(1, 0.7, {"rcca_focus": 0.2})}])
    # Another scoring layout's rounding: the other arm keeps the change it measured.
    got = onestep_lines.merge_lines(mine, [{1: line(1, 0.5 + 1e-4, {"rcca_focus": 0.2})}])
    self.assertAlmostEqual(got[1]["pairs"][0]["after"]["rcca_focus"] - 0.5, 0.2 - 0.5 - 1e-4,
                           places=12)

  def test_joined_measurements_add_the_other_batches(self):
    mine = {3: {"step": 3, "who": "mine"}, 4: {"step": 4, "who": "mine"}}
    other = {1: {"step": 1, "who": "other"}, 3: {"step": 3, "who": "other"}}
    joined = onestep_lines.join_lines(mine, [other])
    self.assertEqual(list(joined), [1, 3, 4])
    self.assertEqual([line["who"] for line in joined.values()], ["other", "mine", "mine"])

  def test_a_summary_gives_back_its_lines(self):
    rng = np.random.default_rng(1)
    arms = ["grpo", "rcca_focus", "rcca_focus_placebo"]
    lines = [{"step": step, "measure_s": 2.0,
              "updates": {a: {"grad_norm": float(step), "clipped": 0.0} for a in arms},
              "pairs": [{"step": step, "task_id": f"t{i}", "site": "bug0",
                         "blamed": bool((step + i) % 2), "before": float(rng.normal()),
                         "after": dict(zip(arms, rng.normal(size=3).tolist()))}
                        for i in range(3)]} for step in (4, 7, 9)]
    summary = json.loads(json.dumps(onestep_stats.summarize(lines, arms, reps=100, seed=0,
                                                      auc_steps=18.0)))
    back = onestep_lines.summary_lines(summary)
    self.assertEqual(list(back), [4, 7, 9])
    self.assertEqual([b["pairs"] for b in back.values()], [line["pairs"] for line in lines])
    self.assertEqual([b["updates"] for b in back.values()],
                     [line["updates"] for line in lines])
    again = onestep_stats.summarize(list(back.values()), arms, reps=100, seed=0,
                                    auc_steps=18.0)
    self.assertEqual(again["differences"], summary["differences"])
    self.assertEqual(again["measure_s"], summary["measure_s"])
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "summary.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(summary, f)
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as f:
      json.dump({"checkpoint": "ckpt", "arms": arms[:1]}, f)
    self.assertEqual(onestep_lines.joined_output(path),
                     ({"checkpoint": "ckpt", "arms": arms}, back))

  def test_a_summarys_meta_is_its_namesakes_with_the_summarys_arms(self):
    folder = self.create_tempdir().full_path
    layout = {"locator": "exact, else window"}
    for suffix, arms in (("", ["grpo"]), ("_window", ["grpo", "rcca_focus"])):
      with open(os.path.join(folder, f"meta{suffix}.json"), "w", encoding="utf-8") as f:
        json.dump({"checkpoint": "ckpt", "arms": ["grpo"],
                   "layout": layout | {"s": suffix}}, f)
      with open(os.path.join(folder, f"summary{suffix}.json"), "w", encoding="utf-8") as f:
        json.dump({"arms": arms, "steps": [], "measure_s": 0.0, "pairs": [], "updates": []}, f)
    meta, lines = onestep_lines.joined_output(os.path.join(folder, "summary_window.json"))
    self.assertEqual(meta["layout"]["s"], "_window")
    self.assertEqual(meta["arms"], ["grpo", "rcca_focus"])
    self.assertEqual(lines, {})
    self.assertEqual(onestep_lines.joined_output(folder),
                     ({"checkpoint": "ckpt", "arms": ["grpo"], "layout": layout | {"s": ""}},
                      {}))
    with self.assertRaisesRegex(ValueError, "not a summary"):
      onestep_lines.joined_output(os.path.join(folder, "meta.json"))


if __name__ == "__main__":
  absltest.main()
