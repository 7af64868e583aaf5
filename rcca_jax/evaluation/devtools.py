"""DevTools-protocol evidence for localization: event listeners and matched CSS rules.

Positions are returned in document coordinates (0-based line, 0-based UTF-16 column of
the served app document); the evaluator maps them to response offsets.
"""

from __future__ import annotations

import json
from typing import Any

from rcca_jax.evaluation.page_session import PageSession

MAX_ANCESTORS = 12
MAX_LISTENERS = 30

_CHAIN_JS = """(() => {
  const el = %s;
  if (!el) return null;
  const chain = [];
  for (let n = el; n && chain.length < %d; n = n.parentNode) chain.push(n);
  chain.push(window);
  return chain;
})()"""

_NAMES_JS = """(chain) => chain.map((n) => {
  if (n === window) return 'window';
  if (n === document) return 'document';
  let s = n.tagName.toLowerCase();
  if (n.id) s += '#' + n.id;
  for (const c of Array.from(n.classList || []).slice(0, 3)) s += '.' + c;
  return s;
})"""


async def _evaluate_handle(session: PageSession, expression: str,
                           main_world: bool = False) -> str | None:
  params = {"expression": expression, "returnByValue": False}
  if not main_world and session.isolated_world is not None:
    params["contextId"] = session.isolated_world
  res = await session.call(session.cdp.send("Runtime.evaluate", params), "evidence")
  return res.get("result", {}).get("objectId")


async def _script_urls(session: PageSession) -> dict[str, str]:
  """scriptId -> URL of every script in the page (Debugger briefly enabled, unless the
  session's hang locator keeps it on and tracks them)."""
  if session.hangs is not None and session.hangs.script_urls is not None:
    return session.hangs.script_urls
  urls: dict[str, str] = {}
  handler = lambda e: urls.__setitem__(e["scriptId"], e.get("url", ""))  # noqa: E731
  session.cdp.on("Debugger.scriptParsed", handler)
  try:
    await session.call(session.cdp.send("Debugger.enable"), "Debugger.enable")
    await session.call(session.cdp.send("Debugger.disable"), "Debugger.disable")
  finally:
    session.cdp.remove_listener("Debugger.scriptParsed", handler)
  return urls


async def event_listeners(session: PageSession, selector: str | None) -> list[dict[str, Any]]:
  """Listeners on the first element matching `selector`, its ancestors and window.

  `selector=None` starts from the element that receives key presses (the focused
  element, else the body), as a `press KEY` step without a selector does.
  """
  target = ("(document.activeElement || document.body)" if selector is None
            else f"document.querySelector({json.dumps(selector)})")
  # Listeners belong to the world that added them: look the nodes up in the app's world.
  chain_id = await _evaluate_handle(session, _CHAIN_JS % (target, MAX_ANCESTORS),
                                    main_world=True)
  if chain_id is None:
    return []
  props = await session.call(session.cdp.send(
      "Runtime.getProperties", {"objectId": chain_id, "ownProperties": True}), "evidence")
  nodes = sorted(((int(p["name"]), p["value"]["objectId"]) for p in props.get("result", [])
                  if p["name"].isdigit() and p.get("value", {}).get("objectId")))
  names_res = await session.call(session.cdp.send("Runtime.callFunctionOn", {
      "functionDeclaration": _NAMES_JS, "objectId": chain_id,
      "arguments": [{"objectId": chain_id}], "returnByValue": True}), "evidence")
  names = names_res.get("result", {}).get("value") or []
  urls = await _script_urls(session)
  out: list[dict[str, Any]] = []
  for index, object_id in nodes:
    res = await session.call(session.cdp.send(
        "DOMDebugger.getEventListeners", {"objectId": object_id}), "evidence")
    for lst in res.get("listeners", []):
      if len(out) >= MAX_LISTENERS:
        break
      out.append({"type": lst["type"], "line": int(lst["lineNumber"]),
                  "column": int(lst["columnNumber"]),
                  "url": urls.get(lst.get("scriptId", ""), ""),
                  "node": "target" if index == 0 else "ancestor",
                  "selector": names[index] if index < len(names) else ""})
  await session.call(session.cdp.send("Runtime.releaseObject", {"objectId": chain_id}),
                     "evidence")
  return out


def _to_document(sheet: dict, line: int, column: int) -> tuple[int, int]:
  """A position inside a stylesheet's text -> document position."""
  start_line, start_col = int(sheet.get("startLine", 0)), int(sheet.get("startColumn", 0))
  return (start_line + line, column + (start_col if line == 0 else 0))


async def matched_css_rules(session: PageSession, selector: str,
                            prop: str | None) -> list[dict[str, Any]]:
  """Author CSS rules (from the app's <style> blocks) that match the element."""
  object_id = await _evaluate_handle(session, f"document.querySelector({json.dumps(selector)})")
  if object_id is None:
    return []
  sheets: dict[str, dict] = {}
  handler = lambda e: sheets.__setitem__(e["header"]["styleSheetId"], e["header"])  # noqa: E731
  cdp = session.cdp
  cdp.on("CSS.styleSheetAdded", handler)
  try:
    await session.call(cdp.send("DOM.getDocument", {"depth": 0}), "evidence")
    node = await session.call(cdp.send("DOM.requestNode", {"objectId": object_id}), "evidence")
    await session.call(cdp.send("CSS.enable"), "CSS.enable")
    matched = await session.call(cdp.send("CSS.getMatchedStylesForNode",
                                           {"nodeId": node["nodeId"]}), "evidence")
  finally:
    cdp.remove_listener("CSS.styleSheetAdded", handler)
    for method in ("CSS.disable", "DOM.disable"):
      try:
        await session.call(cdp.send(method), method)
      except Exception:  # pylint: disable=broad-except
        pass
  out = []
  for m in matched.get("matchedCSSRules", []):
    rule = m["rule"]
    sheet = sheets.get(rule.get("styleSheetId", ""))
    if rule.get("origin") != "regular" or sheet is None or not sheet.get("isInline"):
      continue
    ranges = [s["range"] for s in rule["selectorList"]["selectors"] if "range" in s]
    style_range = rule["style"].get("range")
    if not ranges or style_range is None:
      continue
    first = min(ranges, key=lambda r: (r["startLine"], r["startColumn"]))
    declared = {p["name"] for p in rule["style"].get("cssProperties", []) if "range" in p}
    out.append({"selector": rule["selectorList"]["text"],
                "start": _to_document(sheet, first["startLine"], first["startColumn"]),
                "end": _to_document(sheet, style_range["endLine"], style_range["endColumn"]),
                "property": prop if prop in declared else None})
  return out
