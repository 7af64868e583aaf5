"""An agent judge that explores a running app through OpenAI tool calls (MiniAppBench).

The judge model gets the user's query, the expectations (intention, static, dynamic)
and the page: a screenshot and a compact text of it (title, the visible interactive
elements numbered `[n]`, the visible text). It acts with the tools `click`, `type`,
`press`, `drag`, `scroll`, `wait` and `read` (targets: an element number or a CSS
selector) and ends with `done`, giving a pass/fail verdict per dimension. Every action
is a real input event in the contained page session (same deadlines, no network);
after each one the page settles and the tool result reports the page changes (a diff
of the page text), new uncaught exceptions and console errors. Turns and seconds are
bounded; when they run out the judge is asked once more, with `done` required.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import difflib
import json
import time
from typing import Any

from rcca_jax.bench import screenshots
from rcca_jax.evaluation import actions
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.page_session import CallTimeout, JsError, PageSession

DIMENSIONS = ("intention", "static", "dynamic")

# Runs in the checker's isolated world: numbers the visible interactive elements (kept
# in that world for later targets) and describes the page as compact text.
_SNAPSHOT_JS = """(maxText) => {
  const refs = [];
  globalThis.__rccaRefs = refs;
  const sel = 'a,button,input,select,textarea,summary,label,canvas,[onclick],[role],' +
              '[tabindex],[contenteditable]';
  const shown = (el) => {
    const r = el.getBoundingClientRect(), st = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none';
  };
  const lines = [];
  for (const el of document.querySelectorAll('body *')) {
    if (refs.length >= 150) break;
    if (!(el.matches(sel) || getComputedStyle(el).cursor === 'pointer') || !shown(el)) continue;
    const parent = el.parentElement;
    if (parent && refs.includes(parent) && !el.matches(sel)) continue;
    refs.push(el);
    const tag = el.tagName.toLowerCase();
    let d = tag + (el.id ? '#' + el.id : '');
    if (el.type && tag === 'input') d += ' type=' + el.type;
    const text = (el.innerText || '').replace(/\\s+/g, ' ').trim().slice(0, 60);
    if (text) d += ' "' + text + '"';
    if ('value' in el && el.value !== undefined && el.value !== '' && tag !== 'button')
      d += ' value="' + String(el.value).slice(0, 60) + '"';
    if (el.placeholder) d += ' placeholder="' + el.placeholder.slice(0, 40) + '"';
    if (el.checked) d += ' checked';
    if (el.disabled) d += ' disabled';
    lines.push('[' + (refs.length - 1) + '] ' + d);
  }
  const body = document.body ? document.body.innerText.replace(/[ \\t]+/g, ' ') : '';
  return {title: document.title, elements: lines,
          text: body.split('\\n').map(s => s.trim()).filter(Boolean).join('\\n').slice(0, maxText)};
}"""

_TARGET = {"type": "string", "description": "element number from the page text, e.g. \"3\", "
           "or a CSS selector"}


def _tool(name: str, description: str, properties: dict[str, Any],
          required: tuple[str, ...] = ()) -> dict[str, Any]:
  return {"type": "function", "function": {
      "name": name, "description": description,
      "parameters": {"type": "object", "properties": properties,
                     "required": list(required)}}}


TOOLS = [
    _tool("click", "Click an element.", {"target": _TARGET}, ("target",)),
    _tool("type", "Click a text field and type text into it.",
          {"target": _TARGET, "text": {"type": "string"}}, ("target", "text")),
    _tool("press", "Press a key (e.g. Enter, ArrowLeft, Space), optionally after clicking "
          "a target.", {"key": {"type": "string"}, "target": _TARGET}, ("key",)),
    _tool("drag", "Drag from an element to another element or by an offset in pixels.",
          {"source": _TARGET, "target": _TARGET, "dx": {"type": "number"},
           "dy": {"type": "number"}}, ("source",)),
    _tool("scroll", "Scroll the page by pixels.", {"dx": {"type": "number"},
                                                   "dy": {"type": "number"}}),
    _tool("wait", "Wait some milliseconds (at most 5000) for timers or animations.",
          {"ms": {"type": "number"}}, ("ms",)),
    _tool("read", "Read an element's text and value, or the whole page without a target.",
          {"target": _TARGET}),
    _tool("done", "Finish with a verdict per dimension (true = met).",
          {"intention": {"type": "boolean"}, "static": {"type": "boolean"},
           "dynamic": {"type": "boolean"}, "reason": {"type": "string"}},
          ("intention", "static", "dynamic")),
]

_SYSTEM = """You evaluate a generated interactive web app by using it. You see the page as a
screenshot and as text: the title, the visible interactive elements numbered [n], and the
visible text. Explore with the tools (click, type, press, drag, scroll, wait, read); each
result tells you what changed on the page and any JavaScript errors. Check every
expectation yourself; when you have seen enough, call done with one verdict per dimension:
intention (the user's goal is met), static (required structure and elements are present),
dynamic (interactions produce the expected state changes, without errors). A dimension with
no expectations is met. You have at most {turns} turns."""


@dataclasses.dataclass(frozen=True)
class Options:
  max_turns: int = 12
  max_seconds: float = 180.0
  turn_screenshots: bool = True    # a screenshot after every turn (else only the first)
  max_text: int = 2000             # characters of visible page text per observation
  max_code_chars: int = 0          # >0: the app's code is also shown, cut to this length


def expectations(task) -> dict[str, list[str]]:
  """The task's expectations per dimension (MiniAppBench rubrics carry their `source`;
  other tasks: initial rubrics are static, dynamic ones dynamic)."""
  out: dict[str, list[str]] = {d: [] for d in DIMENSIONS}
  for r in task.rubrics:
    dim = r.extra.get("source")
    if dim not in DIMENSIONS:
      dim = "static" if r.kind == "initial" else "dynamic"
    out[dim].append(r.text)
  return out


def _page_text(snap: dict[str, Any]) -> str:
  return (f"Title: {snap.get('title') or ''}\nInteractive elements:\n"
          + ("\n".join(snap.get("elements") or []) or "(none)")
          + f"\nVisible text:\n{snap.get('text') or ''}")


def _diff(before: str, after: str, limit: int = 30) -> str:
  lines = [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
           if line[:1] in "+-"]
  if not lines:
    return "no visible change"
  more = f"\n... {len(lines) - limit} more changed lines" if len(lines) > limit else ""
  return "\n".join(lines[:limit]) + more


def _verdict(args: Any, expected: dict[str, list[str]]) -> dict[str, Any]:
  """Per dimension True/False (None where the task has no expectations), and the reason."""
  args = args if isinstance(args, dict) else {}
  out: dict[str, Any] = {}
  for dim in DIMENSIONS:
    value = args.get(dim)
    if isinstance(value, str):
      value = value.strip().lower() in ("true", "pass", "passed", "yes", "met")
    out[dim] = None if not expected[dim] else value is True
  out["reason"] = str(args.get("reason", ""))[:1000]
  return out


class Agent:
  """Runs one judge conversation on a loaded page."""

  def __init__(self, session: PageSession, judge: judge_lib.ChatClient, opts: Options,
               out_dir: str, stem: str):
    self.session = session
    self.judge = judge
    self.opts = opts
    self.out_dir = out_dir
    self.stem = stem
    self.snapshot = ""
    self.screenshots: list[str] = []
    self.actions: list[dict[str, Any]] = []
    self._seen_errors = 0

  async def observe(self) -> str:
    """The page text after the page settles (also refreshes the element numbers)."""
    snap = await self.session.js(_SNAPSHOT_JS, self.opts.max_text, what="snapshot",
                                 settle_first=True)
    return _page_text(snap or {})

  async def screenshot_part(self) -> dict[str, Any] | None:
    try:
      data = await screenshots.screenshot(self.session)
    except (CallTimeout, JsError):
      return None
    rel = f"screenshots/{self.stem}_t{len(self.screenshots)}.png"
    screenshots.write_png(self.out_dir, rel, data)
    self.screenshots.append(rel)
    return screenshots.image_part(data)

  def new_errors(self) -> list[str]:
    log = self.session.log
    errors = ([f"uncaught: {e.message}" for e in log.exceptions]
              + [f"console.error: {c.text}" for c in log.console_errors])
    fresh, self._seen_errors = errors[self._seen_errors:], len(errors)
    return fresh

  async def _target(self, target: Any) -> dict[str, Any]:
    if target is None or str(target).strip() == "":
      return {"error": "a target is required"}
    target = str(target)
    found = await self.session.js(actions.LOCATE_TARGET_JS, target,
                                  {"byNumber": True, "text": True}, what="locate target") or {}
    if found.get("bad"):
      return {"error": f"bad selector: {found['bad']}"}
    if not found.get("found"):
      return {"error": f"no element {json.dumps(target)}"}
    if not found["visible"]:
      return {"error": f"element {target} is not visible"}
    return {"x": found["x"], "y": found["y"], "text": found["text"], "tag": found["info"]["tag"]}

  async def act(self, name: str, args: dict[str, Any]) -> str:
    """Runs one tool call; returns its result text (errors are results too)."""
    if name == "read":
      if args.get("target") in (None, ""):
        return await self.observe()
      found = await self._target(args["target"])
      return found.get("error") or f"{found['tag']}: {found['text']!r}"
    handler = {"click": self._click, "type": self._type, "press": self._press,
               "drag": self._drag, "scroll": self._scroll, "wait": self._wait}.get(name)
    if handler is None:
      return f"error: unknown tool {name!r}"
    error = await handler(args)
    if error:
      return f"error: {error}"
    after = await self.observe()
    changes, self.snapshot = _diff(self.snapshot, after), after
    errors = self.new_errors()
    return (f"ok. Page changes:\n{changes}"
            + ("\nNew errors:\n" + "\n".join(errors[:10]) if errors else ""))

  async def _click(self, args: dict[str, Any]) -> str | None:
    found = await self._target(args.get("target"))
    if "error" in found:
      return found["error"]
    await self.session.call(self.session.mouse.click(found["x"], found["y"]),
                            f"click {args.get('target')}")
    return None

  async def _type(self, args: dict[str, Any]) -> str | None:
    error = await self._click(args)
    if error is None:
      await self.session.call(
          self.session.keyboard.type(str(args.get("text", ""))[:500]), "type")
    return error

  async def _press(self, args: dict[str, Any]) -> str | None:
    if args.get("target") not in (None, "") and (error := await self._click(args)):
      return error
    key = str(args.get("key", ""))
    await self.session.call(self.session.keyboard.press(key), f"press {key}")
    return None

  async def _scroll(self, args: dict[str, Any]) -> str | None:
    s = self.session
    w, h = s.config.viewport
    await s.call(s.mouse.move(w / 2, h / 2), "scroll")
    await s.call(s.mouse.wheel(float(args.get("dx") or 0), float(args.get("dy") or 0)),
                 "scroll")
    return None

  async def _wait(self, args: dict[str, Any]) -> str | None:
    await asyncio.sleep(min(max(float(args.get("ms") or 0), 0.0), 5000.0) / 1000)
    return None

  async def _drag(self, args: dict[str, Any]) -> str | None:
    s, mouse = self.session, self.session.mouse
    source = await self._target(args.get("source"))
    if "error" in source:
      return source["error"]
    if args.get("target") not in (None, ""):
      target = await self._target(args["target"])
      if "error" in target:
        return target["error"]
      x, y = target["x"], target["y"]
    else:
      x, y = source["x"] + float(args.get("dx") or 0), source["y"] + float(args.get("dy") or 0)
    await s.call(mouse.move(source["x"], source["y"]), "drag")
    await s.call(mouse.down(), "drag")
    await s.call(mouse.move(x, y, steps=8), "drag")
    await s.call(mouse.up(), "drag")
    return None

  async def run(self, task, code: str, usage: collections.Counter
                ) -> tuple[dict[str, Any] | None, int]:
    """The conversation; returns (verdict or None, turns used)."""
    expected = expectations(task)
    try:
      self.snapshot = await self.observe()
    except (CallTimeout, JsError) as e:
      self.snapshot = f"(the page does not respond: {e})"
    errors = self.new_errors()
    lists = "\n".join(f"{d}:\n" + ("\n".join(f"- {t}" for t in expected[d]) or "(none)")
                      for d in DIMENSIONS)
    text = (f"## User query\n{task.request}\n\n## Expectations\n{lists}\n\n"
            f"## Page after loading\n{self.snapshot}")
    if errors:
      text += "\nErrors while loading:\n" + "\n".join(errors[:10])
    if self.opts.max_code_chars:
      text += f"\n\n## Code\n```html\n{code[:self.opts.max_code_chars]}\n```"
    parts = [{"type": "text", "text": text}]
    if (shot := await self.screenshot_part()) is not None:
      parts.append(shot)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _SYSTEM.format(turns=self.opts.max_turns)},
        {"role": "user", "content": parts}]
    deadline = time.monotonic() + self.opts.max_seconds
    turns = 0
    while turns < self.opts.max_turns and time.monotonic() < deadline:
      turns += 1
      message = await self.judge.complete_async(
          self.judge.payload(messages, tools=TOOLS, tool_choice="auto"), usage)
      verdict = await self._turn(message, messages, expected)
      if verdict is not None:
        return verdict, turns
      if self.opts.turn_screenshots and (shot := await self.screenshot_part()) is not None:
        messages.append({"role": "user", "content": [
            {"type": "text", "text": "The page now:"}, shot]})
    messages.append({"role": "user", "content": "No turns or time left: call done now."})
    message = await self.judge.complete_async(self.judge.payload(
        messages, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "done"}}),
        usage)
    return await self._turn(message, messages, expected, final=True), turns + 1

  async def _turn(self, message: dict[str, Any], messages: list[dict[str, Any]],
                  expected: dict[str, list[str]], final: bool = False
                  ) -> dict[str, Any] | None:
    calls = message.get("tool_calls") or []
    messages.append({"role": "assistant", "content": message.get("content") or "",
                     **({"tool_calls": calls} if calls else {})})
    if not calls:
      reply = _verdict_in_text(message.get("content") or "")
      if reply is not None:
        return _verdict(reply, expected)
      if not final:
        messages.append({"role": "user", "content": "Use the tools; call done to finish."})
      return None
    for call in calls:
      if not isinstance(call, dict):
        continue
      fn = call.get("function") or {}
      name = str(fn.get("name", ""))
      try:
        args = json.loads(fn.get("arguments") or "{}")
      except (json.JSONDecodeError, TypeError):
        args = None
      if name == "done":
        return _verdict(args, expected)
      if not isinstance(args, dict):
        result = "error: the arguments are not a JSON object"
      elif final:
        result = "error: only done is allowed now"
      else:
        try:
          result = await self.act(name, args)
        except (CallTimeout, JsError, ValueError) as e:  # ValueError: a non-numeric argument
          result = f"error: {e}"
      self.actions.append({"tool": name, "args": args, "result": result[:300]})
      messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
    return None


def _verdict_in_text(text: str) -> dict[str, Any] | None:
  """A verdict written as JSON in the message text (models that answer without tools)."""
  for obj in judge_lib.json_dicts(text):
    if any(d in obj for d in DIMENSIONS):
      return obj
  return None
