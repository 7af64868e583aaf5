#!/bin/bash
# The sign arms on the natural setting, 3 seeds (seed-major), resumable.
cd /root/nv2/wt_622fb00
JAX_COMPILATION_CACHE_DIR=/root/nv2/jax_cache /work/main/.venv/bin/python -m rcca_jax.study \
  --config=/root/nv2/natural_v2_signs.py:rl --workdir=/root/nv2/study --seeds=3 \
  --only_arms=${1:-grpo_neg_only,grpo_neg0,w_reinforce}
