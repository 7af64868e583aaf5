"""Evaluate responses against tasks (docs/contracts.md#4-evaluation).

  python -m rcca_jax.evaluate --tasks T --responses R --out O [--workers N]
      [--judge-url U --judge-model M] [--no-localize] [--config EVAL.json]
      [--backend=pool|ray [--ray-address=ADDR]] [--cache DIR]

`--backend=ray` grades on Ray actors (`evaluation.ray_pool`): on the cluster at
`--ray-address`, or on a Ray instance started here and stopped at the end. `--cache DIR`
serves the records of (task, response, evaluator config) graded before from DIR
(`evaluation.grading_cache`) and stores the new ones there.

Writes one JSON record per response line of R, in order; prints a one-line summary;
exits 0 when every response got a record, 2 when the task file does not validate.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Iterable

from rcca_jax.credit.localize import localize_record
from rcca_jax.data import responses as responses_lib
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import evaluator as evaluator_lib
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation import grader as grader_lib
from rcca_jax.evaluation.pool import Job, PostProcess


def make_jobs(tasks: Iterable, items: Iterable) -> list[Job | dict]:
  """One job per response line; bad lines and unknown task ids become error records."""
  by_id = {t.id: t for t in tasks}
  jobs: list[Job | dict] = []
  for item in items:
    if isinstance(item, responses_lib.BadResponseLine):
      jobs.append(evaluator_lib.error_record(item.task_id, item.sample_id, item.error).to_json())
    elif item.task_id not in by_id:
      jobs.append(evaluator_lib.error_record(
          item.task_id, item.sample_id,
          f"line {item.line}: unknown task id {item.task_id!r}").to_json())
    else:
      jobs.append(Job(by_id[item.task_id], item.response, item.sample_id))
  return jobs


@dataclasses.dataclass
class Summary:
  """Aggregate numbers over a run's records."""

  count: int = 0
  reward_sum: float = 0.0
  gate_pass: dict[str, int] = dataclasses.field(
      default_factory=lambda: {"format": 0, "source": 0, "runtime": 0})
  ungraded: int = 0
  no_reward: int = 0  # responses whose rubrics are all ungraded (reward null)
  errors: int = 0

  def add(self, record: dict) -> None:
    self.count += 1
    if record["reward"] is None:
      self.no_reward += 1
    else:
      self.reward_sum += record["reward"]
    for gate, ok in record["gates"].items():
      self.gate_pass[gate] += ok is True
    if record.get("error"):
      self.errors += 1
    if record.get("rubric_score") is not None or record.get("no_reward"):
      self.ungraded += sum(r["passed"] is None for r in record["rubrics"])

  def line(self) -> str:
    n = max(self.count, 1)
    gates = " ".join(f"{g} {self.gate_pass[g] / n:.2f}" for g in ("format", "source", "runtime"))
    mean = self.reward_sum / max(self.count - self.no_reward, 1)
    return (f"evaluated {self.count} responses: mean reward {mean:.4f} | "
            f"gate pass rates: {gates} | ungraded rubrics {self.ungraded} | "
            f"no reward {self.no_reward} | errors {self.errors}")


def evaluate_files(tasks_path: str, responses_path: str, out_path: str, *,
                   config: EvalConfig, workers: int = 1,
                   post_process: PostProcess | None = None,
                   progress: bool | None = None, backend: str = "pool",
                   ray_address: str | None = None, cache_dir: str = "") -> Summary:
  """Runs the whole evaluation, each record passed through `post_process` in the
  workers (the CLI's: `localize_record`); raises TaskFileError when the task file is
  malformed."""
  tasks = tasks_lib.load_tasks(tasks_path)
  jobs = make_jobs(tasks, responses_lib.load_responses(responses_path))
  summary = Summary()
  pool = grader_lib.make_grader(config, workers=workers, post_process=post_process,
                                backend=backend, ray_address=ray_address,
                                cache_dir=cache_dir)
  try:
    with open(out_path, "w", encoding="utf-8") as out:
      for record in pool.run(jobs, progress=progress):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
        summary.add(record)
  finally:
    pool.close()
  return summary


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m rcca_jax.evaluate", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--tasks", required=True)
  parser.add_argument("--responses", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--workers", type=int, default=1)
  parser.add_argument("--judge-url", default=None, help="OpenAI-compatible base URL")
  parser.add_argument("--judge-model", default=None)
  parser.add_argument("--no-localize", action="store_true",
                      help="skip credit localization "
                           "(rcca_jax.credit.localize.localize_record)")
  parser.add_argument("--config", default=None, help="JSON file of EvalConfig overrides")
  parser.add_argument("--progress", action="store_true", help="always show a progress bar")
  parser.add_argument("--backend", choices=grader_lib.BACKENDS, default="pool",
                      help="grade in local processes or on Ray actors")
  parser.add_argument("--ray-address", default=None,
                      help="--backend=ray: the cluster (default: a local Ray instance)")
  parser.add_argument("--cache", default=None, metavar="DIR",
                      help="on-disk grading cache: responses graded before are not "
                           "graded again (evaluation.grading_cache)")
  args = parser.parse_args(argv)
  if bool(args.judge_url) != bool(args.judge_model):
    parser.error("--judge-url and --judge-model go together")
  if args.ray_address and args.backend != "ray":
    parser.error("--ray-address needs --backend=ray")
  overrides = {}
  if args.config:
    with open(args.config, encoding="utf-8") as f:
      overrides = json.load(f)
  if args.judge_url:
    overrides.update(judge_url=args.judge_url, judge_model=args.judge_model)
  try:
    config = EvalConfig.from_dict(overrides)
  except (ValueError, TypeError) as e:
    print(f"{args.config or 'evaluator config'}: {e}", file=sys.stderr)
    return 2
  try:
    summary = evaluate_files(args.tasks, args.responses, args.out, config=config,
                             workers=args.workers,
                             post_process=None if args.no_localize else localize_record,
                             progress=True if args.progress else None,
                             backend=args.backend, ray_address=args.ray_address,
                             cache_dir=args.cache or "")
  except tasks_lib.TaskFileError as e:
    for err in e.errors:
      print(err, file=sys.stderr)
    print(f"{args.tasks}: {len(e.errors)} error(s); nothing was evaluated", file=sys.stderr)
    return 2
  except ImportError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except OSError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(summary.line())
  return 0


if __name__ == "__main__":
  sys.exit(main())
