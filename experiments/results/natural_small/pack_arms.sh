#!/bin/bash
# Packs the small files of a natural_small ablation's finished arm runs into arms.tar.gz
# here: each run's metrics.jsonl (the ablation skips a run whose last RL step is logged)
# and its evaluations' summary / evaluations / responses / sampled files, with
# wall_times.json. With sft_resume.tar.gz it resumes the ablation on another machine:
# `tar xzf sft_resume.tar.gz -C DIR; tar xzf arms.tar.gz -C DIR`, then the command.
#   bash pack_arms.sh [-o NAME] DIR RUN ...   e.g. bash pack_arms.sh /root/natural seed_0/grpo
#   (NAME: the archive, default arms.tar.gz)
set -euo pipefail
name=arms.tar.gz
if [ "$1" = -o ]; then name=$2; shift 2; fi
dir=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
files=(wall_times.json)
for run in "$@"; do
  while IFS= read -r f; do files+=("${f#"$dir"/}"); done < <(
    find "$dir/$run" \( -name metrics.jsonl -o -name job_config.json -o \
      \( -path '*/eval/*' \( -name summary.json -o -name evaluations.jsonl -o \
      -name responses.jsonl -o -name sampled.jsonl \) \) \) | sort)
done
tar czf "$here/$name" -C "$dir" "${files[@]}"
echo "$here/$name: $# runs, ${#files[@]} files, $(du -h "$here/$name" | cut -f1)"
