"""The contained page: fresh origins, recycling, crash and browser-death recovery."""

import asyncio
import dataclasses
import os

from absl.testing import absltest
import pytest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import browser
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.evaluator import Evaluator
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

  def test_launch_args_cap_the_heap(self):
    args = browser.launch_args(123)
    self.assertIn("--js-flags=--max-old-space-size=123", args)
    self.assertIn("--no-sandbox", args)


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

  def test_isolated_world_is_not_disturbed_by_the_app(self):
    self.run_async(self.session.load(
        "<h1>t</h1><script>window.setTimeout = null; Array.prototype.map = null;"
        "document.querySelector = () => null;</script>"))
    self.run_async(self.session.settle())
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
      ev._loop.run_until_complete(ev._session._browser.close())  # the browser goes away
      self.assertEqual(ev.evaluate(TASK, GOOD, 1).reward, 1.0)
      self.assertGreaterEqual(ev._session.restarts, 1)
    finally:
      ev.close()


if __name__ == "__main__":
  absltest.main()
