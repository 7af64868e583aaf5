"""Many faults in one long run: a seeded schedule of real faults, a restart after each,
and at the end the run must be the uninterrupted one bit for bit (issue 53).

  .venv/bin/python benchmarks/chaos_soak.py --seed S --faults N [--rl_steps 30] \
      [--root DIR] [--json OUT]

The job is the fault matrix's (`benchmarks/fault_matrix.py`: tiny_natural on dark_mode,
real Chromium grading, dev evaluations every 2 RL steps), `--rl_steps` RL steps from the
matrix's post-SFT directory. The schedule draws N faults at increasing RL steps from
`KINDS`: SIGTERM after a step's row, SIGTERM during a dev evaluation, SIGKILL after a
step's row, SIGKILL during a checkpoint save, SIGKILL then every file of the latest RL
checkpoint cut in half, SIGKILL then half a row appended to metrics.jsonl, and a grader's
Chromium killed under the running job. After each stop the job is run again (as
`rcca_jax.restart` would: exit 75 or a signal). Checked at the end against an
uninterrupted run of the same length (made once under ROOT): final RL state and `best/`
bitwise equal, every RL and eval row exactly once, each RL step's rewards equal (no fault
read as a verdict). Prints one line per fault and the verdict; `--json` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import sys
import time
from typing import Any, Callable

import fault_matrix as fm

KINDS = ("sigterm_step", "sigterm_eval", "sigkill_step", "sigkill_save", "torn_checkpoint",
         "torn_metrics", "chromium_killed")
EVAL_EVERY = 2  # the matrix job's eval.every_rl_steps


def job_args(rl_steps: int) -> list[str]:
  return fm.JOB + [f"--config.sft.num_steps={fm.SFT_STEPS}", "--config.sft.checkpoint_every=40",
                   f"--config.rl.num_steps={rl_steps}"]


def schedule(seed: int, faults: int, rl_steps: int) -> list[tuple[int, str]]:
  """`faults` (RL step, kind) pairs at distinct increasing steps in 1..rl_steps-1."""
  rng = random.Random(f"chaos:{seed}")
  if faults > rl_steps - 1:
    raise ValueError(f"{faults} faults need more than {rl_steps} RL steps")
  plan = []
  for step in sorted(rng.sample(range(1, rl_steps), faults)):
    kinds = [k for k in KINDS if k != "sigterm_eval" or step % EVAL_EVERY == 0]
    plan.append((step, rng.choice(kinds)))
  return plan


def _rl_rows(workdir: pathlib.Path) -> list[int]:
  return fm.steps(fm.rows_of(workdir), "rl")


def _saving(workdir: pathlib.Path) -> bool:
  rl = workdir / "checkpoints" / "rl"
  return rl.exists() and any("tmp" in p.name for p in rl.iterdir())


def _descendants(pid: int) -> list[int]:
  """Live descendant processes of `pid`."""
  parents: dict[int, int] = {}
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
          fields = f.read().rsplit(")", 1)[1].split()
        if fields[0] != "Z":
          parents[int(entry)] = int(fields[1])
      except OSError:
        continue
  out, frontier = [], [pid]
  while frontier:
    kids = [p for p, parent in parents.items() if parent in frontier]
    out += kids
    frontier = kids
  return out


def _chromium_of(pid: int) -> list[int]:
  found = []
  for p in _descendants(pid):
    try:
      with open(f"/proc/{p}/cmdline", "rb") as f:
        if b"chrom" in f.read().split(b"\0")[0]:
          found.append(p)
    except OSError:
      continue
  return found


def _tear_checkpoint(workdir: pathlib.Path) -> str:
  rl = workdir / "checkpoints" / "rl"
  saved = sorted(int(p.name) for p in rl.iterdir() if p.name.isdigit()) if rl.exists() else []
  if not saved:
    return "no RL checkpoint to tear"
  for path in (rl / str(saved[-1])).rglob("*"):
    if path.is_file() and path.stat().st_size > 1:
      with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
  return f"checkpoint {saved[-1]} torn"


def _tear_metrics(workdir: pathlib.Path) -> str:
  with open(workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
    f.write('{"step": 999, "stage": "rl", "loss": 0.1')
  return "half a row appended"


def _ready(workdir: pathlib.Path, proc, step: int, kind: str) -> Callable[[], bool]:
  """When fault (`step`, `kind`) strikes: after RL step `step`'s row (its dev evaluation
  then in flight for `sigterm_eval`), with a save in progress (`sigkill_save`: a later
  step's), with a grading browser alive (`chromium_killed`)."""
  if kind == "sigkill_save":
    return lambda: step in _rl_rows(workdir) and _saving(workdir)
  if kind == "chromium_killed":
    return lambda: step in _rl_rows(workdir) and bool(_chromium_of(proc.pid))
  return lambda: step in _rl_rows(workdir)


def soak(root: pathlib.Path, seed: int, faults: int, rl_steps: int) -> dict[str, Any]:
  """One seed's soak: the schedule, each fault's outcome, restarts and the verdict."""
  matrix = fm.Matrix(root)
  args = job_args(rl_steps)
  reference = matrix._baseline(f"reference_{rl_steps}", args, source="prepared")  # pylint: disable=protected-access
  workdir = root / "soak" / f"seed_{seed}"
  shutil.rmtree(workdir, ignore_errors=True)
  for old in workdir.parent.glob(f"{workdir.name}.log*"):
    old.unlink()
  shutil.copytree(matrix.prepared(), workdir)
  t0, plan, events, launches = time.time(), schedule(seed, faults, rl_steps), [], 0
  proc = None
  for step, kind in plan:
    if proc is None:
      proc, launches = fm.launch(root, workdir, args), launches + 1
    event: dict[str, Any] = {"step": step, "kind": kind}
    if not fm.wait_until(proc, _ready(workdir, proc, step, kind), fm.RUN_TIMEOUT):
      event["note"] = f"not reached: the job ended (exit {fm.finish(proc)})"
      proc = None
    elif kind == "chromium_killed":
      victims = _chromium_of(proc.pid)
      os.kill(victims[0], signal.SIGKILL)
      event["note"] = f"killed one of {len(victims)} Chromium processes; the job goes on"
    else:
      hit = time.monotonic()
      os.kill(proc.pid, signal.SIGTERM if kind.startswith("sigterm") else signal.SIGKILL)
      event.update(exit=fm.finish(proc), stop_s=round(time.monotonic() - hit, 1))
      proc = None
      if kind == "torn_checkpoint":
        event["note"] = _tear_checkpoint(workdir)
      elif kind == "torn_metrics":
        event["note"] = _tear_metrics(workdir)
    events.append(event)
    print(json.dumps({"seed": seed, **event}), flush=True)
  code = fm.finish(proc) if proc is not None else None
  while code != 0 and launches <= 2 * faults + 3:  # restarted as rcca_jax.restart would
    code, launches = fm.run(root, workdir, args), launches + 1
    if code not in (fm.EXIT_PREEMPTED, -signal.SIGKILL, 0):
      break
  problems = []
  if code != 0:
    problems.append(f"final run exit {code}: {fm.log_text(workdir)[-800:]}")
  rows, want = fm.rows_of(workdir), fm.rows_of(reference)
  if fm.steps(rows, "rl") != list(range(1, rl_steps + 1)):
    problems.append(f"RL rows {fm.steps(rows, 'rl')}")
  if fm.steps(rows, "eval") != fm.steps(want, "eval"):
    problems.append(f"eval rows {fm.steps(rows, 'eval')} vs {fm.steps(want, 'eval')}")
  got_r = {r["step"]: r["reward_mean"] for r in rows if r["stage"] == "rl"}
  want_r = {r["step"]: r["reward_mean"] for r in want if r["stage"] == "rl"}
  if got_r != want_r:
    problems.append("rewards differ at RL steps "
                    f"{sorted(s for s in want_r if got_r.get(s) != want_r[s])}")
  for part in ("rl", "best"):
    if not fm.bitwise_equal(workdir / "checkpoints" / part, reference / "checkpoints" / part):
      problems.append(f"{part}/ differs from the uninterrupted run")
  return {"seed": seed, "faults": faults, "rl_steps": rl_steps, "schedule": plan,
          "events": events, "launches": launches, "seconds": round(time.time() - t0),
          "ok": not problems, "problems": problems}


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--seeds", type=int, default=1, help="seeds SEED..SEED+N-1")
  p.add_argument("--faults", type=int, default=5)
  p.add_argument("--rl_steps", type=int, default=30)
  p.add_argument("--root", default="/tmp/rcca_chaos_soak")
  p.add_argument("--json", default="")
  args = p.parse_args()
  results = []
  for seed in range(args.seed, args.seed + args.seeds):
    result = soak(pathlib.Path(args.root), seed, args.faults, args.rl_steps)
    results.append(result)
    print(f"seed {seed}: {'ok' if result['ok'] else 'FAILED: ' + '; '.join(result['problems'])}"
          f" ({len(result['events'])} faults, {result['launches']} launches, "
          f"{result['seconds']} s)", flush=True)
    if args.json:
      with open(args.json, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
  print(f"{sum(r['ok'] for r in results)} passed, {sum(not r['ok'] for r in results)} failed")
  return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
  sys.exit(main())
