"""The agent judge locates targets with the rubric runner's locator (evaluation/actions)."""

import asyncio
import tempfile

from absl.testing import absltest
import pytest

from rcca_jax.bench import agent_judge
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import PageSession

APP = """<button id="go" style="width:80px;height:30px" onclick="out.textContent='clicked'">Go
</button><span id="out">idle</span><button id="hid" style="visibility:hidden">x</button>
<p id="gone" style="display:none">nothing</p>"""


@pytest.mark.browser
class AgentTargetTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.loop = asyncio.new_event_loop()
    self.session = PageSession(EvalConfig(load_timeout=2.0))
    self.loop.run_until_complete(self.session.start())
    load = self.loop.run_until_complete(self.session.load(APP))
    self.assertTrue(load.ok, load.reason)
    self.agent = agent_judge.Agent(self.session, judge=None, opts=agent_judge.Options(),
                                   out_dir=tempfile.mkdtemp(), stem="t")

  def tearDown(self):
    self.loop.run_until_complete(self.session.close())
    self.loop.close()
    super().tearDown()

  def act(self, name, **args):
    return self.loop.run_until_complete(self.agent.act(name, args))

  def test_element_numbers_and_selectors_reach_the_same_element(self):
    page = self.loop.run_until_complete(self.agent.observe())
    self.assertIn('[0] button#go "Go"', page)
    self.assertEqual(self.act("read", target="0"), "button: 'Go'")
    self.assertEqual(self.act("read", target="#out"), "span: 'idle'")
    self.assertIn("ok.", self.act("click", target="0"))
    self.assertEqual(self.act("read", target="#out"), "span: 'clicked'")

  def test_unusable_targets_are_errors(self):
    self.loop.run_until_complete(self.agent.observe())
    self.assertEqual(self.act("read", target="#nope"), 'no element "#nope"')
    self.assertEqual(self.act("read", target="7"), 'no element "7"')
    self.assertTrue(self.act("read", target="a[").startswith("bad selector: "))
    self.assertEqual(self.act("read", target="#gone"), "element #gone is not visible")
    # visibility:hidden is not visible to the runner, so not to the agent either.
    self.assertEqual(self.act("click", target="#hid"), "error: element #hid is not visible")


if __name__ == "__main__":
  absltest.main()
