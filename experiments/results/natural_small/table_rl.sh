#!/bin/bash
# The base -> SFT -> RL table of a finished natural_small:longer_rl ablation in DIR (its
# shared SFT's base / step-9000 evaluations and each arm's rl_000040_{dev,test}, the
# seeds averaged), printed as markdown and written to OUT as JSON.
#   bash table_rl.sh DIR OUT      (run from the repository root)
set -euo pipefail
dir=$1 out=$2
ev=$dir/seed_0/sft/eval
args=("base:dev=$ev/base_000000_dev" "base:test=$ev/base_000000_test"
      "SFT:dev=$ev/sft_009000" "SFT:test=$ev/sft_009000_test")
for arm in grpo rcca rcca_focus; do
  for split in dev test; do
    runs=$(ls -d "$dir"/seed_*/"$arm"/eval/rl_000040_"$split" | paste -sd,)
    args+=("RL $arm:$split=$runs")
  done
done
python experiments/natural_table.py "${args[@]}" --json "$out"
