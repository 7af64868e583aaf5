"""Alias kept for one release; use `python -m rcca_jax.study` (the same flags, outputs
and exit status) and `rcca_jax.study.__main__`."""

from absl import app

from rcca_jax.base import host_allocator

from rcca_jax.study.__main__ import *  # pylint: disable=wildcard-import,unused-wildcard-import
from rcca_jax.study.__main__ import define_flags, main

if __name__ == "__main__":
  host_allocator.preload_tcmalloc()
  define_flags()
  app.run(main)
