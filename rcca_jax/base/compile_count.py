"""XLA compilations of this process, counted: how many and how many seconds.

JAX reports every backend compile to its monitoring listeners
(`/jax/core/compile/backend_compile_duration`, one event a compiled program, cache
misses only). The first `snapshot()` registers one listener for the process; `since`
gives what was compiled after a snapshot, by any thread of the process. The RL rows
carry it as `compiles` and `compile_s`, which tell a step that compiled a new shape (a
decode bucket, an update width) from a steady one.
"""

from __future__ import annotations

import threading

import jax

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

_lock = threading.Lock()
_totals = {"compiles": 0, "compile_s": 0.0}
_registered = False


def _listen(event: str, duration: float, **_) -> None:
  if event == BACKEND_COMPILE:
    with _lock:
      _totals["compiles"] += 1
      _totals["compile_s"] += duration


def snapshot() -> dict[str, float]:
  """This process's compiles and compile seconds so far (counting from the first
  call: the listener is registered then)."""
  global _registered
  with _lock:
    if not _registered:
      jax.monitoring.register_event_duration_secs_listener(_listen)
      _registered = True
    return dict(_totals)


def since(start: dict[str, float]) -> dict[str, float]:
  """Compiles and compile seconds since `start` (a `snapshot()`)."""
  now = snapshot()
  return {"compiles": float(now["compiles"] - start["compiles"]),
          "compile_s": now["compile_s"] - start["compile_s"]}
