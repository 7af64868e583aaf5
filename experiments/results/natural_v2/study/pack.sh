#!/bin/bash
# Packs the small files of issue 54's study into runs.tar.gz here: the shared post-SFT
# evaluation and every finished run (its last evaluation written): metrics.jsonl, each
# evaluation's summary.json (with each request's share of passing samples at RL's start
# and end) and the greedy responses and records of the first and last, and the wall
# times. The summary and report are rebuilt from them (README), and the study resumes
# on another machine from them: `tar xzf runs.tar.gz -C DIR`, then the study's command
# (finished runs are skipped).
#   bash pack.sh DIR [STEPS]      e.g. bash pack.sh /root/nv2/study1 200
set -euo pipefail
dir=$1
last=$(printf "rl_%06d" "${2:-200}")
here=$(cd "$(dirname "$0")" && pwd)
files=(wall_times.json seed_0/sft/metrics.jsonl)
for f in summary.json evaluations.jsonl responses.jsonl; do
  files+=("seed_0/sft/eval/sft_000000/$f")
done
for run in "$dir"/seed_*/*/; do
  run=${run%/}
  [ -f "$run/eval/$last/summary.json" ] || continue
  rel=${run#"$dir"/}
  files+=("$rel/metrics.jsonl")
  while IFS= read -r f; do files+=("${f#"$dir"/}"); done < <(
    find "$run/eval" -name summary.json | sort)
  for f in evaluations.jsonl responses.jsonl; do files+=("$rel/eval/$last/$f"); done
done
tar czf "$here/runs.tar.gz" -C "$dir" "${files[@]}"
echo "$here/runs.tar.gz: ${#files[@]} files, $(du -h "$here/runs.tar.gz" | cut -f1)"
