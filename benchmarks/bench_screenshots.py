"""Seconds per app of ArtifactsBench's screenshots + judge-request building (judge excluded).

  .venv/bin/python benchmarks/bench_screenshots.py [--apps 24] [--workers 3]
      [--screenshots 3] [--interval 1.0]

Apps: the reference apps of data/tasks/dev.jsonl (the project's corpus), as responses.
- bench: the production path (`bench.resumable.run` with `artifactsbench.render_request`):
  N concurrent pages, each app loaded on a fresh origin, `--screenshots` PNGs
  `--interval` s apart written to disk, the request (question, checklist, code,
  screenshots as data URLs) built and serialised as it would be sent.
- baseline: one page, load + one screenshot per app, sequentially (measured in the
  same run on the same apps).
Prints s/app for both, their ratio and whether bench meets the target (<= 1.5 s/app on
2 cores; most of an app's time is the protocol's wait between screenshots, which
concurrent pages overlap).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import pathlib
import tempfile
import time

from rcca_jax.bench import artifactsbench
from rcca_jax.bench import resumable
from rcca_jax.bench import screenshots
from rcca_jax.bench.inputs import Item
from rcca_jax.bench.pages import Pages, Worker
from rcca_jax.data import chat
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation.config import EvalConfig

DEV = pathlib.Path(__file__).resolve().parent.parent / "data" / "tasks" / "dev.jsonl"
TARGET_S = 1.5


def _items(n: int) -> list[Item]:
  tasks = [t for t in tasks_lib.load_tasks(DEV) if t.reference][:n]
  return [Item(i, t.id, 0, chat.format_response(t.reference), t)
          for i, t in enumerate(tasks)]


async def _render_only(pages: Pages, item: Item, *,
                       opts: artifactsbench.Options, out_dir: str) -> dict:
  record, messages = await artifactsbench.render_request(pages, item, opts=opts,
                                                         out_dir=out_dir)
  payload = json.dumps({"model": "m", "messages": messages})
  return {**record, "status": "scored", "request_bytes": len(payload)}


def bench(items: list[Item], config: EvalConfig, workers: int,
          opts: artifactsbench.Options) -> tuple[float, list[dict]]:
  with tempfile.TemporaryDirectory() as out:
    start = time.perf_counter()
    records = resumable.run(items, functools.partial(_render_only, opts=opts, out_dir=out),
                            out_dir=out, config=config, workers=workers)
    return (time.perf_counter() - start) / len(items), records


async def _baseline(items: list[Item], config: EvalConfig) -> float:
  worker = Worker(config)
  session = await worker.session()
  try:
    start = time.perf_counter()
    for item in items:
      await session.begin_app()
      await session.load(item.task.reference)
      await screenshots.screenshot(session)
    return (time.perf_counter() - start) / len(items)
  finally:
    await worker.close()


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--apps", type=int, default=24)
  p.add_argument("--workers", type=int, default=3)
  p.add_argument("--screenshots", type=int, default=3)
  p.add_argument("--interval", type=float, default=1.0)
  args = p.parse_args()
  items = _items(args.apps)
  config = EvalConfig(viewport=(1280, 800))
  opts = artifactsbench.Options(args.screenshots, args.interval)
  baseline = asyncio.run(_baseline(items, config))
  per_app, records = bench(items, config, args.workers, opts)
  shots = sum(len(r["screenshots"]) for r in records)
  size = sum(r["request_bytes"] for r in records) / len(records)
  print(f"cores {os.cpu_count()}, {len(items)} apps, {args.workers} pages, "
        f"{args.screenshots} screenshots {args.interval:g} s apart")
  print(f"baseline (load + 1 screenshot, one page): {baseline:.3f} s/app")
  print(f"bench (screenshots + request): {per_app:.3f} s/app ({shots} PNGs, "
        f"request {size / 1e6:.2f} MB/app), ratio to baseline {per_app / baseline:.2f}")
  print(f"target <= {TARGET_S} s/app: {'met' if per_app <= TARGET_S else 'NOT met'}")


if __name__ == "__main__":
  main()
