"""benchmarks/least_work.py: it does the actions and reads of the example apps' rubrics
(real Chromium), and refuses an app it cannot act on rather than pricing it."""

import asyncio
import importlib.util
import pathlib
import sys

from absl.testing import absltest

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.page_session import PageSession

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_script():
  spec = importlib.util.spec_from_file_location(
      "least_work", REPO / "benchmarks" / "least_work.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module
  spec.loader.exec_module(module)
  return module


lw = load_script()
TASKS = {t.id: t for t in tasks_lib.load_tasks(REPO / "data" / "examples" / "tasks.jsonl")
         if t.reference}


class LeastWorkTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.loop = asyncio.new_event_loop()
    self.session = PageSession(EvalConfig())
    self.loop.run_until_complete(self.session.start())

  def tearDown(self):
    self.loop.run_until_complete(self.session.close())
    self.loop.close()
    super().tearDown()

  def run_app(self, task, html=None):
    return self.loop.run_until_complete(
        lw.run_app(self.session, task, html or lw.app_html(task)))

  def test_reads_what_the_actions_did(self):
    # Per load: the shared read-only rubrics' reads, then those of the rubric that acts.
    self.assertEqual(self.run_app(TASKS["counter-0001"]),
                     [["0", "48px", "2"], ["0"], ["-1"]])   # + +; + reset; -
    self.assertEqual(self.run_app(TASKS["todo-0001"]),
                     [[True, 0, "pointer", 1, "Milk"], [0], [1]])  # fill+click; ""; Enter
    self.assertEqual(self.run_app(TASKS["color-0001"]),     # select; select; check
                     [["Selected: red", "Selected: blue"], ["rgb(0, 128, 0)"], ["dark"]])

  def test_every_example_reference_runs(self):
    for task in TASKS.values():
      with self.subTest(task.id):
        values = self.run_app(task)
        self.assertLen(values, len(lw.plan_loads(task, EvalConfig())))
        self.assertTrue(all(values), values)

  def test_an_app_it_cannot_act_on_is_refused(self):
    task = TASKS["counter-0001"]
    html = lw.app_html(task).replace('id="inc"', 'id="other"')
    with self.assertRaisesRegex(RuntimeError, "cannot click"):
      self.run_app(task, html)


if __name__ == "__main__":
  absltest.main()
