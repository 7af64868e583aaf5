"""Where a hung script loops, read over the DevTools protocol before it is terminated.

A busy isolate answers only a few protocol commands (Chromium interrupts V8 for them):
`Debugger.pause` is one, `Debugger.enable` and `Profiler.stop` are not. So pausing needs
the Debugger domain on before the app runs; with breakpoints deactivated it never stops
the app by itself (`debugger;` statements included).
- `replay` (default): nothing runs while apps behave. After a hang was terminated, the
  evaluator loads the app again with the Debugger on and replays what hung under a short
  deadline (`PageSession.replay_hang`); when that deadline passes, the Debugger pauses
  the busy isolate and the paused call frames say where it loops.
- `debugger`: the Debugger on for the whole context; a hang is paused at its deadline.
- `profiler`: the sampling profiler restarted at every load; on a hang, terminate first,
  then stop the profiler and take the hottest app line.
benchmarks/hang_locator.py measures what each costs on loads that do not hang.
Frames have the shape of exception frames: function, url, 0-based line and column of the
document.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

_ANSWER_TIMEOUT = 0.5
_SAMPLING_US = 500


class HangLocator:
  """No location (`hang_locator="none"`)."""

  def __init__(self, cdp: Any):
    self.cdp = cdp
    self.script_urls: dict[str, str] | None = None   # scriptId -> URL, when tracked

  def setup(self) -> list:
    """Protocol calls to send with the context's own set-up."""
    return []

  async def on_load(self) -> None:
    """Before each navigation."""

  async def before_terminate(self) -> list[dict[str, Any]]:
    """While the script is still running."""
    return []

  async def after_terminate(self) -> list[dict[str, Any]]:
    """Once the script was terminated."""
    return []


class DebuggerLocator(HangLocator):
  """Pauses the busy isolate and reads its call frames."""

  def __init__(self, cdp: Any):
    super().__init__(cdp)
    self.script_urls = {}
    self._paused: asyncio.Future | None = None
    cdp.on("Debugger.scriptParsed",
           lambda e: self.script_urls.__setitem__(e["scriptId"], e.get("url", "")))
    cdp.on("Debugger.paused", self._on_paused)

  def setup(self) -> list:
    return [self.cdp.send("Debugger.enable"),
            self.cdp.send("Debugger.setBreakpointsActive", {"active": False})]

  async def stop(self) -> None:
    await asyncio.wait_for(self.cdp.send("Debugger.disable"), _ANSWER_TIMEOUT)
    self.script_urls.clear()

  def _on_paused(self, event: dict) -> None:
    if self._paused is not None and not self._paused.done():
      self._paused.set_result(event)
    else:                                   # not ours to hold: let the app go on
      asyncio.ensure_future(self.cdp.send("Debugger.resume"))

  async def before_terminate(self) -> list[dict[str, Any]]:
    self._paused = asyncio.get_running_loop().create_future()
    try:
      await asyncio.wait_for(self.cdp.send("Debugger.pause"), _ANSWER_TIMEOUT)
      event = await asyncio.wait_for(self._paused, _ANSWER_TIMEOUT)
    except Exception:  # pylint: disable=broad-except
      return []
    finally:
      self._paused = None
    frames = [{"function": f.get("functionName", ""),
               "url": self.script_urls.get(f["location"]["scriptId"], ""),
               "line": int(f["location"]["lineNumber"]),
               "column": int(f["location"].get("columnNumber", 0))}
              for f in event.get("callFrames", [])]
    try:
      await asyncio.wait_for(self.cdp.send("Debugger.resume"), _ANSWER_TIMEOUT)
    except Exception:  # pylint: disable=broad-except
      pass
    return frames


class ProfilerLocator(HangLocator):
  """Samples every load; the hottest app line of a hung script is where it loops."""

  def setup(self) -> list:
    return [self.cdp.send("Profiler.enable"),
            self.cdp.send("Profiler.setSamplingInterval", {"interval": _SAMPLING_US})]

  async def on_load(self) -> None:
    try:
      await self.cdp.send("Profiler.stop")
    except Exception:  # pylint: disable=broad-except
      pass                                    # not started yet
    await self.cdp.send("Profiler.start")

  async def after_terminate(self) -> list[dict[str, Any]]:
    try:
      res = await asyncio.wait_for(self.cdp.send("Profiler.stop"), _ANSWER_TIMEOUT)
      await asyncio.wait_for(self.cdp.send("Profiler.start"), _ANSWER_TIMEOUT)
    except Exception:  # pylint: disable=broad-except
      return []
    profile = res.get("profile", {})
    nodes = {n["id"]: n for n in profile.get("nodes", [])}
    counts = collections.Counter(profile.get("samples", []))
    for node_id, _ in counts.most_common():
      node = nodes.get(node_id, {})
      frame = node.get("callFrame", {})
      if not frame.get("url"):
        continue                              # (program), (idle), native code
      ticks = node.get("positionTicks") or []
      if ticks:
        line = max(ticks, key=lambda t: t["ticks"])["line"] - 1
        column = 0
      else:
        line, column = int(frame.get("lineNumber", 0)), int(frame.get("columnNumber", 0))
      return [{"function": frame.get("functionName", ""), "url": frame["url"],
               "line": line, "column": column}]
    return []


class ReplayLocator(HangLocator):
  """Nothing while apps behave; `debugger` is switched on to replay a hang."""

  def __init__(self, cdp: Any):
    super().__init__(cdp)
    self.debugger = DebuggerLocator(cdp)


def make(kind: str, cdp: Any) -> HangLocator:
  return {"replay": ReplayLocator, "debugger": DebuggerLocator, "profiler": ProfilerLocator,
          "none": HangLocator}[kind](cdp)
