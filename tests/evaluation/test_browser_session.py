"""The contained page: fresh origins, recycling, crash and browser-death recovery."""

import asyncio
import dataclasses
import os
import signal
import time

from absl.testing import absltest
import pytest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import browser
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
from rcca_jax.evaluation import page_session
from rcca_jax.evaluation import pool
from rcca_jax.evaluation.page_session import PageCrashed, PageSession

TASK = tasks_lib.parse_task({
    "id": "s", "request": "heading",
    "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "Hi",
                 "check": 'expect text "h1" == "Hi"'}]})
GOOD = "```html\n<h1>Hi</h1>\n```"


class BrowserLocatorTest(absltest.TestCase):

  def test_find_chromium_is_executable(self):
    path = browser.find_chromium()
    self.assertIsNotNone(path)
    self.assertTrue(os.access(path, os.X_OK))

  def test_a_headless_shell_comes_before_a_full_browser(self):
    cache = self.create_tempdir()
    for rel in ("chromium-1200/chrome-linux/chrome",
                "chromium_headless_shell-1200/chrome-linux/headless_shell"):
      path = cache.create_file(rel).full_path
      os.chmod(path, 0o755)
    with absltest.mock.patch.multiple(browser, _SYSTEM_SHELLS=(), _SYSTEM_BROWSERS=()), \
         absltest.mock.patch.object(browser.shutil, "which", return_value=None), \
         absltest.mock.patch.dict(os.environ, {"PLAYWRIGHT_BROWSERS_PATH": cache.full_path}):
      os.environ.pop("RCCA_CHROMIUM", None)
      self.assertTrue(browser.find_chromium().endswith("chrome-linux/headless_shell"))
      os.remove(browser.find_headless_shell())
      self.assertIsNone(browser.find_headless_shell())
      self.assertTrue(browser.find_chromium().endswith("chromium-1200/chrome-linux/chrome"))

  def test_launch_args_cap_the_heap(self):
    args = browser.launch_args(123)
    self.assertIn("--js-flags=--max-old-space-size=123", args)
    self.assertIn("--no-sandbox", args)

  @pytest.mark.browser
  def test_launch_switches_and_features_are_playwrights(self):
    # We launch Chromium ourselves: its switches must be those Playwright launches it
    # with (the pages must behave the same), and since Chromium keeps only the last
    # --disable-features, ours must repeat Playwright's list.
    from playwright.async_api import async_playwright  # pylint: disable=import-outside-toplevel

    def split(arguments):
      switches = {a for a in arguments if a.startswith("--")
                  and not a.startswith(("--user-data-dir=", "--remote-debugging-"))}
      features = {}
      for a in list(switches):
        if a.startswith(("--disable-features=", "--enable-features=")):
          switches.discard(a)
          name, value = a.split("=", 1)
          features.setdefault(name, set()).update(f for f in value.split(",") if f)
      return switches, features

    def browser_command_line() -> list[str]:
      # The browser process: the one descendant started with the DevTools pipe.
      for pid in pool.descendants(os.getpid()):
        try:
          with open(f"/proc/{pid}/cmdline", "rb") as f:
            arguments = f.read().decode().split("\0")
        except OSError:
          continue
        if "--remote-debugging-pipe" in arguments:
          return arguments
      raise AssertionError("no browser process found")

    async def command_lines():
      async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=browser.find_chromium())
        try:
          theirs = browser_command_line()
        finally:
          await b.close()
      session = PageSession(EvalConfig())
      await session.start()
      try:
        ours = browser_command_line()
      finally:
        await session.close()
      return theirs, ours

    theirs, ours = asyncio.run(command_lines())
    (their_switches, their_features), (our_switches, our_features) = split(theirs), split(ours)
    self.assertGreater(len(their_switches), 20)
    self.assertEqual(their_switches - our_switches, set())
    for name in ("--disable-features", "--enable-features"):
      self.assertTrue(their_features[name], name)
      self.assertEqual(their_features[name] - our_features[name], set(), name)
    self.assertIn("RenderDocument", our_features["--disable-features"])


@pytest.mark.browser
class PageSessionTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.loop = asyncio.new_event_loop()
    self.session = PageSession(EvalConfig(load_timeout=2.0, recycle_context_after=3))
    self.loop.run_until_complete(self.session.start())

  def tearDown(self):
    self.loop.run_until_complete(self.session.close())
    self.loop.close()
    super().tearDown()

  def run_async(self, coro):
    return self.loop.run_until_complete(coro)

  def test_every_load_gets_a_fresh_origin_and_globals(self):
    seen = []
    for _ in range(5):  # crosses a context recycle
      self.run_async(self.session.begin_app())
      load = self.run_async(self.session.load(
          "<script>const x = 1; localStorage.setItem('n', String("
          "Number(localStorage.getItem('n') || 0) + 1));</script>"))
      self.assertTrue(load.ok, load.reason)
      seen.append(self.run_async(self.session.js(
          "() => [location.origin, localStorage.getItem('n')]", main_world=True)))
      self.assertEqual(self.session.log.exceptions, [])  # no `const x` redeclaration
    self.assertLen({origin for origin, _ in seen}, 5)
    self.assertEqual({n for _, n in seen}, {"1"})
    self.assertEqual(self.session.restarts, 0)  # planned recycling is not a failure

  def test_window_name_does_not_carry_over_to_the_next_app(self):
    load = self.run_async(self.session.load("<script>window.name = 'from app 1';</script>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual(self.run_async(self.session.js("() => window.name", main_world=True)),
                     "from app 1")
    load = self.run_async(self.session.load(
        "<iframe name='inner' srcdoc='<p>x</p>'></iframe>"
        "<script>document.title = '[' + window.name + ']';</script>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual(self.run_async(self.session.js(
        "() => [document.title, frames[0].name]", main_world=True)), ["[]", "inner"])

  def test_beforeunload_prompt_is_not_logged_against_the_next_load(self):
    load = self.run_async(self.session.load(
        "<button id='b' style='width:90px;height:40px'>b</button><script>"
        "onbeforeunload = (e) => { e.preventDefault(); return 'stay?'; };</script>"))
    self.assertTrue(load.ok, load.reason)
    self.run_async(self.session.mouse.click(40, 20))  # sticky user activation
    self.run_async(self.session.mouse.click(40, 20))
    load = self.run_async(self.session.load("<script>alert('mine');</script>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual(self.session.log.dialogs, [{"type": "alert", "message": "mine"}])

  def test_exceptions_in_the_frame_after_load_are_logged_when_load_returns(self):
    # The iframe's document loads (and settles) first: that must not end the main wait.
    load = self.run_async(self.session.load(
        "<iframe srcdoc='<p>inner</p>'></iframe><script>"
        "addEventListener('load', () => requestAnimationFrame(() => {"
        "  setTimeout(() => { throw new Error('late timer'); }, 0);"
        "  throw new Error('in frame'); }));</script>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual([e.message for e in self.session.log.exceptions],
                     ["Error: in frame", "Error: late timer"])

  def test_app_cannot_see_call_or_block_the_settle_signal(self):
    name = page_session._SETTLED_BINDING  # pylint: disable=protected-access
    load = self.run_async(self.session.load(
        f"<h1>t</h1><script>window.seen = typeof window.{name};"
        "addEventListener('load', (e) => { e.stopImmediatePropagation();"
        "  requestAnimationFrame(() => { throw new Error('after'); }); }, true);</script>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual([e.message for e in self.session.log.exceptions], ["Error: after"])
    self.assertEqual(self.run_async(self.session.js(
        f"() => [window.seen, typeof window.{name}]", main_world=True)),
        ["undefined", "undefined"])
    self.assertEqual(self.run_async(self.session.js(f"() => typeof globalThis.{name}")),
                     "function")

  def test_hang_in_a_timer_after_load_fails_the_load_and_recovers(self):
    start = time.monotonic()
    load = self.run_async(self.session.load(
        "<h1>x</h1><script>onload = () => setTimeout(() => { for (;;) {} }, 0);</script>"))
    self.assertFalse(load.ok)
    self.assertIn("did not finish", load.reason)
    self.assertLess(time.monotonic() - start, 2.0 + 2.0 + 5.0)  # load, settle deadline, slack
    load = self.run_async(self.session.load("<h1>back</h1>"))
    self.assertTrue(load.ok, load.reason)
    self.assertEqual(self.run_async(self.session.js(
        "() => document.querySelector('h1').textContent")), "back")

  def test_isolated_world_is_not_disturbed_by_the_app(self):
    self.run_async(self.session.load(
        "<h1>t</h1><script>window.setTimeout = null; Array.prototype.map = null;"
        "document.querySelector = () => null;</script>"))
    self.run_async(self.session.js("() => 0", settle_first=True))
    self.assertEqual(self.run_async(self.session.js(
        "() => [1, 2].map((x) => x * 2).concat(document.querySelector('h1').textContent)")),
        [2, 4, "t"])

  def test_crash_is_detected_and_reset_recovers(self):
    # A long load deadline, so that the out-of-memory crash (not the deadline) ends it
    # even on a busy machine.
    self.session.config = dataclasses.replace(self.session.config, load_timeout=30.0)
    with self.assertRaises(PageCrashed):
      self.run_async(self.session.load(
          "<script>const a = []; for (;;) a.push(new Array(1e6).fill(2.5));</script>"))
    self.run_async(self.session.reset())
    load = self.run_async(self.session.load("<h1>back</h1>"))
    self.assertTrue(load.ok)

  def test_crash_in_the_frame_after_load_ends_the_load(self):
    # Long deadlines: the crash itself, not a deadline, must end the wait for the settle.
    # The settle's fallback timer too: at the default 50 ms it wins the race with the next
    # frame whenever a busy machine delays that frame (CI, two workers), and the load then
    # ends before the crash. The timer is written into each new document by the context,
    # hence the reset.
    self.session.config = dataclasses.replace(self.session.config, load_timeout=30.0,
                                              step_timeout=30.0, settle_ms=20_000.0)
    self.run_async(self.session.reset())
    start = time.monotonic()
    with self.assertRaises(PageCrashed):
      self.run_async(self.session.load(
          "<script>onload = () => requestAnimationFrame(() => { const a = [];"
          " for (;;) a.push(new Array(1e6).fill(2.5)); });</script>"))
    self.assertLess(time.monotonic() - start, 15.0)
    self.run_async(self.session.reset())
    self.assertTrue(self.run_async(self.session.load("<h1>back</h1>")).ok)

  def test_hang_after_load_is_terminated(self):
    self.run_async(self.session.load("<h1>x</h1><script>window.spin = () => { for (;;) {} };"
                                     "</script>"))
    # The app's timer starts the endless loop before our 50 ms timer can answer.
    with self.assertRaisesRegex(Exception, "did not finish"):
      self.run_async(self.session.js(
          "() => { setTimeout(window.spin, 0); return new Promise((r) => setTimeout(r, 50)); }",
          main_world=True, timeout=1.0))
    self.assertEqual(self.run_async(self.session.js("() => 2")), 2)


@pytest.mark.browser
class BrowserDeathTest(absltest.TestCase):

  def test_evaluator_survives_a_dead_browser(self):
    ev = Evaluator(EvalConfig())
    try:
      self.assertEqual(ev.evaluate(TASK, GOOD, 0).reward, 1.0)
      os.killpg(ev._session.cdp.connection.process.pid, signal.SIGKILL)  # the browser dies
      self.assertEqual(ev.evaluate(TASK, GOOD, 1).reward, 1.0)
      self.assertGreaterEqual(ev._session.restarts, 1)
    finally:
      ev.close()


if __name__ == "__main__":
  absltest.main()
