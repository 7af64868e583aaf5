#!/bin/bash
# The sign arms on the natural setting, 3 seeds (seed-major), resumable.
# Usage: run_signs.sh WORKTREE_OF_622fb00 DIR [ARMS]; DIR holds the unpacked
# experiments/results/natural_v2/study/runs.tar.gz.
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$1"
python -m rcca_jax.study --config="$HERE/natural_v2_signs.py:rl" --workdir="$2" --seeds=3 \
  --only_arms="${3:-grpo_neg_only,grpo_neg0,w_reinforce}"
