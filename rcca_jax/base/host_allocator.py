"""The host allocator: XLA's CPU buffers from tcmalloc rather than glibc's malloc.

XLA's CPU runtime takes every step's temporaries (hundreds of MB: activations, logits,
their gradients) from `malloc` and frees them at the step's end. glibc serves a request
that large from a fresh `mmap` (XLA's worker threads allocate in glibc's per-thread
arenas, which fall back to `mmap` for anything above their 64 MB heaps whatever the
`M_MMAP_MAX` setting) and unmaps it on `free`, so the next step page-faults the same
memory in again, zero-filled by the kernel, 4 KB at a time: about a fifth of a training
step's CPU time goes to the kernel that way (docs/performance.md, "The host allocator").
tcmalloc keeps freed memory for reuse, so steady-state steps make few page faults and
training steps run 1.2-1.3x faster, with the same arithmetic.

An allocator is chosen before the process starts (`LD_PRELOAD`), so `preload_tcmalloc`
re-executes the process once with tcmalloc preloaded when the library is installed
(`make install` installs Debian's `libtcmalloc-minimal4` when it can) and
`RCCA_ALLOCATOR` is not `system`; child processes (the evaluator's Chromium, workers
started afresh) get the environment without the preload. tcmalloc runs at release
rate 0 (it keeps what a job frees) and a thread hands its free memory back while the
machine has less than a quarter of its memory available (`keep_reserve`): without
that, a job whose buffers change shape from step to step grew to 17-21 GB of a 24 GB
machine, where glibc's peaked at 10-12.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import time
from typing import Callable, Optional, Sequence

ENV = "RCCA_ALLOCATOR"  # "system": glibc's malloc; else (the default) tcmalloc if installed
_MARK = "RCCA_ALLOCATOR_PRELOADED"  # set for the re-executed process only
_LIBRARY = "tcmalloc_minimal"
RESERVE_ENV = "RCCA_ALLOCATOR_RESERVE_MB"  # memory kept available (default below)
_RESERVE_SHARE = 4  # default reserve: a quarter of the machine's memory
_POLL_S = 0.1


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
  """Re-executes this process with tcmalloc preloaded, once; returns without doing
  anything when it is loaded already (then the preload is taken out of the environment
  that child processes inherit, and `keep_reserve` starts), with `RCCA_ALLOCATOR=system`,
  when the library is not installed, or on a platform without `/proc` (not Linux).
  Call it first thing in an entry point, before any work. `argv`: the command line to
  run again (default: this process's own, `sys.orig_argv`)."""
  if os.environ.get(ENV) == "system":  # before the library search (an `ldconfig` run)
    return
  library = os.environ.get(_MARK) or find_tcmalloc()
  if library is None:
    return
  if os.environ.get(_MARK):  # the re-executed process: children run without it
    os.environ["LD_PRELOAD"] = _without_preload(os.environ.get("LD_PRELOAD", ""), library)
    if not os.environ["LD_PRELOAD"]:
      del os.environ["LD_PRELOAD"]
    del os.environ[_MARK]
    keep_reserve(reserve_bytes())
    return
  if tcmalloc_loaded() or not os.path.exists("/proc/self/maps"):
    return
  env = dict(os.environ, LD_PRELOAD=" ".join(
      p for p in (library, os.environ.get("LD_PRELOAD", "")) if p))
  env[_MARK] = library
  env.setdefault("TCMALLOC_RELEASE_RATE", "0")  # keep_reserve does the releasing
  command = list(argv or sys.orig_argv)
  sys.stdout.flush()
  sys.stderr.flush()
  os.execve(sys.executable, command, env)


def reserve_bytes() -> int:
  """The memory the machine keeps available before tcmalloc gives back what it holds
  free: `RCCA_ALLOCATOR_RESERVE_MB`, else a quarter of the physical memory."""
  if os.environ.get(RESERVE_ENV):
    return int(os.environ[RESERVE_ENV]) << 20
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _RESERVE_SHARE


def available_bytes() -> int:
  """The machine's available memory (`MemAvailable` of /proc/meminfo)."""
  with open("/proc/meminfo", encoding="ascii") as f:
    for line in f:
      if line.startswith("MemAvailable:"):
        return int(line.split()[1]) << 10
  raise OSError("/proc/meminfo has no MemAvailable line")


def _tcmalloc_api() -> tuple[Callable[[], int], Callable[[int], None]]:
  """(free bytes in tcmalloc's page heap, release at least N bytes) from the loaded
  library's C API."""
  lib = ctypes.CDLL(None)
  get = lib.MallocExtension_GetNumericProperty
  get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
  get.restype = ctypes.c_int
  release = lib.MallocExtension_ReleaseToSystem
  release.argtypes = [ctypes.c_size_t]
  release.restype = None

  def free_bytes() -> int:
    value = ctypes.c_size_t(0)
    get(b"tcmalloc.pageheap_free_bytes", ctypes.byref(value))
    return value.value

  return free_bytes, release


def keep_reserve(reserve: int, poll_s: float = _POLL_S) -> threading.Thread:
  """Starts a daemon thread that, every `poll_s` seconds, hands tcmalloc's free pages
  back to the system while the machine has less than `reserve` bytes available (what
  is missing and a quarter of the reserve more, or all it holds free). At release
  rate 0 tcmalloc keeps every span a job frees; a job whose buffers change shape from
  step to step then grows (17-21 GB of a 24 GB machine where glibc's peaked at 10-12),
  while one of steady shapes keeps reusing its buffers."""
  free_bytes, release = _tcmalloc_api()

  def run() -> None:
    while True:
      time.sleep(poll_s)
      missing = reserve - available_bytes()
      if missing > 0:
        release(min(free_bytes(), missing + reserve // 4))

  thread = threading.Thread(target=run, name="tcmalloc-reserve", daemon=True)
  thread.start()
  return thread
