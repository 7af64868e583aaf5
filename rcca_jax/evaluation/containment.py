"""What keeps an app inside its page: the app's document is served and every other
request fails (the page's, its frames' and workers', pop-ups'), pop-ups are closed and
dialogs answered; what was stopped goes to the load's log.

`Containment(page)` holds the document of the current load and handles those CDP events
for a `PageSession` (`page`), reading the page's current `log`, `config`, `cdp`
session, `frame_id` and `connection` at each event.
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any, Protocol

from rcca_jax.evaluation import cdp as cdp_lib
from rcca_jax.evaluation.config import EvalConfig

MAX_LOG = 50  # per kind and load, so a flood of console calls cannot grow memory
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
FETCH_ALL = {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}
_POPUP_GRACE = 0.5   # s a popup may take to commit its first document before it is closed
_FAVICON = re.compile(r"/favicon\.ico(#.*)?$")
_WEBSOCKET_FAILED = re.compile(r"WebSocket connection to '([^']*)' failed")


class Page(Protocol):
  """What containment reads of its page."""

  config: EvalConfig
  log: Any                         # the current load's `PageLog`
  cdp: cdp_lib.Session | None      # the page's own session

  @property
  def frame_id(self) -> str | None: ...

  @property
  def connection(self) -> cdp_lib.Connection | None: ...


def append(items: list, item: Any) -> None:
  """Adds `item` to one kind of a load's log unless it holds `MAX_LOG` already."""
  if len(items) < MAX_LOG:
    items.append(item)


class Containment:
  """The containment event handlers of one `PageSession`."""

  def __init__(self, page: Page):
    self.page = page
    self.app_url = ""   # the current load's document ("" while there is none)
    self.html = ""

  def popup_opened(self, session: cdp_lib.Session, info: dict) -> None:
    """A popup may share the app's renderer, which it holds while it waits, so it is
    released, with its requests failed like the app's, and closed as soon as it asks
    for its first document (logged by that URL) or after `_POPUP_GRACE` s."""
    log, closed, conn = self.page.log, False, self.page.connection

    def close(url: str) -> None:
      nonlocal closed
      if not closed and not conn.closed:
        closed = True
        append(log.popups, url)
        conn.browser.send("Target.closeTarget", {"targetId": info["targetId"]}
                          ).add_done_callback(cdp_lib.ignore_result)

    session.on("Page.frameRequestedNavigation", lambda e: close(e.get("url", "")))
    self._release(session, ("Page.enable", None))
    asyncio.get_running_loop().call_later(
        _POPUP_GRACE, lambda: close(info.get("url") or "about:blank"))

  def on_attached_to_page(self, event: dict) -> None:
    # An out-of-process frame or a worker of the app: its requests are failed too.
    child = self.page.connection.session(event["sessionId"])
    child.on("Target.attachedToTarget", self.on_attached_to_page)
    self._release(child, ("Target.setAutoAttach", AUTO_ATTACH))

  def _release(self, session: cdp_lib.Session, *setup: tuple[str, Any]) -> None:
    """Fails the requests of a held target as the app's are failed, sends `setup`
    (method, params) and lets it run; nobody waits for the answers."""
    session.on("Fetch.requestPaused", lambda e: self.on_request(session, e))
    for method, params in (("Fetch.enable", FETCH_ALL), *setup,
                           ("Runtime.runIfWaitingForDebugger", None)):
      session.send(method, params).add_done_callback(cdp_lib.ignore_result)

  def on_log_entry(self, event: dict) -> None:
    # WebSockets never reach the Fetch domain; the dead proxy fails them, and Chromium
    # reports each failed connection here.
    entry = event.get("entry", {})
    match = _WEBSOCKET_FAILED.match(entry.get("text", ""))
    if entry.get("source") == "network" and match:
      append(self.page.log.blocked, {"url": match.group(1)[:300], "type": "websocket"})

  def on_dialog(self, session: cdp_lib.Session, event: dict) -> None:
    # A `beforeunload` prompt comes from our own next load leaving the page; it is not
    # something the app showed its user, and the page's log already belongs to the next
    # load.
    kind = event.get("type", "")
    if kind != "beforeunload":
      append(self.page.log.dialogs, {"type": kind, "message": event.get("message", "")[:300]})
    answer: dict[str, Any] = {"accept": True}
    if kind == "prompt":
      answer["promptText"] = self.page.config.prompt_answer
    elif kind == "confirm" and not self.page.config.accept_confirm:
      answer["accept"] = False
    session.send("Page.handleJavaScriptDialog", answer).add_done_callback(
        cdp_lib.ignore_result)

  def on_request(self, session: cdp_lib.Session, event: dict) -> None:
    url, kind = event["request"]["url"], event.get("resourceType", "Other")
    navigation = kind == "Document"
    main = (navigation and event.get("frameId") == self.page.frame_id
            and session is self.page.cdp)
    if main and url == self.app_url:
      body = self.html.encode()
      answer = session.send("Fetch.fulfillRequest", {
          "requestId": event["requestId"], "responseCode": 200, "responsePhrase": "OK",
          "responseHeaders": [{"name": "content-type", "value": "text/html; charset=utf-8"},
                              {"name": "content-length", "value": str(len(body))}],
          "body": base64.b64encode(body).decode()})
    else:
      # The browser's own requests are not the app's: its favicon fetch, and DevTools
      # fetching the document again for its text (the CSS domain; no Referer).
      own = _FAVICON.search(url) or (kind == "Other" and url == self.app_url
                                     and "Referer" not in event["request"].get("headers", {}))
      if main:
        append(self.page.log.navigations, url)
      elif not own:
        append(self.page.log.blocked, {"url": url[:300], "type": kind.lower()})
      # Aborted leaves the current document in place (no error page).
      answer = session.send("Fetch.failRequest", {
          "requestId": event["requestId"],
          "errorReason": "Aborted" if navigation or own else "BlockedByClient"})
    answer.add_done_callback(cdp_lib.ignore_result)
