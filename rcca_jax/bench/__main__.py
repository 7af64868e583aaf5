"""Command line of `rcca_jax.bench` (see the package docstring).

Exit status: 0 when every response has a final record, 1 when some are still ungraded
(judge unreachable, request budget spent: a re-run with the same --out grades only
those), 2 for unusable input (task file, arguments).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Iterable, Sequence

from rcca_jax.bench import agent_judge
from rcca_jax.bench import artifactsbench
from rcca_jax.bench import inputs
from rcca_jax.bench import miniappbench
from rcca_jax.bench import resumable
from rcca_jax.bench import rubrics
from rcca_jax.bench import summary as summary_lib
from rcca_jax.bench import table
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import judge as judge_lib
from rcca_jax.evaluation.config import EvalConfig

MIN_VIEWPORT = (1024, 768)


def _viewport(text: str) -> tuple[int, int]:
  try:
    w, h = (int(v) for v in text.lower().split("x"))
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}") from None
  if w < MIN_VIEWPORT[0] or h < MIN_VIEWPORT[1]:
    raise argparse.ArgumentTypeError("the viewport must be at least "
                                     f"{MIN_VIEWPORT[0]}x{MIN_VIEWPORT[1]}")
  return w, h


def _warn(lines: Iterable[str]) -> None:
  for line in lines:
    print(f"warning: {line}", file=sys.stderr)


def _run_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--tasks", required=True,
                 help="the benchmark's task file, or a converted/project task file")
  p.add_argument("--responses", help="responses (JSON Lines; default: the answers embedded "
                 "in the task file)")
  p.add_argument("--out", required=True, help="output folder (a re-run resumes)")
  p.add_argument("--judge-url", required=True, help="OpenAI-compatible base URL")
  p.add_argument("--judge-model", required=True)
  p.add_argument("--workers", type=int, default=3, help="concurrent browser pages")
  p.add_argument("--viewport", type=_viewport, default=(1280, 800), help="WIDTHxHEIGHT")
  p.add_argument("--judge-timeout", type=float, default=180.0, help="seconds per request")
  p.add_argument("--judge-retries", type=int, default=2,
                 help="extra tries after a transport error (HTTP error, timeout)")
  p.add_argument("--max-requests", type=int, default=0,
                 help="judge requests for the whole run (0: no limit)")
  p.add_argument("--max-tokens", type=int, default=2048, help="per judge reply")
  p.add_argument("--rubrics", action="store_true",
                 help="also run RCCA's rubric evaluator on the same tasks")


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m rcca_jax.bench", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = p.add_subparsers(dest="command", required=True)
  ab = sub.add_parser("artifactsbench", help="screenshots + multimodal judge, 0-100")
  _run_args(ab)
  ab.add_argument("--screenshots", type=int, default=3)
  ab.add_argument("--interval", type=float, default=1.0, help="seconds between screenshots")
  ab.add_argument("--parse-retries", type=int, default=1,
                  help="extra requests after an unparseable reply")
  mb = sub.add_parser("miniappbench", help="agent judge, pass/fail per task")
  _run_args(mb)
  mb.add_argument("--max-turns", type=int, default=12)
  mb.add_argument("--max-seconds", type=float, default=180.0, help="per task")
  mb.add_argument("--no-turn-screenshots", action="store_true",
                  help="a screenshot only at the start (cheaper)")
  mb.add_argument("--show-code", type=int, default=0,
                  help="also show the judge the app's code, cut to N characters")
  tb = sub.add_parser("table", help="result folders side by side")
  tb.add_argument("dirs", nargs="+")
  tb.add_argument("--names", default="", help="comma-separated row names")
  tb.add_argument("--csv", help="also write the table as CSV to this file")
  return p


def _table(args: argparse.Namespace) -> int:
  try:
    header, rows = table.build(args.dirs, [n for n in args.names.split(",") if n])
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(table.to_markdown(header, rows), end="")
  if args.csv:
    with open(args.csv, "w", encoding="utf-8") as f:
      f.write(table.to_csv(header, rows))
  return 0


def _bench(args: argparse.Namespace) -> int:
  try:
    tasks, answers, problems = inputs.load_tasks(args.tasks, args.command)
    items = inputs.load_items(tasks, args.responses, answers)
  except tasks_lib.TaskFileError as e:
    _warn(e.errors)
    print(f"{args.tasks}: {len(e.errors)} error(s); nothing was graded", file=sys.stderr)
    return 2
  except (inputs.InputError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  _warn(problems)
  _warn(i.error for i in items if i.error)
  if not items:
    print("error: no responses to grade", file=sys.stderr)
    return 2
  config = EvalConfig(viewport=args.viewport)
  judge = judge_lib.ChatClient(args.judge_url, args.judge_model, timeout=args.judge_timeout,
                               retries=args.judge_retries, max_requests=args.max_requests,
                               max_tokens=args.max_tokens,
                               api_key=os.environ.get("RCCA_JUDGE_API_KEY"))
  if args.command == "artifactsbench":
    module, metrics = artifactsbench, artifactsbench.METRICS
    opts = artifactsbench.Options(args.screenshots, args.interval, args.parse_retries)
  else:
    module, metrics = miniappbench, miniappbench.METRICS
    opts = agent_judge.Options(args.max_turns, args.max_seconds,
                               not args.no_turn_screenshots, max_code_chars=args.show_code)
  grade = functools.partial(module.grade, judge=judge, opts=opts, out_dir=args.out)
  records = resumable.run(items, grade, out_dir=args.out, config=config, workers=args.workers)
  summary = module.summarize(records, judge_model=args.judge_model)
  if args.rubrics:
    summary["rubrics"] = rubrics.evaluate_rubrics(
        tasks, items, out_dir=args.out, workers=args.workers,
        config=EvalConfig(judge_url=args.judge_url, judge_model=args.judge_model))
  summary_lib.write_summary(args.out, summary, args.command, metrics)
  c = summary["counts"]
  ungraded = sum(n for s, n in c.items() if s not in (*resumable.FINAL, "responses"))
  overall = summary["overall"]
  print(f"{args.command}: {c['responses']} responses, overall "
        f"{'n/a' if overall is None else f'{overall:.2f}'}, "
        + ", ".join(f"{s} {n}" for s, n in c.items() if s != "responses")
        + f" -> {os.path.join(args.out, 'summary.md')}")
  return 1 if ungraded else 0


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  if args.command == "table":
    return _table(args)
  return _bench(args)


if __name__ == "__main__":
  sys.exit(main())
