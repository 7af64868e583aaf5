"""Shared pytest set-up: JAX on CPU, quiet logs, one persistent compilation cache.

The cache (`.cache/jax_tests/` in the checkout, or `$RCCA_TEST_JAX_CACHE`) is shared by
the test processes, the pytest-xdist workers and the subprocesses tests start (they
inherit the environment): the same small programs, compiled by many tests, compile once.

The suite is bound by XLA compile time (tiny models, few steps), so XLA:CPU builds fast
rather than fast code: its LLVM back end runs unoptimised
(`--xla_backend_optimization_level=0`) and fusions are emitted by the older elemental
emitters instead of the MLIR fusion emitters (`--xla_cpu_use_fusion_emitters=false`).
Together they compile a train step in about a quarter of the default's CPU time for
about 3.3x slower execution (`benchmarks/compile_time.py`). HLO-level passes (fusion,
layouts) are unchanged; results agree with the default build to float32 rounding (2.1e-6
at most on that step's updated weights), not bit for bit; a test's bit-for-bit
comparisons are between programs built the same way. Tests that start their
own JAX processes keep the flags by appending to `XLA_FLAGS`.
"""

import os
import pathlib

_CACHE = os.environ.get("RCCA_TEST_JAX_CACHE",
                        str(pathlib.Path(__file__).resolve().parents[1] / ".cache" / "jax_tests"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
FAST_COMPILE = {"xla_backend_optimization_level": "0", "xla_cpu_use_fusion_emitters": "false"}
for _flag, _value in FAST_COMPILE.items():
  if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{_flag}={_value}".strip()

# absltest's create_tempdir/create_tempfile read absl flags, which pytest never parses.
from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()

# The modules that take longest (wall, measured on 2 cores), longest first. pytest-xdist
# hands out whole modules in collection order (`--dist loadfile --no-loadscope-reorder`,
# Makefile), so starting these first keeps one worker from finishing a long module alone
# at the end. Only the order changes; other modules follow in their usual order.
LONGEST_MODULES = (
    "test_model_sharding.py", "test_main_e2e.py", "test_model_parity.py",
    "test_train_step.py", "test_grading_cache.py", "test_kda.py", "test_bench.py",
    "test_browser_session.py", "test_llama_parity.py", "test_checkpoint.py",
    "test_sampling.py", "test_families.py", "test_hostile_apps.py", "test_moe.py",
    "test_mla.py", "test_notebooks.py", "test_evaluator.py", "test_pool.py",
    "test_rubric_runner.py", "test_controlled.py", "test_judge.py", "test_batch_updates.py",
    "test_flash_attention.py")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable
