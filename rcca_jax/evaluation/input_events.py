"""Trusted mouse and keyboard input over CDP (`Input.*`), as Playwright sends it.

`Mouse` and `Keyboard` dispatch the same `Input.dispatchMouseEvent` and
`Input.dispatchKeyEvent` parameters as Playwright's mouse and keyboard (US layout), so
apps see the same events with or without Playwright in between
(`tests/evaluation/test_input_events.py` compares the two on a page that records every event).
A key is a name from the layout ("Enter", "ArrowLeft", "a", "A", "KeyA", "+") optionally
after modifiers ("Control+Shift+K"; "ControlOrMeta" is Control here).
"""

from __future__ import annotations

import asyncio
import dataclasses
import string
from typing import Any, Awaitable, Callable

Send = Callable[[str, dict], Awaitable[Any]]

_BUTTON_MASKS = {"left": 1, "right": 2, "middle": 4}
_MODIFIER_BITS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}
_NUMPAD = 3


class UnknownKey(ValueError):
  """A key name that is not on the US layout."""


@dataclasses.dataclass(frozen=True)
class Key:
  code: str
  key: str
  key_code: int                 # windowsVirtualKeyCode (without left/right location)
  text: str = ""
  location: int = 0
  shifted: "Key | None" = None


def _layout() -> dict[str, Key]:
  """Key name -> key: by code ("KeyA", "Digit1", "Enter"), by the one character a key
  types ("a", "!"; not numpad keys), and the modifier names ("Shift" is the left one)."""
  rows: list[tuple[str, int, str, str | None]] = []   # code, keyCode, key, shifted key
  rows += [(f"Key{c}", ord(c), c.lower(), c) for c in string.ascii_uppercase]
  rows += [(f"Digit{d}", 48 + d, str(d), ")!@#$%^&*("[d]) for d in range(10)]
  rows += [("Backquote", 192, "`", "~"), ("Minus", 189, "-", "_"), ("Equal", 187, "=", "+"),
           ("BracketLeft", 219, "[", "{"), ("BracketRight", 221, "]", "}"),
           ("Backslash", 220, "\\", "|"), ("Semicolon", 186, ";", ":"),
           ("Quote", 222, "'", '"'), ("Comma", 188, ",", "<"), ("Period", 190, ".", ">"),
           ("Slash", 191, "/", "?"), ("Space", 32, " ", None)]
  named = {"Escape": 27, "Backspace": 8, "Tab": 9, "CapsLock": 20, "ContextMenu": 93,
           "PrintScreen": 44, "ScrollLock": 145, "Pause": 19, "PageUp": 33, "PageDown": 34,
           "Insert": 45, "Home": 36, "Delete": 46, "End": 35, "ArrowLeft": 37,
           "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40, "NumLock": 144}
  named.update({f"F{n}": 111 + n for n in range(1, 13)})
  layout: dict[str, Key] = {}
  for code, key_code, key, shifted in rows:
    shifted_key = Key(code, shifted, key_code, shifted) if shifted else None
    layout[code] = Key(code, key, key_code, key, shifted=shifted_key)
    layout[key] = Key(code, key, key_code, key)
    if shifted_key:
      layout[shifted] = shifted_key
  for code, key_code in named.items():
    layout[code] = Key(code, code, key_code)
  layout["Enter"] = Key("Enter", "Enter", 13, "\r")
  layout["\r"] = layout["\n"] = layout["Enter"]
  for name, key_code in (("Shift", 16), ("Control", 17), ("Alt", 18)):
    for side, location in (("Left", 1), ("Right", 2)):
      layout[name + side] = Key(name + side, name, key_code, location=location)
    layout[name] = layout[name + "Left"]
  layout["MetaLeft"] = Key("MetaLeft", "Meta", 91, location=1)
  layout["MetaRight"] = Key("MetaRight", "Meta", 92, location=2)
  layout["Meta"] = layout["MetaLeft"]
  for d in range(10):
    layout[f"Numpad{d}"] = Key(f"Numpad{d}", str(d), 96 + d, str(d), _NUMPAD)
  for code, key_code, key in (("NumpadMultiply", 106, "*"), ("NumpadAdd", 107, "+"),
                              ("NumpadSubtract", 109, "-"), ("NumpadDecimal", 110, "."),
                              ("NumpadDivide", 111, "/")):
    layout[code] = Key(code, key, key_code, key, _NUMPAD)
  layout["NumpadEnter"] = Key("NumpadEnter", "Enter", 13, "\r", _NUMPAD)
  return layout


US_LAYOUT = _layout()


def split_keys(combo: str) -> list[str]:
  """"Control+Shift+A" -> ["Control", "Shift", "A"]; a "+" right after a "+" (or alone)
  is the plus key."""
  keys, building = [], ""
  for char in combo:
    if char == "+" and building:
      keys.append(building)
      building = ""
    else:
      building += char
  keys.append(building)
  return keys


class Keyboard:
  """Key presses and typed text, with modifiers held between `down` and `up`."""

  def __init__(self, send: Send):
    self._send = send
    self._pressed: set[str] = set()      # codes
    self._modifiers: set[str] = set()

  def _describe(self, name: str) -> Key:
    name = "Control" if name == "ControlOrMeta" else name
    key = US_LAYOUT.get(name)
    if key is None:
      raise UnknownKey(f'Unknown key: "{name}"')
    if "Shift" in self._modifiers and key.shifted is not None:
      key = key.shifted
    if self._modifiers - {"Shift"}:      # a shortcut types no text
      key = dataclasses.replace(key, text="")
    return key

  def _mask(self) -> int:
    return sum(_MODIFIER_BITS[m] for m in self._modifiers)

  async def down(self, name: str) -> None:
    key = self._describe(name)
    auto_repeat = key.code in self._pressed
    self._pressed.add(key.code)
    if key.key in _MODIFIER_BITS:
      self._modifiers.add(key.key)
    await self._send("Input.dispatchKeyEvent", {
        "type": "keyDown" if key.text else "rawKeyDown", "modifiers": self._mask(),
        "windowsVirtualKeyCode": key.key_code, "code": key.code, "commands": [],
        "key": key.key, "text": key.text, "unmodifiedText": key.text,
        "autoRepeat": auto_repeat, "location": key.location,
        "isKeypad": key.location == _NUMPAD})

  async def up(self, name: str) -> None:
    key = self._describe(name)
    if key.key in _MODIFIER_BITS:
      self._modifiers.discard(key.key)
    self._pressed.discard(key.code)
    await self._send("Input.dispatchKeyEvent", {
        "type": "keyUp", "modifiers": self._mask(), "key": key.key,
        "windowsVirtualKeyCode": key.key_code, "code": key.code, "location": key.location,
        "isKeypad": key.location == _NUMPAD})

  async def press(self, combo: str) -> None:
    """Presses the modifiers in order, the key, and releases them in reverse order."""
    keys = split_keys(combo)
    for name in keys:
      self._describe(name)               # an unknown key fails before anything is sent
    for name in keys:
      await self.down(name)
    for name in reversed(keys):
      await self.up(name)

  async def insert_text(self, text: str) -> None:
    """Inserts text as an IME would: `input` events, no key events."""
    await self._send("Input.insertText", {"text": text})

  async def type(self, text: str) -> None:
    """Types each character: a key press where the layout has it, else inserted."""
    for char in text:
      if char in US_LAYOUT:
        await self.press(char)
      else:
        await self.insert_text(char)


class Mouse:
  """Pointer moves, button presses and the wheel, from the last position."""

  def __init__(self, send: Send):
    self._send = send
    self.x = self.y = 0.0
    self._buttons: set[str] = set()
    self._last = "none"

  def _mask(self) -> int:
    return sum(_BUTTON_MASKS[b] for b in self._buttons)

  def _moved(self, x: float, y: float) -> Awaitable[Any]:
    self.x, self.y = x, y
    return self._send("Input.dispatchMouseEvent", {
        "type": "mouseMoved", "button": self._last if self._buttons else "none",
        "buttons": self._mask(), "x": x, "y": y, "modifiers": 0,
        "force": 0.5 if self._buttons else 0})

  def _pressed(self, button: str, clicks: int) -> Awaitable[Any]:
    self._buttons.add(button)
    self._last = button
    return self._send("Input.dispatchMouseEvent", {
        "type": "mousePressed", "button": button, "buttons": self._mask(), "x": self.x,
        "y": self.y, "modifiers": 0, "clickCount": clicks, "force": 0.5})

  def _released(self, button: str, clicks: int) -> Awaitable[Any]:
    self._buttons.discard(button)
    return self._send("Input.dispatchMouseEvent", {
        "type": "mouseReleased", "button": button, "buttons": self._mask(), "x": self.x,
        "y": self.y, "modifiers": 0, "clickCount": clicks})

  async def move(self, x: float, y: float, steps: int = 1) -> None:
    x0, y0, steps = self.x, self.y, max(1, steps)
    for i in range(1, steps + 1):
      await self._moved(x0 + (x - x0) * i / steps, y0 + (y - y0) * i / steps)

  async def down(self, button: str = "left") -> None:
    await self._pressed(button, 1)

  async def up(self, button: str = "left") -> None:
    await self._released(button, 1)

  async def click(self, x: float, y: float, clicks: int = 1) -> None:
    """Moves there and presses and releases `clicks` times; the events are sent at
    once (Chromium handles them in order), as Playwright does without a delay."""
    sent = [self._moved(x, y)]
    for n in range(1, clicks + 1):
      sent += [self._pressed("left", n), self._released("left", n)]
    await asyncio.gather(*sent)

  async def dblclick(self, x: float, y: float) -> None:
    await self.click(x, y, clicks=2)

  async def wheel(self, dx: float, dy: float) -> None:
    await self._send("Input.dispatchMouseEvent", {
        "type": "mouseWheel", "x": self.x, "y": self.y, "modifiers": 0, "deltaX": dx,
        "deltaY": dy})
