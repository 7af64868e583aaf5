#!/bin/bash
# Packs the small files of a study's finished seeds (every arm done) into runs.tar.gz here:
# each run's metrics.jsonl and its evaluations' summary / evaluations / responses, the
# settings' task files and wall times. The summaries and tables can be rebuilt from them
# (`python -m rcca_jax.ablation ... --report_only`), and a study resumes on another machine
# from them: `tar xzf runs.tar.gz -C DIR`, then the study's command (finished seeds are
# skipped; a seed not in the archive is trained from its SFT on).
#   bash pack.sh DIR SETTING:SEEDS ...     e.g. bash pack.sh /root/credit_study2 s1_0:0,1
set -euo pipefail
dir=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
files=()
walls=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for spec in "$@"; do
  setting=${spec%%:*}
  files+=("$setting/controlled_tasks.jsonl")
  IFS=, read -ra seeds <<< "${spec#*:}"
  mkdir -p "$tmp/$setting"  # the wall times of the packed seeds only
  python3 -c 'import json, sys; w = json.load(open(sys.argv[1])); keep = sys.argv[2].split(",")
json.dump({k: v for k, v in w.items() if k.split("/")[0][len("seed_"):] in keep},
          sys.stdout, indent=1)' "$dir/$setting/wall_times.json" "${spec#*:}" \
    > "$tmp/$setting/wall_times.json"
  walls+=("$setting/wall_times.json")
  for seed in "${seeds[@]}"; do
    while IFS= read -r f; do files+=("${f#"$dir"/}"); done < <(
      find "$dir/$setting/seed_$seed" \( -name metrics.jsonl -o -name diverged.json -o \
        -name rebuilt.json -o \
        \( -path '*/eval/*' \( -name summary.json -o -name evaluations.jsonl -o \
        -name responses.jsonl \) \) \) | sort)
  done
done
tar czf "$here/runs.tar.gz" -C "$dir" "${files[@]}" -C "$tmp" "${walls[@]}"
echo "$here/runs.tar.gz: ${#files[@]} files, $(du -h "$here/runs.tar.gz" | cut -f1)"
