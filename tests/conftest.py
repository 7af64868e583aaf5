"""Shared pytest set-up: JAX on CPU, quiet logs."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# absltest's create_tempdir/create_tempfile read absl flags, which pytest never parses.
from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
