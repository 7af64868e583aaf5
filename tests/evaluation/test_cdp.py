"""The DevTools pipe: launch errors, command errors, events, a dead browser."""

import asyncio
import os
import signal

from absl.testing import absltest
import pytest

from rcca_jax.evaluation import browser
from rcca_jax.evaluation import cdp


class LaunchErrorTest(absltest.TestCase):

  def test_a_browser_that_exits_at_start_up_is_a_clear_error(self):
    async def go():
      await cdp.launch("/bin/sh", ["-c", "echo no display here >&2; exit 3"], timeout=5.0)
    with self.assertRaisesRegex(RuntimeError, r"exited at start-up; its stderr: .*no display"):
      asyncio.run(go())


@pytest.mark.browser
class ConnectionTest(absltest.TestCase):

  def test_commands_events_errors_and_death(self):
    async def go():
      conn = await cdp.launch(browser.find_chromium(), [*browser.PLAYWRIGHT_SWITCHES,
                                                        *browser.launch_args(256)], 30.0)
      try:
        attached = []
        conn.browser.on("Target.attachedToTarget", attached.append)
        conn.browser.on("Target.attachedToTarget", lambda e: 1 / 0)  # a broken listener
        await conn.browser.send("Target.setAutoAttach", {
            "autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})
        target = await conn.browser.send("Target.createTarget", {"url": "about:blank"})
        await asyncio.sleep(0.2)
        self.assertEqual([e["targetInfo"]["targetId"] for e in attached], [target["targetId"]])
        page = conn.session(attached[0]["sessionId"])
        answer = await page.send("Runtime.evaluate", {"expression": "6 * 7"})
        self.assertEqual(answer["result"]["value"], 42)
        with self.assertRaisesRegex(cdp.ProtocolError, "No.such.method"):
          await page.send("No.such.method")
        pending = page.send("Runtime.evaluate", {
            "expression": "new Promise(() => {})", "awaitPromise": True})
        os.killpg(conn.process.pid, signal.SIGKILL)
        with self.assertRaises(cdp.Disconnected):
          await asyncio.wait_for(pending, 5.0)
        self.assertTrue(conn.closed)
        with self.assertRaises(cdp.Disconnected):
          await page.send("Runtime.evaluate", {"expression": "1"})
      finally:
        await conn.close(1.0)
      self.assertFalse(os.path.exists(conn.user_data_dir))
    asyncio.run(go())


if __name__ == "__main__":
  absltest.main()
