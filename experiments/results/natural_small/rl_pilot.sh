#!/bin/bash
# GRPO from a finished natural_small:longer_sft SFT at learning rate LR: 40 RL steps of
# 2 prompts x 8 samples, greedy dev every 10 steps, then one dev evaluation with 4 samples
# per request. The SFT directory is copied, never changed.
#   bash rl_pilot.sh SFT_DIR OUT_DIR LR      (run from the repository root)
set -euo pipefail
sft=$1 out=$2 lr=$3
[ -d "$out" ] || cp -a "$sft" "$out"
args=(--config=experiments/natural_small.py:longer_sft --workdir="$out"
      --config.rl.num_steps=40 --config.rl.policy_loss=grpo
      --config.rl.optimizer.learning_rate="$lr")
echo "start $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) lr $lr" >> "$out/restarts.log"
python -m rcca_jax.main "${args[@]}" --config.eval.samples_per_request=0 \
  --allow_config_change='sft.optimizer.total_steps,eval.*,rl.policy_loss,rl.optimizer.learning_rate'
python -m rcca_jax.main "${args[@]}" --mode=eval --checkpoint=rl
echo "done $(date -u +%FT%TZ) lr $lr" >> "$out/restarts.log"
