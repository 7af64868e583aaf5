"""One contained browser page for evaluating apps: lifecycle, routing, deadlines, recovery.

A `PageSession` owns a Chromium (driven over its DevTools pipe, `cdp.py`), a browser
context and one reused page whose DevTools (CDP) session exists before the page runs
anything. Each `load()` serves the app from a new fake origin
(`http://app-<n>.rcca.invalid/`) through the `Fetch` domain, so storage never leaks
between loads, and fails every other request (`containment.py`). Every browser call
goes through `call()`, which puts a deadline on it; when the deadline passes the running
script is terminated over the CDP session, and if the page stays unresponsive the
context is rebuilt.

The page is set up as Playwright sets up a page of a new context (the same launch
switches, viewport, focus emulation, fonts and media features; `tests/evaluation/test_browser_session`
checks the switches against Playwright's), without what Playwright adds for its own
bookkeeping: network and lifecycle events, its utility world and injected scripts in
every document, and a second session per page.

A load costs two calls (navigate, serve the document): Chromium itself creates the
checker's isolated world in every new document (its id arrives as an event), and a script
there reports through a binding, present only in that world, once the page has loaded and
one frame and a timer turn have passed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any, Awaitable, Callable

from rcca_jax.evaluation import browser as browser_lib
from rcca_jax.evaluation import cdp as cdp_lib
from rcca_jax.evaluation import containment
from rcca_jax.evaluation import hang_locator
from rcca_jax.evaluation import input_events
from rcca_jax.evaluation.config import EvalConfig

APP_HOST_SUFFIX = ".rcca.invalid"
_CLOSE_TIMEOUT = 3.0
_LAUNCH_TIMEOUT = 30.0
_PROBE_TIMEOUT = 1.0
_WORLD_NAME = "rcca"
_SETTLED_BINDING = "__rccaSettled"
# What Playwright sets on every new page (its defaults for a context without options).
_FONT_FAMILIES = {"standard": "Times New Roman", "fixed": "Monospace", "serif": "Times New Roman",
                  "sansSerif": "Arial", "cursive": "Comic Sans MS", "fantasy": "Impact"}
_MEDIA_FEATURES = [{"name": "prefers-color-scheme", "value": "light"},
                   {"name": "prefers-reduced-motion", "value": "no-preference"},
                   {"name": "forced-colors", "value": "none"},
                   {"name": "prefers-contrast", "value": "no-preference"}]

# Chromium keeps only the last --disable-features switch, so ours repeats the features
# Playwright turns off (chromiumSwitches.ts of the pinned version; a test checks them).
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled",
    "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion")
# RenderDocument builds a new frame host (and compositor surface) for every navigation;
# our loads navigate one page between same-site origins, where reusing the host saves about
# a quarter of the CPU of a load. Each load still gets a new document, window and storage.
DISABLED_FEATURES = PLAYWRIGHT_DISABLED_FEATURES + ("RenderDocument",)

# Resolves after one animation frame and a timer turn, or after `ms` if frames stall.
_SETTLE_JS = """(ms) => new Promise((resolve) => {
  let done = false;
  const finish = () => { if (!done) { done = true; resolve(0); } };
  requestAnimationFrame(() => setTimeout(finish, 0));
  setTimeout(finish, ms);
})"""

# Runs in the checker's world of every new document, before the app's scripts. It clears
# the top window's name (the one thing a same-site navigation carries from the previous
# app). On `load` (a capturing listener registered first, so the app cannot stop it) it
# waits for a timer turn, so that frames and timers the app's own load handlers request
# come first, then settles as `_SETTLE_JS` does and calls the binding, which exists only
# in this world.
_ON_NEW_DOCUMENT_JS = """if (window === window.top) window.name = '';
addEventListener('load', () => setTimeout(() => {
  (%s)(%s).then(() => globalThis.%s(''));
}, 0), {capture: true, once: true});"""


class PageCrashed(RuntimeError):
  """The tab crashed (renderer died, e.g. out of memory)."""


class BrowserGone(RuntimeError):
  """The browser process disconnected."""


class CallTimeout(RuntimeError):
  """A browser call overran its deadline (the script was terminated)."""


class JsError(RuntimeError):
  """Our own evaluation threw inside the page (not an uncaught app exception)."""


@dataclasses.dataclass
class PageException:
  """An uncaught exception or unhandled rejection reported by the page."""

  message: str
  frames: list[dict[str, Any]]     # {"function", "url", "line", "column"} innermost first
  when: float                      # time.monotonic() when it arrived


@dataclasses.dataclass
class ConsoleError:
  text: str
  frames: list[dict[str, Any]]


@dataclasses.dataclass
class PageLog:
  """What the app did during one load (and the interactions on it)."""

  url: str = ""
  exceptions: list[PageException] = dataclasses.field(default_factory=list)
  console_errors: list[ConsoleError] = dataclasses.field(default_factory=list)
  dialogs: list[dict[str, str]] = dataclasses.field(default_factory=list)
  popups: list[str] = dataclasses.field(default_factory=list)
  blocked: list[dict[str, str]] = dataclasses.field(default_factory=list)
  navigations: list[str] = dataclasses.field(default_factory=list)
  hang_frames: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # where it looped


@dataclasses.dataclass
class LoadResult:
  ok: bool
  reason: str | None = None        # why the load failed ("timeout", "crash", ...)
  seconds: float = 0.0


def _frames(stack: dict | None) -> list[dict[str, Any]]:
  frames = (stack or {}).get("callFrames", [])
  return [{"function": f.get("functionName", ""), "url": f.get("url", ""),
           "line": int(f.get("lineNumber", 0)), "column": int(f.get("columnNumber", 0))}
          for f in frames]


def _exception_message(details: dict) -> str:
  exc = details.get("exception") or {}
  desc = exc.get("description") or exc.get("value") or details.get("text") or "exception"
  first = str(desc).split("\n    at ", 1)[0]
  text = details.get("text", "")
  if text.startswith("Uncaught (in promise)") and "in promise" not in first:
    return f"Uncaught (in promise) {first}"
  return first


class PageSession:
  """A browser with one reused, contained page. Use inside one asyncio event loop."""

  def __init__(self, config: EvalConfig):
    self.config = config
    self._conn: cdp_lib.Connection | None = None
    self._context_id: str | None = None
    self._target_id: str | None = None
    self._page_attached: asyncio.Future | None = None
    self.cdp: cdp_lib.Session | None = None
    self.mouse: input_events.Mouse | None = None
    self.keyboard: input_events.Keyboard | None = None
    self.hangs: hang_locator.HangLocator | None = None
    self.log = PageLog()
    self._containment = containment.Containment(self)
    self._frame_id: str | None = None
    self._world: int | None = None
    self._loaded: asyncio.Future | None = None
    self._committed = False
    self._settled: asyncio.Future | None = None
    self._crashed = False
    self._gone = False
    self._loads = 0
    self._apps_in_context = 0
    self.restarts = 0

  # -- lifecycle ---------------------------------------------------------------------
  async def start(self) -> None:
    """Launches Chromium and opens the contained page."""
    path = browser_lib.find_chromium()
    if path is None:
      raise RuntimeError("no Chromium found (set RCCA_CHROMIUM or run `make browser`)")
    args = [*browser_lib.PLAYWRIGHT_SWITCHES, *browser_lib.launch_args(self.config.js_heap_mb),
            f"--disable-features={','.join(DISABLED_FEATURES)}",
            f"--enable-features={','.join(browser_lib.PLAYWRIGHT_ENABLED_FEATURES)}"]
    self._conn = await cdp_lib.launch(path, args, _LAUNCH_TIMEOUT)
    self._gone = False
    self._conn.on_close(
        lambda: self._on_dead("_gone", BrowserGone("the browser disconnected")))
    self._conn.browser.on("Target.attachedToTarget", self._on_attached_to_browser)
    self._conn.browser.on("Target.detachedFromTarget", self._on_detached_from_browser)
    # Every new page (ours and popups) is attached and held before it runs anything.
    await self._conn.browser.send("Target.setAutoAttach", containment.AUTO_ATTACH)
    await self._new_context()

  async def close(self) -> None:
    """Closes everything; never raises and never blocks for long."""
    try:
      await self._close_context()
    except Exception:  # pylint: disable=broad-except
      pass
    await self._close_browser()

  async def _close_browser(self) -> None:
    if self._conn is not None:
      conn, self._conn = self._conn, None
      try:
        await conn.close(_CLOSE_TIMEOUT)
      except Exception:  # pylint: disable=broad-except
        conn.kill()

  async def _close_context(self) -> None:
    if self._context_id is not None:
      context, self._context_id = self._context_id, None
      self.cdp = self.mouse = self.keyboard = self.hangs = None
      self._target_id = None
      await asyncio.wait_for(self._conn.browser.send(
          "Target.disposeBrowserContext", {"browserContextId": context}), _CLOSE_TIMEOUT)

  async def _new_context(self) -> None:
    browser = self._conn.browser
    context = (await browser.send("Target.createBrowserContext",
                                  {"disposeOnDetach": True}))["browserContextId"]
    self._context_id = context
    self._page_attached = asyncio.get_running_loop().create_future()
    results = await asyncio.gather(
        browser.send("Browser.setDownloadBehavior",
                     {"behavior": "deny", "browserContextId": context}),
        browser.send("Target.createTarget",
                     {"url": "about:blank", "browserContextId": context}))
    self._target_id = results[1]["targetId"]
    session = await asyncio.wait_for(self._page_attached, _CLOSE_TIMEOUT)
    self._page_attached = None
    self._crashed = False
    self.cdp = session
    self.mouse = input_events.Mouse(session.send)
    self.keyboard = input_events.Keyboard(session.send)
    for event, handler in (
        ("Runtime.exceptionThrown", self._on_exception),
        ("Runtime.consoleAPICalled", self._on_console),
        ("Runtime.executionContextCreated", self._on_context_created),
        ("Runtime.bindingCalled", self._on_binding_called),
        ("Log.entryAdded", self._containment.on_log_entry),
        ("Page.javascriptDialogOpening", lambda e: self._containment.on_dialog(session, e)),
        ("Page.frameNavigated", self._on_frame_navigated),
        ("Page.loadEventFired", self._on_load_event),
        ("Inspector.targetCrashed", lambda _: self._on_crash(session)),
        ("Target.attachedToTarget", self._containment.on_attached_to_page),
        ("Fetch.requestPaused", lambda e: self._containment.on_request(session, e))):
      session.on(event, handler)
    self.hangs = hang_locator.make(self.config.hang_locator, session)
    source = _ON_NEW_DOCUMENT_JS % (_SETTLE_JS, json.dumps(self.config.settle_ms),
                                    _SETTLED_BINDING)
    width, height = self.config.viewport
    # Sent together (Chromium handles them in order); new-document scripts need Page on.
    results = await asyncio.gather(
        session.send("Page.enable"), session.send("Runtime.enable"),
        session.send("Log.enable"), session.send("Fetch.enable", containment.FETCH_ALL),
        session.send("Target.setAutoAttach", containment.AUTO_ATTACH),
        session.send("Emulation.setFocusEmulationEnabled", {"enabled": True}),
        session.send("Emulation.setDeviceMetricsOverride", {
            "mobile": False, "width": width, "height": height, "screenWidth": width,
            "screenHeight": height, "deviceScaleFactor": 1,
            "screenOrientation": {"angle": 0, "type": "landscapePrimary"}}),
        session.send("Page.setFontFamilies", {"fontFamilies": _FONT_FAMILIES}),
        session.send("Emulation.setEmulatedMedia", {"media": "", "features": _MEDIA_FEATURES}),
        session.send("Runtime.addBinding", {"name": _SETTLED_BINDING,
                                            "executionContextName": _WORLD_NAME}),
        session.send("Page.addScriptToEvaluateOnNewDocument", {
            "source": source, "worldName": _WORLD_NAME}),
        session.send("Page.getFrameTree"),
        browser.send("Browser.getWindowForTarget", {"targetId": self._target_id}),
        *self.hangs.setup())
    self._frame_id = results[11]["frameTree"]["frame"]["id"]
    await asyncio.gather(
        browser.send("Browser.setWindowBounds", {
            "windowId": results[12]["windowId"],
            "bounds": {"width": width, "height": height}}),
        session.send("Runtime.runIfWaitingForDebugger"))
    self._apps_in_context = 0

  async def reset(self) -> None:
    """Rebuilds the context (and the browser if it is gone or will not close)."""
    self.restarts += 1
    try:
      if self._gone or self._conn is None:
        raise BrowserGone("browser disconnected")
      await self._close_context()
      await self._new_context()
    except Exception:  # pylint: disable=broad-except
      self._context_id = None
      self.cdp = self.mouse = self.keyboard = self.hangs = None
      await self._close_browser()
      await self.start()

  # -- targets -----------------------------------------------------------------------
  def _on_attached_to_browser(self, event: dict) -> None:
    info, session = event["targetInfo"], self._conn.session(event["sessionId"])
    if info["type"] != "page":
      session.send("Runtime.runIfWaitingForDebugger").add_done_callback(cdp_lib.ignore_result)
    elif (self._page_attached is not None and not self._page_attached.done()
          and info.get("browserContextId") == self._context_id):
      self._page_attached.set_result(session)   # ours: nothing else runs while we wait
    else:
      self._containment.popup_opened(session, info)

  def _on_detached_from_browser(self, event: dict) -> None:
    if self.cdp is not None and event.get("sessionId") == self.cdp.session_id:
      self._on_dead("_crashed", PageCrashed("the tab was closed"))

  # -- event handlers ----------------------------------------------------------------
  def _on_exception(self, event: dict) -> None:
    details = event.get("exceptionDetails", {})
    containment.append(self.log.exceptions, PageException(
        _exception_message(details), _frames(details.get("stackTrace")), time.monotonic()))

  def _on_console(self, event: dict) -> None:
    if event.get("type") not in ("error", "assert"):
      return
    parts = []
    for arg in event.get("args", []):
      parts.append(str(arg.get("value", arg.get("description", arg.get("type", "")))))
    containment.append(self.log.console_errors,
                       ConsoleError(" ".join(parts)[:500], _frames(event.get("stackTrace"))))

  def _on_crash(self, session: cdp_lib.Session) -> None:
    self._on_dead("_crashed", PageCrashed("the tab crashed"))
    # The dead renderer answers nothing more: what waits on it fails now, not at its deadline.
    session.connection.fail_pending(session.session_id, "the tab crashed")

  def _on_dead(self, flag: str, error: Exception) -> None:
    setattr(self, flag, True)
    for waiter in (self._loaded, self._settled, self._page_attached):
      if waiter is not None and not waiter.done():  # a load waits for the page
        waiter.set_exception(error)

  def _on_context_created(self, event: dict) -> None:
    context = event.get("context", {})
    aux = context.get("auxData") or {}
    if (context.get("name") == _WORLD_NAME and aux.get("frameId") == self._frame_id
        and self._frame_id is not None):
      self._world = context["id"]  # the checker's world of the main frame's new document

  def _on_binding_called(self, event: dict) -> None:
    # Only our world has the binding; its copies in the app's subframes are not ours to heed.
    if (event.get("name") == _SETTLED_BINDING and self._world is not None
        and event.get("executionContextId") == self._world
        and self._settled is not None and not self._settled.done()):
      self._settled.set_result(None)

  def _on_frame_navigated(self, event: dict) -> None:
    # Requests to other URLs are failed (and logged) by containment; what still commits
    # here is a document that needs no request (about:blank, an error page).
    frame = event.get("frame", {})
    app_url = self._containment.app_url
    if frame.get("id") != self._frame_id or not app_url:
      return
    url = frame.get("url", "") + frame.get("urlFragment", "")
    if url == app_url:
      self._committed = True
    elif not url.startswith(app_url):
      containment.append(self.log.navigations, url)

  def _on_load_event(self, event: dict) -> None:
    del event
    if self._committed and self._loaded is not None and not self._loaded.done():
      self._loaded.set_result(None)

  # -- calls with deadlines ----------------------------------------------------------
  @property
  def crashed(self) -> bool:
    return self._crashed

  @property
  def context_id(self) -> str | None:
    """The current browser context (a new one after each `reset`)."""
    return self._context_id

  @property
  def connection(self) -> cdp_lib.Connection | None:
    """The CDP connection to the browser (None while there is no browser)."""
    return self._conn

  @property
  def frame_id(self) -> str | None:
    """The page's main frame (the same for every load of a context)."""
    return self._frame_id

  @property
  def isolated_world(self) -> int | None:
    """Execution context id of the checker's isolated world in the current document."""
    return self._world

  async def call(self, awaitable: Awaitable, what: str, timeout: float | None = None):
    """Awaits a browser call with a deadline; terminates hung scripts on overrun."""
    timeout = self.config.step_timeout if timeout is None else timeout
    try:
      return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
      await self._recover_from_hang()
      raise CallTimeout(f"{what} did not finish within {timeout:g}s (script hang?)") from None
    except (cdp_lib.ProtocolError, cdp_lib.Disconnected, input_events.UnknownKey) as e:
      self._raise_if_dead()
      raise JsError(str(e).split("\n")[0]) from None

  def _raise_if_dead(self) -> None:
    if self._gone or self._conn is None or self._conn.closed:
      self._gone = True
      raise BrowserGone("the browser disconnected")
    if self._crashed:
      raise PageCrashed("the tab crashed")

  async def _recover_from_hang(self) -> None:
    """Terminates the running script (noting where it looped, `log.hang_frames`);
    rebuilds the context if the page stays stuck."""
    try:
      frames = await self.hangs.before_terminate()
      await asyncio.wait_for(self.cdp.send("Runtime.terminateExecution"), _PROBE_TIMEOUT)
      await asyncio.wait_for(self.cdp.send("Runtime.evaluate", {"expression": "0"}),
                             _PROBE_TIMEOUT)
      frames = frames or await self.hangs.after_terminate()
      if frames and not self.log.hang_frames:
        self.log.hang_frames = frames
      return
    except Exception:  # pylint: disable=broad-except
      pass
    self._raise_if_dead()
    await self.reset()
    self._containment.app_url = ""  # the page that hung is gone

  async def replay_hang(self, replay: Callable[[], Awaitable[Any]]
                        ) -> tuple[list[dict[str, Any]], str]:
    """Where a terminated hang loops (`hang_locator="replay"`): runs `replay` (load the
    app again, redo what hung) with the Debugger on and `hang_probe_timeout` deadlines, so
    the hang is paused at its deadline. Returns (frames, URL of the replayed load)."""
    if not isinstance(self.hangs, hang_locator.ReplayLocator):
      return [], ""
    locator, config = self.hangs, self.config
    debugger = locator.debugger
    probe = min(config.hang_probe_timeout, config.load_timeout, config.step_timeout)
    try:
      await asyncio.gather(*debugger.setup())
    except Exception:  # pylint: disable=broad-except
      return [], ""
    self.hangs = debugger
    self.config = dataclasses.replace(config, load_timeout=probe, step_timeout=probe)
    try:
      await replay()
    except (CallTimeout, JsError):
      pass
    finally:
      self.config = config
      if self.hangs is debugger:          # not replaced by a rebuilt context
        self.hangs = locator
        try:
          await debugger.stop()
        except Exception:  # pylint: disable=broad-except
          pass
    return self.log.hang_frames, self.log.url

  async def js(self, fn: str, *args: Any, what: str = "evaluate",
               timeout: float | None = None, main_world: bool = False,
               settle_first: bool = False) -> Any:
    """Calls JS function source `fn` with JSON `args` in the page; returns its value.

    By default runs in an isolated world (same DOM, separate globals), so an app that
    overwrites builtins cannot disturb the checks, and our own errors are never
    counted as the app's uncaught exceptions. `settle_first` lets one frame and pending
    timers run before `fn` in the same call (`_SETTLE_JS`); the page's exception events up
    to then arrive before the answer.
    """
    self._raise_if_dead()
    expression = f"({fn})(...{json.dumps(list(args))})"
    if settle_first:
      if main_world:
        raise ValueError("settle_first runs in the isolated world only")
      expression = (f"({_SETTLE_JS})({json.dumps(self.config.settle_ms)})"
                    f".then(() => {expression})")
    params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
    if not main_world and self._world is not None:
      params["contextId"] = self._world
    res = await self.call(self.cdp.send("Runtime.evaluate", params), what, timeout)
    if "exceptionDetails" in res:
      details = res["exceptionDetails"]
      raise JsError(_exception_message(details))
    return res.get("result", {}).get("value")

  # -- loading -----------------------------------------------------------------------
  async def begin_app(self) -> None:
    """Called before each app: rebuilds the context every `recycle_context_after` apps."""
    if self.cdp is None or self._gone:
      await self.reset()
    elif self._apps_in_context >= self.config.recycle_context_after:
      await self.reset()
      self.restarts -= 1  # planned recycling is not a failure restart
    self._apps_in_context += 1

  async def _navigate(self, url: str) -> None:
    """Navigates the main frame and waits for the new document's load event."""
    answer = await self.cdp.send("Page.navigate", {"url": url, "frameId": self._frame_id})
    if answer.get("errorText"):
      raise JsError(f"{answer['errorText']} at {url}")
    await self._loaded

  async def load(self, html: str) -> LoadResult:
    """Loads `html` on a fresh origin; failures are reported, never raised (but crashes)."""
    if self.cdp is None or self._gone:
      await self.reset()
    self._loads += 1
    app_url = f"http://app-{self._loads}{APP_HOST_SUFFIX}/"
    self._containment.html, self._containment.app_url = html, app_url
    self.log = PageLog(url=app_url)
    self._world = None
    self._committed = False
    loop = asyncio.get_running_loop()
    self._loaded, self._settled = loop.create_future(), loop.create_future()
    start = time.monotonic()
    await self.hangs.on_load()
    try:
      await self.call(self._navigate(app_url), "page load", self.config.load_timeout)
      # Events arrive in order: the app's exceptions up to here are logged before this.
      await self.call(self._settled, "settle")
    except CallTimeout as e:
      return LoadResult(False, str(e), time.monotonic() - start)
    except JsError as e:
      return LoadResult(False, f"page load failed: {e}", time.monotonic() - start)
    finally:
      for waiter in (self._loaded, self._settled):
        if waiter.done():
          cdp_lib.ignore_result(waiter)   # a crash fails both; only one was awaited
      self._loaded = self._settled = None
    return LoadResult(True, None, time.monotonic() - start)

