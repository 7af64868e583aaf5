"""The host allocator: XLA's CPU buffers from tcmalloc rather than glibc's malloc (opt-in).

XLA's CPU runtime takes every step's temporaries (hundreds of MB: activations, logits,
their gradients) from `malloc` and frees them at the step's end. glibc serves a request
that large from a fresh `mmap` (XLA's worker threads allocate in glibc's per-thread
arenas, which fall back to `mmap` for anything above their 64 MB heaps whatever the
`M_MMAP_MAX` setting) and unmaps it on `free`, so the next step page-faults the same
memory in again, zero-filled by the kernel, 4 KB at a time: about a fifth of a training
step's CPU time goes to the kernel that way (docs/performance.md, "The host allocator").
tcmalloc keeps freed memory for reuse, so steady-state steps make few page faults and
training steps run 1.2-1.3x faster, with the same arithmetic.

It is opt-in (`RCCA_ALLOCATOR=tcmalloc`): on a job whose buffers change shape from step
to step (the long-setting instrument: sampling, then updates and scoring at many
lengths) tcmalloc's heap kept growing, 17-21 GB where glibc's peaked at 10-12 GB on a
24 GB machine, at every release rate tried. An allocator is chosen before the process
starts (`LD_PRELOAD`), so `preload_tcmalloc` re-executes the process once with tcmalloc
preloaded when asked to and the library is installed (`make install` installs Debian's
`libtcmalloc-minimal4` when it can); child processes (the evaluator's Chromium, workers
started afresh) get the environment without the preload.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from typing import Optional, Sequence

ENV = "RCCA_ALLOCATOR"  # "tcmalloc": preload it; anything else (the default): glibc's
_MARK = "RCCA_ALLOCATOR_PRELOADED"  # set for the re-executed process only
_LIBRARY = "tcmalloc_minimal"


def find_tcmalloc() -> Optional[str]:
  """The tcmalloc library's file name as the dynamic linker finds it, or None."""
  return ctypes.util.find_library(_LIBRARY)


def tcmalloc_loaded() -> bool:
  """Whether this process runs with tcmalloc (its library mapped)."""
  try:
    with open("/proc/self/maps", encoding="utf-8") as f:
      return any(_LIBRARY in line for line in f)
  except OSError:
    return False


def _without_preload(value: str, library: str) -> str:
  return " ".join(p for p in value.split() if p != library)


def preload_tcmalloc(argv: Optional[Sequence[str]] = None) -> None:
  """With `RCCA_ALLOCATOR=tcmalloc`, re-executes this process with tcmalloc preloaded,
  once; returns without doing anything when it is loaded already (then the preload is
  taken out of the environment that child processes inherit), without that setting,
  when the library is not installed, or on a platform without `/proc` (not Linux).
  Call it first thing in an entry point, before any work. `argv`: the command line to
  run again (default: this process's own, `sys.orig_argv`)."""
  if os.environ.get(ENV) != "tcmalloc":  # before the library search (an `ldconfig` run)
    return
  library = os.environ.get(_MARK) or find_tcmalloc()
  if library is None:
    return
  if os.environ.get(_MARK):  # the re-executed process: children run without it
    os.environ["LD_PRELOAD"] = _without_preload(os.environ.get("LD_PRELOAD", ""), library)
    if not os.environ["LD_PRELOAD"]:
      del os.environ["LD_PRELOAD"]
    del os.environ[_MARK]
    return
  if tcmalloc_loaded() or not os.path.exists("/proc/self/maps"):
    return
  env = dict(os.environ, LD_PRELOAD=" ".join(
      p for p in (library, os.environ.get("LD_PRELOAD", "")) if p))
  env[_MARK] = library
  command = list(argv or sys.orig_argv)
  sys.stdout.flush()
  sys.stderr.flush()
  os.execve(sys.executable, command, env)
