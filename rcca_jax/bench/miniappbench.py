"""MiniAppBench as its harness runs it: an agent judge uses each app, pass/fail per task.

Per response: no extractable app -> the task fails without a judge request; otherwise
the app is loaded in the contained page session and the agent judge
(`bench/agent_judge.py`) explores it and gives a verdict on intention, static and
dynamic. A task passes when every dimension with expectations is met; `score` is 100
for a pass and 0 otherwise, so means are pass rates in percent. A conversation that
ends without a verdict is counted as a failure (status `unparseable`).
"""

from __future__ import annotations

import collections
import time
from typing import Any, Sequence

from rcca_jax.bench import agent_judge
from rcca_jax.bench import screenshots
from rcca_jax.bench import summary as summary_lib
from rcca_jax.bench.inputs import Item
from rcca_jax.bench.pages import Pages
from rcca_jax.evaluation import extract as extract_lib
from rcca_jax.evaluation import judge as judge_lib

METRICS = ("overall", "intention", "static", "dynamic")


async def grade(pages: Pages, item: Item, *, judge: judge_lib.ChatClient,
                opts: agent_judge.Options, out_dir: str) -> dict[str, Any]:
  """One response's record (see the module docstring)."""
  record = item.base_record()
  extraction = extract_lib.extract_app(item.response)
  if extraction is None:
    return {**record, "score": 0.0, "passed": False, "status": "no_app",
            "verdicts": {d: False for d in agent_judge.DIMENSIONS}, "usage": {}}
  usage: collections.Counter = collections.Counter()
  async with pages.page() as session:
    await session.begin_app()
    start = time.monotonic()
    load = await session.load(extraction.html)
    agent = agent_judge.Agent(session, judge, opts, out_dir, screenshots.file_stem(item))
    try:
      verdict, turns = await agent.run(item.task, extraction.html, usage)
    except judge_lib.JudgeError as e:
      return {**record, "score": None, "status": "judge_error", "error": str(e),
              "usage": dict(usage)}
  record.update(turns=turns, actions=agent.actions, screenshots=agent.screenshots,
                usage=dict(usage), seconds=round(time.monotonic() - start, 2))
  if not load.ok:
    record["render_errors"] = [load.reason]
  if verdict is None:
    return {**record, "score": 0.0, "passed": False, "status": "unparseable",
            "verdicts": {d: False for d in agent_judge.DIMENSIONS}}
  reason = verdict.pop("reason")
  passed = all(v is not False for v in verdict.values())
  return {**record, "score": 100.0 if passed else 0.0, "passed": passed,
          "status": "scored", "verdicts": verdict, "reason": reason}


def _values(r: dict[str, Any]) -> dict[str, float]:
  verdicts = r.get("verdicts") or {}
  out = {"score": float(r["score"])}
  for d in agent_judge.DIMENSIONS:
    out[d] = 0.0 if verdicts.get(d) is False else 100.0  # None (no expectations) is met
  return out


def summarize(records: Sequence[dict[str, Any]], *, judge_model: str) -> dict[str, Any]:
  """Pass rates (percent) overall and per dimension, by domain (category) and difficulty."""
  graded = [r for r in records if r["status"] in ("scored", "no_app", "unparseable")]
  values = [_values(r) for r in graded]
  out: dict[str, Any] = {"benchmark": "miniappbench", "judge_model": judge_model,
                         "overall": summary_lib.mean([v["score"] for v in values])}
  for d in agent_judge.DIMENSIONS:
    out[d] = summary_lib.mean([v[d] for v in values])
  out.update(by_category=summary_lib.grouped(graded, "category", _values),
             by_difficulty=summary_lib.grouped(graded, "difficulty", _values),
             counts=summary_lib.counts(records), usage=summary_lib.usage_total(records))
  return out
