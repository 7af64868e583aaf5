"""Shared pytest set-up: JAX on CPU, quiet logs, one persistent compilation cache.

The cache (`.cache/jax_tests/` in the checkout, or `$RCCA_TEST_JAX_CACHE`) is shared by
the test processes, the pytest-xdist workers and the subprocesses tests start (they
inherit the environment): the same small programs, compiled by many tests, compile once.
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

# absltest's create_tempdir/create_tempfile read absl flags, which pytest never parses.
from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
