"""`--rubrics`: RCCA's own rubric evaluator on a benchmark's tasks, next to its score.

The converted tasks (and, without a responses file, the embedded answers) are written
into the output folder, evaluated by the ordinary evaluator (`rcca_jax.evaluate`; the
rubrics without a `check` go to the judge when one is given) into `DIR/rubrics.jsonl`,
and summarised as the gated reward and pass rate overall, per category and difficulty.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any, Sequence

from rcca_jax import evaluate
from rcca_jax.bench.inputs import Item
from rcca_jax.data import jsonl
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig


def evaluate_rubrics(tasks: Sequence[tasks_lib.Task], items: Sequence[Item], *,
                     out_dir: str, config: EvalConfig, workers: int) -> dict[str, Any]:
  """Evaluates every response with rubrics; returns {group: {n, reward_mean, pass_rate}}
  with groups `overall`, `category/NAME` and `difficulty/NAME`."""
  from rcca_jax.train import rollouts  # pylint: disable=import-outside-toplevel  # imports JAX
  tasks_path = os.path.join(out_dir, "tasks.jsonl")
  responses_path = os.path.join(out_dir, "rubric_responses.jsonl")
  out_path = os.path.join(out_dir, "rubrics.jsonl")
  tasks_lib.write_tasks(tasks_path, tasks)
  jsonl.write_lines(responses_path, ({"task_id": i.task_id, "sample_id": i.sample_id,
                                      "response": i.response}
                                     for i in items if i.error is None))
  evaluate.evaluate_files(tasks_path, responses_path, out_path, config=config,
                          workers=workers)
  by_id = {t.id: t for t in tasks}
  groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
  with open(out_path, encoding="utf-8") as f:
    for line in f:
      record = json.loads(line)
      task = by_id[record["task_id"]]
      for name in ("overall", f"category/{task.category or 'unknown'}",
                   f"difficulty/{task.difficulty or 'unknown'}"):
        groups[name].append(record)
  out = {}
  for name in sorted(groups, key=lambda g: (g != "overall", g)):
    stats = rollouts.record_stats(groups[name])
    out[name] = {"n": len(groups[name]), "reward_mean": stats["reward_mean"],
                 "pass_rate": stats["pass_rate"]}
  return out
