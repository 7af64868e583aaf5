"""Chromium driven over its DevTools pipe, with no driver process in between.

`launch()` starts Chromium with `--remote-debugging-pipe`: its file descriptors 3 and 4
carry NUL-terminated JSON messages of the DevTools protocol (CDP). A `Connection`
multiplexes the browser's own session and the flat sessions of attached targets
(`sessionId`); a `Session` sends commands and hands events to its listeners. Nothing is
tracked that a caller did not ask for, so each message costs one JSON parse here.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import itertools
import json
import logging
import os
import shutil
import signal
import tempfile
import time
from typing import Any, Callable

_STDERR_TAIL = 4096   # bytes of Chromium's stderr kept for a launch error


class ProtocolError(RuntimeError):
  """Chromium answered a command with an error."""


class Disconnected(RuntimeError):
  """The browser, or the target a session belongs to, went away."""


def ignore_result(future: asyncio.Future) -> None:
  """For commands nobody awaits: retrieves the outcome so a failure is not reported."""
  if not future.cancelled():
    future.exception()


class Session:
  """One CDP session (the browser's when `session_id` is None)."""

  def __init__(self, connection: Connection, session_id: str | None):
    self.connection = connection
    self.session_id = session_id
    self._listeners: dict[str, list[Callable[[dict], Any]]] = collections.defaultdict(list)

  def send(self, method: str, params: dict | None = None) -> asyncio.Future:
    """Sends a command; the future resolves to its result (or raises `ProtocolError`)."""
    return self.connection.send(method, params, self.session_id)

  def on(self, event: str, handler: Callable[[dict], Any]) -> None:
    """Calls `handler(params)` on each `event`; a coroutine it returns is scheduled."""
    self._listeners[event].append(handler)

  def remove_listener(self, event: str, handler: Callable[[dict], Any]) -> None:
    if handler in self._listeners.get(event, ()):
      self._listeners[event].remove(handler)

  def dispatch(self, method: str, params: dict) -> None:
    """Hands an event to this session's listeners."""
    for handler in list(self._listeners.get(method, ())):
      try:
        result = handler(params)
      except Exception:  # pylint: disable=broad-except
        # A listener's bug must not stop the messages after it (or the connection).
        logging.exception("CDP listener for %s failed", method)
        continue
      if asyncio.iscoroutine(result):
        asyncio.ensure_future(result)


class Connection(asyncio.Protocol):
  """The pipe to one Chromium process and the sessions multiplexed over it."""

  def __init__(self, process: _Process, user_data_dir: str):
    self.process = process
    self.user_data_dir = user_data_dir
    self.browser = Session(self, None)
    self.closed = False
    self._sessions: dict[str, Session] = {}
    self._pending: dict[int, tuple[asyncio.Future, str, str | None]] = {}
    self._ids = itertools.count(1)
    self._buffer = bytearray()
    self._writer: asyncio.WriteTransport | None = None
    self._reader: asyncio.ReadTransport | None = None
    self._stderr: asyncio.ReadTransport | None = None
    self._on_close: list[Callable[[], None]] = []
    self.stderr_tail = bytearray()

  # -- sessions ----------------------------------------------------------------------
  def session(self, session_id: str) -> Session:
    """The session of an attached target (created on first use)."""
    if session_id not in self._sessions:
      self._sessions[session_id] = Session(self, session_id)
    return self._sessions[session_id]

  def on_close(self, callback: Callable[[], None]) -> None:
    self._on_close.append(callback)

  def send(self, method: str, params: dict | None, session_id: str | None) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    if self.closed or self._writer is None or self._writer.is_closing():
      future.set_exception(Disconnected(f"{method}: the browser is gone"))
      return future
    ident = next(self._ids)
    message: dict[str, Any] = {"id": ident, "method": method}
    if params:
      message["params"] = params
    if session_id is not None:
      message["sessionId"] = session_id
    self._pending[ident] = (future, method, session_id)
    self._writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\0")
    return future

  # -- asyncio.Protocol (the read end) -----------------------------------------------
  def data_received(self, data: bytes) -> None:
    self._buffer += data
    start = 0
    while (end := self._buffer.find(b"\0", start)) >= 0:
      message = json.loads(self._buffer[start:end])
      start = end + 1
      self._handle(message)
    del self._buffer[:start]

  def connection_lost(self, exc: Exception | None) -> None:
    self._lost()

  def _handle(self, message: dict) -> None:
    ident = message.get("id")
    if ident is not None:
      future, method, _ = self._pending.pop(ident, (None, "", None))
      if future is None or future.done():
        return
      if "error" in message:
        error = message["error"]
        future.set_exception(ProtocolError(f"{method}: {error.get('message', error)}"))
      else:
        future.set_result(message.get("result", {}))
      return
    method, params = message.get("method", ""), message.get("params", {})
    session_id = message.get("sessionId")
    session = self.browser if session_id is None else self._sessions.get(session_id)
    if method == "Target.detachedFromTarget" and "sessionId" in params:
      self._detached(params["sessionId"])
    if session is not None:
      session.dispatch(method, params)

  def _detached(self, session_id: str) -> None:
    self._sessions.pop(session_id, None)
    self.fail_pending(session_id, "the target was closed")

  def fail_pending(self, session_id: str, why: str) -> None:
    """Fails the commands of `session_id` still waiting for an answer (`Disconnected`)."""
    for ident, (future, method, owner) in list(self._pending.items()):
      if owner == session_id:
        del self._pending[ident]
        if not future.done():
          future.set_exception(Disconnected(f"{method}: {why}"))

  def _lost(self) -> None:
    if self.closed:
      return
    self.closed = True
    pending, self._pending = self._pending, {}
    for future, method, _ in pending.values():
      if not future.done():
        future.set_exception(Disconnected(f"{method}: the browser is gone"))
    for callback in self._on_close:
      callback()

  # -- process -----------------------------------------------------------------------
  async def close(self, timeout: float) -> None:
    """Asks Chromium to exit, kills it after `timeout` s, removes its profile."""
    if not self.closed:
      try:
        await asyncio.wait_for(self.browser.send("Browser.close"), timeout)
      except Exception:  # pylint: disable=broad-except
        pass
    deadline = asyncio.get_running_loop().time() + timeout
    while self.process.poll() is None and asyncio.get_running_loop().time() < deadline:
      await asyncio.sleep(0.02)
    self.kill()
    self._lost()
    shutil.rmtree(self.user_data_dir, ignore_errors=True)

  def kill(self) -> None:
    """Kills Chromium's whole process group (renderers, zygotes, GPU process) now."""
    for transport in (self._writer, self._reader, self._stderr):
      if transport is not None:
        transport.close()
    if self.process.poll() is None:
      try:
        os.killpg(self.process.pid, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass
    self.process.wait(1.0)


class _StderrTail(asyncio.Protocol):
  def __init__(self, connection: Connection):
    self.connection = connection

  def data_received(self, data: bytes) -> None:
    tail = self.connection.stderr_tail
    tail += data
    del tail[:-_STDERR_TAIL]


class _Process:
  """A child started by `posix_spawn`: its pid, `poll()` and a bounded `wait()`."""

  def __init__(self, pid: int):
    self.pid = pid
    self.returncode: int | None = None

  def poll(self) -> int | None:
    if self.returncode is None:
      try:
        pid, status = os.waitpid(self.pid, os.WNOHANG)
      except ChildProcessError:
        self.returncode = -1
        return self.returncode
      if pid:
        self.returncode = os.waitstatus_to_exitcode(status)
    return self.returncode

  def wait(self, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while self.poll() is None and time.monotonic() < deadline:
      time.sleep(0.01)
    return self.returncode


# What Chromium may see of this process's environment: where it runs, its locale, fonts
# and display; never the rest (a judge API key, cloud credentials, ...).
BROWSER_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "DISPLAY",
               "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
               "FONTCONFIG_FILE", "FONTCONFIG_PATH", "LD_LIBRARY_PATH")


def browser_env(environ: dict[str, str] | None = None) -> dict[str, str]:
  """The part of `environ` (default: this process's) that Chromium is started with."""
  environ = os.environ if environ is None else environ
  return {k: v for k, v in environ.items() if k in BROWSER_ENV or k.startswith("LC_")}


def _spawn(command: list[str], to_chrome: int, from_chrome: int, stderr: int) -> _Process:
  """Starts `command` in a new session with `to_chrome` as fd 3, `from_chrome` as fd 4 and
  `stderr` as fd 2 (each first moved to fd >= 10 so that no move clobbers another)."""
  high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome, from_chrome, stderr)]
  try:
    null = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1),
               (os.POSIX_SPAWN_DUP2, high[2], 2), (os.POSIX_SPAWN_DUP2, high[0], 3),
               (os.POSIX_SPAWN_DUP2, high[1], 4)]
    try:
      pid = os.posix_spawn(command[0], command, browser_env(), file_actions=actions,
                           setsid=True)
    finally:
      os.close(null)
  finally:
    for fd in high:
      os.close(fd)
  return _Process(pid)


async def launch(executable: str, args: list[str], timeout: float) -> Connection:
  """Starts Chromium (its own session and process group, a fresh profile, the minimal
  environment `browser_env`) and connects to it."""
  user_data_dir = tempfile.mkdtemp(prefix="rcca-chromium-")
  to_chrome_r, to_chrome_w = os.pipe()
  from_chrome_r, from_chrome_w = os.pipe()
  err_r, err_w = os.pipe()
  command = [executable, *args, f"--user-data-dir={user_data_dir}",
             "--remote-debugging-pipe", "--no-startup-window"]
  try:
    process = _spawn(command, to_chrome_r, from_chrome_w, err_w)
  except OSError:
    for fd in (to_chrome_w, from_chrome_r, err_r):
      os.close(fd)
    shutil.rmtree(user_data_dir, ignore_errors=True)
    raise
  finally:
    for fd in (to_chrome_r, from_chrome_w, err_w):
      os.close(fd)
  connection = Connection(process, user_data_dir)
  loop = asyncio.get_running_loop()
  connection._writer, _ = await loop.connect_write_pipe(  # pylint: disable=protected-access
      asyncio.Protocol, os.fdopen(to_chrome_w, "wb", buffering=0))
  connection._reader, _ = await loop.connect_read_pipe(  # pylint: disable=protected-access
      lambda: connection, os.fdopen(from_chrome_r, "rb", buffering=0))
  connection._stderr, _ = await loop.connect_read_pipe(  # pylint: disable=protected-access
      lambda: _StderrTail(connection), os.fdopen(err_r, "rb", buffering=0))
  try:
    await asyncio.wait_for(connection.browser.send("Browser.getVersion"), timeout)
  except (asyncio.TimeoutError, Disconnected) as e:
    tail = bytes(connection.stderr_tail).decode(errors="replace").strip()[-800:]
    await connection.close(1.0)
    why = "did not answer in time" if isinstance(e, asyncio.TimeoutError) else "exited"
    raise RuntimeError(f"Chromium ({executable}) {why} at start-up; its stderr: "
                       f"{tail or '(empty)'}") from None
  return connection
