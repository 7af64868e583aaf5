"""How `summary.json` here was made: low_overlap's first measurement (DIR/onestep: grpo,
focus, placebo, the negative-only pair) joined with the three further placebo layouts
(DIR/onestep_draws, stopped after 44 batches) on the batches measured in both.

    PYTHONPATH=. python experiments/results/credit_study3/low_overlap_placebo_draws/merge.py DIR OUT.json
"""
import json
import sys

from experiments import credit_onestep_lines as onestep_lines
from experiments import credit_onestep_stats as onestep_stats


def main(directory: str, out: str) -> None:
  parts = [f"{directory}/onestep", f"{directory}/onestep_draws"]
  lines = onestep_lines.merge_lines(onestep_lines.read_lines(f"{parts[0]}/pairs.jsonl"),
                                    [onestep_lines.read_lines(f"{parts[1]}/pairs.jsonl")])
  arms = [a for part in parts for a in onestep_lines.read_meta(part)["arms"]]
  summary = onestep_stats.summarize(
      [lines[s] for s in sorted(lines)], arms, reps=2000, seed=0, auc_steps=18.0,
      setting="low_overlap",
      info={"checkpoint": f"{directory}/seed_0/sft/checkpoints/sft", "merged": parts})
  with open(out, "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  print(onestep_stats.table(summary))


if __name__ == "__main__":
  main(*sys.argv[1:3])
