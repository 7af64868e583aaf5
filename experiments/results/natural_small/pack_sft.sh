#!/bin/bash
# Packs the shared SFT of a natural_small ablation into sft_resume.tar.gz here, so that the
# run resumes on another machine: the SFT's newest checkpoint (parameters and optimizer
# state), its metrics, dev evaluations, job config and fresh dev requests, restarts.log and
# (once the SFT has finished) wall_times.json.
#   bash pack_sft.sh DIR [NAME]  (DIR: the ablation's --workdir; stop the run first;
#                                NAME: the archive, default sft_resume.tar.gz)
#   tar xzf NAME -C DIR, then the ablation's command resumes the SFT.
set -euo pipefail
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
out=$here/${2:-sft_resume.tar.gz}
sft=seed_0/sft
step=$(ls "$dir/$sft/checkpoints/sft" | grep -E '^[0-9]+$' | sort -n | tail -1)
walls=$(cd "$dir" && ls wall_times.json 2>/dev/null || true)
# Left out: best/ (keep-best's copy of the final SFT state; the RL arms start from sft/)
# and the --mode=eval directories (*_dev, *_test) written after the SFT.
tar czf "$out" -C "$dir" --exclude="$sft/checkpoints/best/*" \
  --exclude="$sft/eval/*_dev" --exclude="$sft/eval/*_test" restarts.log $walls "$sft/metrics.jsonl" \
  "$sft/job_config.json" "$sft/fresh_dev_tasks.jsonl" "$sft/eval" \
  "$sft/checkpoints/sft/$step" "$sft/checkpoints/best" "$sft/checkpoints/rl"
echo "$out: SFT step $step, $(du -h "$out" | cut -f1)"
