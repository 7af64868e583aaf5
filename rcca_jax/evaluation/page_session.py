"""One contained browser page for evaluating apps: lifecycle, routing, deadlines, recovery.

A `PageSession` owns a Chromium, a context and one reused page with a DevTools (CDP)
session attached at page creation. Each `load()` serves the app from a new fake origin
(`http://app-<n>.rcca.invalid/`) through request routing, so storage never leaks between
loads, and aborts every other request. Every browser call goes through `call()`, which
puts a deadline on it; when the deadline passes the running script is terminated over the
CDP session, and if the page stays unresponsive the context is rebuilt.

A load costs two calls (navigate, serve the document): Chromium itself creates the
checker's isolated world in every new document (its id arrives as an event), and a script
there reports through a binding, present only in that world, once the page has loaded and
one frame and a timer turn have passed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from typing import Any, Awaitable, Callable

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from rcca_jax.evaluation import browser as browser_lib
from rcca_jax.evaluation import hang_locator
from rcca_jax.evaluation.config import EvalConfig

APP_HOST_SUFFIX = ".rcca.invalid"
_CLOSE_TIMEOUT = 3.0
_PROBE_TIMEOUT = 1.0
_MAX_LOG = 50  # per kind and load, so a flood of console calls cannot grow memory
_WORLD_NAME = "rcca"
_SETTLED_BINDING = "__rccaSettled"

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
    self._pw = None
    self._browser = None
    self.context = None
    self.page = None
    self.cdp = None
    self.hangs: hang_locator.HangLocator | None = None
    self.log = PageLog()
    self._html = ""
    self._app_url = ""
    self._frame_id: str | None = None
    self._world: int | None = None
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
    if self._pw is None:
      self._pw = await async_playwright().start()
    args = [*browser_lib.launch_args(self.config.js_heap_mb),
            f"--disable-features={','.join(DISABLED_FEATURES)}"]
    self._browser = await self._pw.chromium.launch(executable_path=path, args=args,
                                                   timeout=30000)
    self._gone = False
    self._browser.on("disconnected",
                     lambda _: self._on_dead("_gone", BrowserGone("the browser disconnected")))
    await self._new_context()

  async def close(self) -> None:
    """Closes everything; never raises and never blocks for long."""
    for closer in (self._close_context, self._close_browser):
      try:
        await closer()
      except Exception:  # pylint: disable=broad-except
        pass
    if self._pw is not None:
      try:
        await asyncio.wait_for(self._pw.stop(), _CLOSE_TIMEOUT)
      except Exception:  # pylint: disable=broad-except
        pass
      self._pw = None

  async def _close_browser(self) -> None:
    if self._browser is not None:
      browser, self._browser = self._browser, None
      await asyncio.wait_for(browser.close(), _CLOSE_TIMEOUT)

  async def _close_context(self) -> None:
    if self.context is not None:
      ctx, self.context, self.page, self.cdp = self.context, None, None, None
      self.hangs = None
      await asyncio.wait_for(ctx.close(), _CLOSE_TIMEOUT)

  async def _new_context(self) -> None:
    width, height = self.config.viewport
    self.context = await self._browser.new_context(
        viewport={"width": width, "height": height}, service_workers="block",
        accept_downloads=False)
    await self.context.route("**/*", self._route)
    await self.context.route_web_socket(re.compile(".*"), self._route_web_socket)
    self.page = await self.context.new_page()
    self.context.on("page", self._on_page)  # after ours exists: every later page is a popup
    self._crashed = False
    self.page.on("crash", lambda _: self._on_dead("_crashed", PageCrashed("the tab crashed")))
    self.page.on("dialog", self._on_dialog)
    self.page.on("framenavigated", self._on_frame_navigated)
    self.cdp = await self.context.new_cdp_session(self.page)
    self.cdp.on("Runtime.exceptionThrown", self._on_exception)
    self.cdp.on("Runtime.consoleAPICalled", self._on_console)
    self.cdp.on("Runtime.executionContextCreated", self._on_context_created)
    self.cdp.on("Runtime.bindingCalled", self._on_binding_called)
    self.hangs = hang_locator.make(self.config.hang_locator, self.cdp)
    source = _ON_NEW_DOCUMENT_JS % (_SETTLE_JS, json.dumps(self.config.settle_ms),
                                    _SETTLED_BINDING)
    # Sent together (Chromium handles them in order); new-document scripts need Page on.
    results = await asyncio.gather(
        self.cdp.send("Runtime.enable"), self.cdp.send("Page.enable"),
        self.cdp.send("Runtime.addBinding", {"name": _SETTLED_BINDING,
                                             "executionContextName": _WORLD_NAME}),
        self.cdp.send("Page.addScriptToEvaluateOnNewDocument", {
            "source": source, "worldName": _WORLD_NAME}),
        self.cdp.send("Page.getFrameTree"), *self.hangs.setup())
    self._frame_id = results[4]["frameTree"]["frame"]["id"]
    self._apps_in_context = 0

  async def reset(self) -> None:
    """Rebuilds the context (and the browser if it is gone or will not close)."""
    self.restarts += 1
    try:
      if self._gone:
        raise BrowserGone("browser disconnected")
      await self._close_context()
      await self._new_context()
    except Exception:  # pylint: disable=broad-except
      self.context = self.page = self.cdp = None
      try:
        await self._close_browser()
      except Exception:  # pylint: disable=broad-except
        self._browser = None
      await self.start()

  # -- event handlers ----------------------------------------------------------------
  def _append(self, items: list, item: Any) -> None:
    if len(items) < _MAX_LOG:
      items.append(item)

  def _on_exception(self, event: dict) -> None:
    details = event.get("exceptionDetails", {})
    self._append(self.log.exceptions, PageException(
        _exception_message(details), _frames(details.get("stackTrace")), time.monotonic()))

  def _on_console(self, event: dict) -> None:
    if event.get("type") not in ("error", "assert"):
      return
    parts = []
    for arg in event.get("args", []):
      parts.append(str(arg.get("value", arg.get("description", arg.get("type", "")))))
    self._append(self.log.console_errors,
                 ConsoleError(" ".join(parts)[:500], _frames(event.get("stackTrace"))))

  def _on_dead(self, flag: str, error: Exception) -> None:
    setattr(self, flag, True)
    if self._settled is not None and not self._settled.done():  # a load waits for the page
      self._settled.set_exception(error)

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

  async def _on_dialog(self, dialog) -> None:
    # A `beforeunload` prompt comes from our own next load leaving the page; it is not
    # something the app showed its user, and `self.log` already belongs to the next load.
    if dialog.type != "beforeunload":
      self._append(self.log.dialogs, {"type": dialog.type, "message": dialog.message[:300]})
    try:
      if dialog.type == "prompt":
        await dialog.accept(self.config.prompt_answer)
      elif dialog.type == "confirm" and not self.config.accept_confirm:
        await dialog.dismiss()
      else:
        await dialog.accept()
    except PlaywrightError:
      pass

  async def _on_page(self, page) -> None:
    if page is self.page:
      return
    self._append(self.log.popups, page.url)
    try:
      await asyncio.wait_for(page.close(), _CLOSE_TIMEOUT)
    except Exception:  # pylint: disable=broad-except
      pass

  def _on_frame_navigated(self, frame) -> None:
    # Requests to other URLs are aborted (and logged) in _route; what still commits here
    # is a document that needs no request (about:blank, an error page). Same-document
    # changes (hash, history.pushState) keep the app's origin and are fine.
    if (self._app_url and self.page is not None and frame == self.page.main_frame
        and not frame.url.startswith(self._app_url)):
      self._append(self.log.navigations, frame.url)

  async def _route(self, route) -> None:
    request = route.request
    try:
      navigation = request.is_navigation_request()
      main = navigation and request.frame == self.page.main_frame
    except Exception:  # pylint: disable=broad-except
      navigation = main = False
    try:
      if main and request.url == self._app_url:
        await route.fulfill(status=200, content_type="text/html; charset=utf-8",
                            body=self._html)
        return
      if main:
        self._append(self.log.navigations, request.url)
      else:
        self._append(self.log.blocked, {"url": request.url[:300],
                                        "type": request.resource_type})
      # ERR_ABORTED leaves the current document in place (no error page).
      await route.abort("aborted" if navigation else "blockedbyclient")
    except PlaywrightError:
      pass

  def _route_web_socket(self, ws) -> None:
    self._append(self.log.blocked, {"url": ws.url[:300], "type": "websocket"})
    asyncio.ensure_future(self._close_ws(ws))

  async def _close_ws(self, ws) -> None:
    try:
      await asyncio.wait_for(ws.close(code=1008, reason="blocked"), _CLOSE_TIMEOUT)
    except Exception:  # pylint: disable=broad-except
      pass

  # -- calls with deadlines ----------------------------------------------------------
  @property
  def crashed(self) -> bool:
    return self._crashed

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
    except PlaywrightError as e:
      self._raise_if_dead()
      raise JsError(str(e).split("\n")[0]) from None

  def _raise_if_dead(self) -> None:
    if self._gone or (self._browser is not None and not self._browser.is_connected()):
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
    self._app_url = ""  # the page that hung is gone

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
    if self.context is None or self._gone:
      await self.reset()
    elif self._apps_in_context >= self.config.recycle_context_after:
      await self.reset()
      self.restarts -= 1  # planned recycling is not a failure restart
    self._apps_in_context += 1

  async def load(self, html: str) -> LoadResult:
    """Loads `html` on a fresh origin; failures are reported, never raised (but crashes)."""
    if self.context is None or self._gone:
      await self.reset()
    self._loads += 1
    self._html = html
    self._app_url = f"http://app-{self._loads}{APP_HOST_SUFFIX}/"
    self.log = PageLog(url=self._app_url)
    self._world = None
    self._settled = asyncio.get_running_loop().create_future()
    start = time.monotonic()
    await self.hangs.on_load()
    goto = self.page.goto(self._app_url, wait_until="load",
                          timeout=self.config.load_timeout * 1000 + 1000)
    try:
      await self.call(goto, "page load", self.config.load_timeout)
      # Events arrive in order: the app's exceptions up to here are logged before this.
      await self.call(self._settled, "settle")
    except CallTimeout as e:
      return LoadResult(False, str(e), time.monotonic() - start)
    except JsError as e:
      return LoadResult(False, f"page load failed: {e}", time.monotonic() - start)
    finally:
      self._settled = None
    return LoadResult(True, None, time.monotonic() - start)
