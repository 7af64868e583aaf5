"""A judge that misbehaves never gives a verdict it did not give: a real loopback HTTP
server that hangs, fails, rate-limits with Retry-After or answers something else than
the chat schema (docs/faults.md#2-the-judge)."""

import email.utils
import importlib.util
import json
import pathlib
import sys
import time

from absl.testing import absltest, parameterized

from experiments import tiny_cpu
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import evaluator
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.record import JUDGE_FAILED, UNSCORABLE, RubricResult
from rcca_jax.train import config_check

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "fault_matrix.py"
_SPEC = importlib.util.spec_from_file_location("fault_matrix", _PATH)
fault_matrix = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("fault_matrix", fault_matrix)
_SPEC.loader.exec_module(fault_matrix)


def _grade(actions, **client):
  server = fault_matrix.JudgeServer(actions)
  judge = judge_lib.Judge(server.base, "m", **client)
  try:
    start = time.monotonic()
    verdict = judge.grade("A page", "Shows Hi", "<h1>Hi</h1>")
    return verdict, time.monotonic() - start, server
  finally:
    server.close()


class JudgeFaultsTest(parameterized.TestCase):

  def test_a_judge_that_never_answers_costs_at_most_its_budget(self):
    verdict, seconds, server = _grade([("hang", 8.0)] * 3, timeout=20.0, retries=2,
                                      budget=1.5)
    self.assertIsNone(verdict.passed)
    self.assertIn("judge time budget of 1.5s spent", verdict.reason)
    # The budget cuts the first try's timeout to 1.5 s; ending it and giving up takes
    # well under the 0.5 s allowed here (measured < 0.05 s).
    self.assertLess(seconds, 1.5 + 0.5)
    self.assertLen(server.times, 1)

  @parameterized.parameters(429, 503)
  def test_retry_after_seconds_is_waited_instead_of_the_back_off(self, status):
    verdict, _, server = _grade([(status, {"Retry-After": "1"})], retries=2, budget=10.0)
    self.assertIs(verdict.passed, True)
    waited = server.times[1] - server.times[0]
    # 1 s asked; the exponential back-off's first wait would be 0.5 s.
    self.assertGreaterEqual(waited, 1.0)
    self.assertLess(waited, 1.0 + 0.4)

  def test_retry_after_as_a_date_and_past_the_budget(self):
    when = email.utils.formatdate(time.time() + 2.0, usegmt=True)
    verdict, _, server = _grade([(429, {"Retry-After": when})], retries=2, budget=10.0)
    self.assertIs(verdict.passed, True)
    self.assertGreaterEqual(server.times[1] - server.times[0], 0.9)  # 1-2 s: whole seconds
    verdict, seconds, server = _grade([(503, {"Retry-After": "30"})], retries=2, budget=2.0)
    self.assertIsNone(verdict.passed)  # waiting 30 s would spend the budget: stop now
    self.assertIn("next wait 30s", verdict.reason)
    self.assertLess(seconds, 1.0)

  @parameterized.parameters(
      ("<html>busy</html>", "the reply is not JSON"),
      ('{"error": "overloaded"}', "not a chat-completions reply"),
      ('{"choices": [{"message": "text"}]}', "message is not an object"))
  def test_bodies_off_the_schema_are_transport_failures(self, body, reason):
    verdict, _, server = _grade([("body", body)] * 2, retries=1, budget=10.0)
    self.assertIsNone(verdict.passed)
    self.assertIn(reason, verdict.reason)
    self.assertLen(server.times, 2)  # retried

  def test_server_errors_are_retried_then_ungraded(self):
    verdict, _, server = _grade([(500, {})] * 3, retries=2, budget=10.0)
    self.assertIsNone(verdict.passed)
    self.assertIn("HTTP Error 500", verdict.reason)
    self.assertLen(server.times, 3)

  def test_the_api_key_is_not_in_the_repr(self):
    client = judge_lib.ChatClient("http://127.0.0.1:1", "m", api_key="sk-secret-123")
    self.assertNotIn("sk-secret-123", repr(client))
    self.assertNotIn("sk-secret-123", repr(judge_lib.Judge("http://127.0.0.1:1", "m",
                                                           api_key="sk-secret-123").client))


TASK = tasks_lib.parse_task({
    "id": "j", "request": "A greeting page",
    "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "Shows Hi"},
                {"id": "r2", "kind": "initial", "level": "behavior", "text": "Friendly"}]})


class OutageIsNoVerdictTest(absltest.TestCase):

  def _record(self, rubrics, **config):
    return evaluator.build_record(TASK, 0, [True, True, True], rubrics, (0, 10), [],
                                  EvalConfig(**config)).to_json()

  def test_an_outage_never_raises_a_reward(self):
    failed = RubricResult("r2", False, "critical", "judge: missing")
    outage = RubricResult("r2", None, None, JUDGE_FAILED + "HTTPError: HTTP Error 500")
    graded = self._record([RubricResult("r1", True), failed])
    during = self._record([RubricResult("r1", True), outage])
    self.assertLess(graded["reward"], 1.0)
    self.assertIsNone(during["reward"])
    self.assertEqual(during[UNSCORABLE],
                     "1 of 2 rubrics ungraded by the judge: HTTPError: HTTP Error 500")
    dropped = self._record([RubricResult("r1", True), outage], partial_judge="drop")
    self.assertEqual(dropped["reward"], 1.0)  # the old rule, by name: it rises
    self.assertNotIn(UNSCORABLE, dropped)

  def test_config_check_refuses_a_judge_budget_past_the_deadline(self):
    config = tiny_cpu.get_config()
    tasks = self.create_tempfile("tasks.jsonl", content=json.dumps(TASK.to_json()) + "\n")
    config.data.train_tasks = tasks.full_path
    config.eval.evaluator.update(judge_url="http://127.0.0.1:1", judge_model="m",
                                 judge_budget=50.0, response_deadline=90.0)
    problems = config_check.problems(config, num_devices=1)
    self.assertIn(f"eval.evaluator.judge_budget (50s) x 2 judged rubrics (a task of "
                  f"{tasks.full_path}) = 100s does not fit eval.evaluator.response_deadline "
                  "(90s): lower the judge budget or raise the deadline", problems)
    config.eval.evaluator.judge_budget = 40.0
    self.assertEqual(config_check.problems(config, num_devices=1), [])


if __name__ == "__main__":
  absltest.main()
