"""Our CDP mouse and keyboard give apps the same events as Playwright's."""

import asyncio

from absl.testing import absltest
from playwright.async_api import async_playwright
import pytest

from rcca_jax.evaluation import browser
from rcca_jax.evaluation import input_events
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import JsError, PageSession

# Records every input-related event the page sees (capture phase, on window).
RECORDER = """<!DOCTYPE html><html><body style="margin:0">
<input id="t" style="position:absolute;left:10px;top:10px;width:300px;height:30px">
<button id="b" style="position:absolute;left:10px;top:60px;width:100px;height:30px">b</button>
<div id="s" style="position:absolute;left:0;top:100px;width:400px;height:3000px"></div>
<script>
window.__log = [];
const kinds = ['keydown', 'keypress', 'keyup', 'beforeinput', 'input', 'mousedown', 'mouseup',
  'click', 'dblclick', 'mousemove', 'pointerdown', 'pointerup', 'wheel', 'focusin', 'contextmenu'];
for (const kind of kinds) addEventListener(kind, (e) => __log.push([
  e.type, e.target.id || e.target.nodeName, e.isTrusted, e.key, e.code, e.keyCode, e.which,
  e.location, e.repeat, e.shiftKey, e.ctrlKey, e.altKey, e.metaKey, e.button, e.buttons,
  e.detail, e.clientX, e.clientY, e.deltaX, e.deltaY, e.data, e.inputType,
  document.getElementById('t').value]), true);
</script></body></html>"""


# What the script's input makes the page see is compared, not what came before it: under
# Playwright the headless shell often reports a mouse move at (0, 0) during the load.
_CLEAR_LOG = "() => { window.__log.length = 0; }"


async def _script(mouse, keyboard) -> None:
  await mouse.click(100, 25)
  await keyboard.type("Hi, there! 1+1=2 [ok]? é~")
  for key in ("Enter", "Shift+A", "Shift+KeyB", "Control+a", "Backspace", "ArrowLeft",
              "Home", "End", "Delete", "+", "Shift++", "Space", "F2", "Escape", "Tab"):
    await keyboard.press(key)
  await keyboard.down("Shift")
  await keyboard.press("c")
  await keyboard.up("Shift")
  await keyboard.insert_text("xyz")
  await mouse.dblclick(50, 75)
  await mouse.move(200, 200, steps=3)
  await mouse.down()
  await mouse.move(210, 220)
  await mouse.up()
  await mouse.wheel(0, 120)


async def _playwright_log() -> list:
  width, height = EvalConfig().viewport
  async with async_playwright() as pw:
    b = await pw.chromium.launch(executable_path=browser.find_chromium(),
                                 args=browser.launch_args(EvalConfig().js_heap_mb))
    try:
      context = await b.new_context(viewport={"width": width, "height": height})
      page = await context.new_page()
      await context.route("**/*", lambda route: route.fulfill(
          status=200, content_type="text/html", body=RECORDER))
      await page.goto("http://app-1.rcca.invalid/")
      await page.evaluate(_CLEAR_LOG)
      await _script(page.mouse, page.keyboard)
      await page.wait_for_timeout(100)
      return await page.evaluate("window.__log")
    finally:
      await b.close()


async def _our_log() -> list:
  session = PageSession(EvalConfig())
  await session.start()
  try:
    load = await session.load(RECORDER)
    assert load.ok, load
    await session.js(_CLEAR_LOG, main_world=True)
    await _script(session.mouse, session.keyboard)
    await asyncio.sleep(0.1)
    return await session.js("() => window.__log", main_world=True)
  finally:
    await session.close()


class KeyLayoutTest(absltest.TestCase):

  def test_split_keys(self):
    self.assertEqual(input_events.split_keys("Control+Shift+A"), ["Control", "Shift", "A"])
    self.assertEqual(input_events.split_keys("+"), ["+"])
    self.assertEqual(input_events.split_keys("Shift++"), ["Shift", "+"])

  def test_layout_maps_codes_characters_and_modifiers(self):
    layout = input_events.US_LAYOUT
    self.assertEqual((layout["a"].code, layout["a"].text), ("KeyA", "a"))
    self.assertEqual((layout["A"].code, layout["A"].key, layout["A"].key_code), ("KeyA", "A", 65))
    self.assertEqual((layout["!"].code, layout["KeyA"].shifted.key), ("Digit1", "A"))
    self.assertEqual((layout["Enter"].text, layout["\n"].code), ("\r", "Enter"))
    self.assertEqual((layout["Shift"].code, layout["Shift"].location), ("ShiftLeft", 1))
    self.assertNotIn("Numpad5", {k.code for n, k in layout.items() if n == "5"})


@pytest.mark.browser
class InputParityTest(absltest.TestCase):

  def test_apps_see_the_same_events_as_with_playwright(self):
    theirs, ours = asyncio.run(_playwright_log()), asyncio.run(_our_log())
    self.assertGreater(len(theirs), 100)
    self.assertTrue(all(row[2] for row in ours))   # trusted
    for k, (a, b) in enumerate(zip(theirs, ours)):
      self.assertEqual(a, b, f"event {k}")
    self.assertEqual(len(theirs), len(ours))

  def test_unknown_key_is_a_js_error(self):
    async def go():
      session = PageSession(EvalConfig())
      await session.start()
      try:
        await session.load("<p>x</p>")
        with self.assertRaisesRegex(JsError, 'Unknown key: "Nope"'):
          await session.call(session.keyboard.press("Control+Nope"), "press")
      finally:
        await session.close()
    asyncio.run(go())


if __name__ == "__main__":
  absltest.main()
