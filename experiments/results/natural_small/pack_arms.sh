#!/bin/bash
# Packs the small files of a natural_small ablation's finished arm runs into arms.tar.gz
# here: each run's metrics.jsonl (the ablation skips a run whose last RL step is logged)
# and its evaluations' summary / evaluations / responses / sampled files, with
# wall_times.json. With sft_resume.tar.gz it resumes the ablation on another machine:
# `tar xzf sft_resume.tar.gz -C DIR; tar xzf arms.tar.gz -C DIR`, then the command.
#   bash pack_arms.sh DIR RUN ...       e.g. bash pack_arms.sh /root/natural seed_0/grpo
set -euo pipefail
dir=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
files=(wall_times.json)
for run in "$@"; do
  while IFS= read -r f; do files+=("${f#"$dir"/}"); done < <(
    find "$dir/$run" \( -name metrics.jsonl -o -name job_config.json -o \
      \( -path '*/eval/*' \( -name summary.json -o -name evaluations.jsonl -o \
      -name responses.jsonl -o -name sampled.jsonl \) \) \) | sort)
done
tar czf "$here/arms.tar.gz" -C "$dir" "${files[@]}"
echo "$here/arms.tar.gz: $# runs, ${#files[@]} files, $(du -h "$here/arms.tar.gz" | cut -f1)"
