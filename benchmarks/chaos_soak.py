"""Many faults in one long run: a seeded schedule of real faults, a restart after each,
and at the end the run must be the uninterrupted one bit for bit (issue 53).

  .venv/bin/python benchmarks/chaos_soak.py --seed S --faults N [--rl_steps 30] \
      [--kinds K1,K2,...] [--root DIR] [--json OUT]

The job is the fault matrix's (`benchmarks/fault_matrix.py`: tiny_natural on dark_mode,
real Chromium grading, dev evaluations every 2 RL steps), `--rl_steps` RL steps from the
matrix's post-SFT directory. The schedule draws N faults at increasing RL steps from
`KINDS` (or puts `--kinds`, one per fault, in a seeded order). At step N, after its row:
SIGTERM, SIGTERM during its dev evaluation, SIGKILL, SIGKILL during a checkpoint save (a
later step's), SIGKILL then every file of the latest RL checkpoint cut in half, SIGKILL
then half a row appended to metrics.jsonl, a grader's Chromium killed, the grading
cache's tmpfs filled up (`disk_full`). While step N's samples are graded (the pool's
worker busy: `GradingWatch`): SIGTERM, SIGKILL, the grading worker SIGKILLed (the job
goes on), and a burst of judge faults (`judge_burst`: 503s, timeouts and slow answers for
`BURST_SECONDS` from the step's first judge request). After each stop the job is run
again (as `rcca_jax.restart` would: exit 75 or a signal). Checked at the end against an
uninterrupted run of the same length (made once under ROOT): final RL state and `best/`
bitwise equal, every RL and eval row exactly once, each RL step's rewards equal (no fault
read as a verdict), and every burst and full disk met by the job.

A schedule with `judge_burst` runs the judge job (`judge_args`: every RL task carries
one judged rubric, graded by the soak's own judge server over HTTP) against its own
reference graded by the same judge, well-behaved; one with `disk_full` keeps the
grading cache on a tmpfs of its own (root only). Other schedules run the plain job.
Prints one line per fault and the verdict; `--json` keeps them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import fault_matrix as fm

KINDS = ("sigterm_step", "sigterm_eval", "sigkill_step", "sigkill_save", "torn_checkpoint",
         "torn_metrics", "chromium_killed", "sigterm_grading", "sigkill_grading",
         "worker_killed", "judge_burst", "disk_full")
GRADING = ("sigterm_grading", "sigkill_grading", "worker_killed")  # while step N is graded
STOPS = ("sigterm_step", "sigterm_eval", "sigkill_step", "sigkill_save", "torn_checkpoint",
         "torn_metrics", "sigterm_grading", "sigkill_grading")  # the job is run again
EVAL_EVERY = 2  # the matrix job's eval.every_rl_steps
# A judge burst: from the step's first judge request, for BURST_SECONDS, requests take
# these in turn (a 503 asking 1 s, a hang past the client's timeout, a bare 503, an
# answer after 1.5 s): about 8 s for one cycle. The job's judge settings (JUDGE_CONFIG:
# 3 s per request, 20 s per rubric) ride it out.
BURST_SECONDS = 10.0
BURST = (("503_retry_after_1s", (503, {"Retry-After": "1"})), ("timeout", ("hang", 5.0)),
         ("503", (503, {})), ("slow_1.5s", ("slow", 1.5)))
JUDGED_RUBRIC = {"id": "judged", "kind": "initial", "level": "rendering",
                 "text": "The page is laid out tidily in both themes"}
JUDGE_CONFIG = '''"""The chaos soak's judge job (written by benchmarks/chaos_soak.py): the fault
matrix's tiny_natural job whose RL tasks carry one judged rubric each; the judge's URL
comes by flag. A response a judge fault left unscorable is graded again, never trained
on masked (rl.max_unscorable=0)."""

from experiments import tiny_natural


def get_config():
  config = tiny_natural.get_config()
  config.data.train_tasks = {tasks!r}
  config.eval.evaluator.update(judge_url="", judge_model="soak-judge", judge_timeout=3.0,
                               judge_retries=40, judge_budget=20.0)
  config.rl.max_unscorable = 0.0
  return config
'''
CACHE_SIZE = "16m"      # the disk_full seeds' grading cache tmpfs
WORKER_GONE_S = 60.0    # an orphaned grading worker must exit within this of a SIGKILL


def job_args(rl_steps: int) -> list[str]:
  return fm.JOB + [f"--config.sft.num_steps={fm.SFT_STEPS}", "--config.sft.checkpoint_every=40",
                   f"--config.rl.num_steps={rl_steps}"]


def _fits(kind: str, step: int) -> bool:
  return kind != "sigterm_eval" or step % EVAL_EVERY == 0


def schedule(seed: int, faults: int, rl_steps: int, kinds: Optional[Sequence[str]] = None
             ) -> list[tuple[int, str]]:
  """`faults` (RL step, kind) pairs at distinct increasing steps in 1..rl_steps-1, each
  kind drawn from KINDS (sigterm_eval only at steps with a dev evaluation), or `kinds`
  (one per fault) in a seeded order, steps and order drawn again until they keep that
  rule."""
  rng = random.Random(f"chaos:{seed}")
  if faults > rl_steps - 1:
    raise ValueError(f"{faults} faults need more than {rl_steps} RL steps")
  if kinds is not None and (set(kinds) - set(KINDS) or len(kinds) != faults):
    raise ValueError(f"kinds {list(kinds)}: expected {faults} of {', '.join(KINDS)}")
  for _ in range(1000):
    steps = sorted(rng.sample(range(1, rl_steps), faults))
    if kinds is None:
      return [(step, rng.choice([k for k in KINDS if _fits(k, step)])) for step in steps]
    order = rng.sample(list(kinds), faults)
    if all(_fits(k, s) for s, k in zip(steps, order)):
      return list(zip(steps, order))
  raise ValueError(f"no {rl_steps}-step schedule puts {list(kinds)}' sigterm_eval at "
                   "steps with a dev evaluation")


# ---- the judge -----------------------------------------------------------------------

def verdict(request: dict[str, Any]) -> str:
  """The soak judge's answer, a function of the judged app alone: passed for about half
  the apps, a major failure otherwise, so a fault read as either shows in the rewards."""
  digest = hashlib.sha256(request["messages"][1]["content"].encode()).digest()
  passed = digest[0] % 2 == 0
  return json.dumps({"passed": passed, "severity": None if passed else "major",
                     "reason": "soak judge"})


class BurstJudge(fm.JudgeServer):
  """The matrix's judge server answering `verdict`, well-behaved until `arm()`: from the
  next request on, for `seconds`, requests take BURST's actions in turn; `bursts[i]`
  counts the actions burst i gave, by name."""

  def __init__(self):
    self.lock = threading.Lock()
    self.bursts: list[collections.Counter] = []
    self.armed: Optional[float] = None
    self.until = 0.0
    super().__init__(verdict=verdict)

  def arm(self, seconds: float) -> int:
    """Arms a burst of `seconds`; its index in `bursts`."""
    with self.lock:
      self.armed = seconds
      self.bursts.append(collections.Counter())
      return len(self.bursts) - 1

  def next_action(self) -> tuple[Any, Any]:
    with self.lock:
      now = time.monotonic()
      if self.armed is not None:
        self.until, self.armed = now + self.armed, None
      if now < self.until:
        burst = self.bursts[-1]
        name, action = BURST[sum(burst.values()) % len(BURST)]
        burst[name] += 1
        return action
    return super().next_action()


def write_judged_tasks(source: pathlib.Path, target: pathlib.Path) -> None:
  """`source`'s tasks, each with JUDGED_RUBRIC added, in `target` (rewritten only when
  its text would change)."""
  lines = []
  for line in source.read_text(encoding="utf-8").splitlines():
    if line.strip():
      task = json.loads(line)
      task["rubrics"] = task["rubrics"] + [JUDGED_RUBRIC]
      lines.append(json.dumps(task, ensure_ascii=False))
  _write_if_changed(target, "\n".join(lines) + "\n")


def _write_if_changed(path: pathlib.Path, text: str) -> None:
  if not path.exists() or path.read_text(encoding="utf-8") != text:
    path.write_text(text, encoding="utf-8")


def judge_args(root: pathlib.Path, rl_steps: int, url: str) -> list[str]:
  """The judge job's arguments (its config file and task file written under ROOT),
  graded by the judge at `url`."""
  tasks, config = root / "judged_train.jsonl", root / "judge_job.py"
  write_judged_tasks(fm.REPO / "data" / "tasks" / "train.jsonl", tasks)
  _write_if_changed(config, JUDGE_CONFIG.format(tasks=str(tasks)))
  return [f"--config={config}", *job_args(rl_steps)[1:],
          f"--config.eval.evaluator.judge_url={url}",
          "--allow_config_change=data.train_tasks,eval.evaluator.judge_*,rl.max_unscorable"]


# ---- the job's processes ---------------------------------------------------------------

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


def _cmdline(pid: int) -> bytes:
  try:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
      return f.read()
  except OSError:
    return b""


def _chromium_of(pid: int) -> list[int]:
  return [p for p in _descendants(pid) if b"chrom" in _cmdline(p).split(b"\0")[0]]


def grading_workers(pid: int) -> list[int]:
  """The grading pool's worker processes under `pid` (multiprocessing's spawned
  children; their browsers are not)."""
  return [p for p in _descendants(pid) if b"spawn_main" in _cmdline(p)]


def cpu_ticks(pid: int) -> Optional[int]:
  """User plus system CPU clock ticks `pid` has used (None once it is gone)."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except OSError:
    return None
  return None if fields[0] == "Z" else int(fields[11]) + int(fields[12])


def window_open(workdir: pathlib.Path, step: int) -> bool:
  """Whether RL step `step` is the one in flight: step `step` - 1's row (and its dev
  evaluation's, when due) written, step `step`'s not."""
  rows = fm.rows_of(workdir)
  rl, before = fm.steps(rows, "rl"), step - 1
  if step in rl or (before and before not in rl):
    return False
  return before % EVAL_EVERY != 0 or not before or ("rl", before) in fm.steps(rows, "eval")


class GradingWatch:
  """True while RL step `step`'s samples are being graded: its window is open
  (`window_open`) and a grading worker of job `pid` used CPU (at least MIN_TICKS in the
  last WINDOW_S seconds; an idle worker waits on its pipe and uses none). `busy` is
  that worker's pid, `workers` the workers seen then."""

  MIN_TICKS, WINDOW_S, RESCAN_S = 2, 0.5, 0.5

  def __init__(self, workdir: pathlib.Path, pid: int, step: int):
    self.workdir, self.pid, self.step = workdir, pid, step
    self.history: list[tuple[float, dict[int, int]]] = []
    self.workers: list[int] = []
    self.rescan = 0.0
    self.busy: Optional[int] = None

  def __call__(self) -> bool:
    if not window_open(self.workdir, self.step):
      self.history = []
      return False
    now = time.monotonic()
    if now >= self.rescan:
      self.workers, self.rescan = grading_workers(self.pid), now + self.RESCAN_S
    ticks = {p: t for p in self.workers if (t := cpu_ticks(p)) is not None}
    self.history = [(t, h) for t, h in self.history if t >= now - self.WINDOW_S]
    self.history.append((now, ticks))
    oldest = self.history[0][1]
    for p, t in ticks.items():
      if t - oldest.get(p, t) >= self.MIN_TICKS:
        self.busy = p
        return True
    return False


def _gone_after(pids: Sequence[int], limit: float) -> Optional[float]:
  """Seconds until every process of `pids` has exited (None: some outlived `limit`)."""
  start = time.monotonic()
  while any(cpu_ticks(p) is not None for p in pids):
    if time.monotonic() - start > limit:
      return None
    time.sleep(0.1)
  return round(time.monotonic() - start, 1)


# ---- files -----------------------------------------------------------------------------

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


def fill_disk(directory: pathlib.Path) -> int:
  """Writes DIRECTORY/filler until its file system is full; bytes written."""
  written, chunk = 0, b"\0" * 65536
  fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  try:
    while True:
      written += os.write(fd, chunk)
  except OSError:
    return written
  finally:
    os.close(fd)


# ---- one seed ----------------------------------------------------------------------------

@dataclasses.dataclass
class Job:
  """One seed's job: its arguments, its uninterrupted reference, the judge it grades
  with (a `judge_burst` schedule) and its grading cache's tmpfs (a `disk_full` one)."""
  args: list[str]
  reference: pathlib.Path
  judge: Optional[BurstJudge] = None
  cache: Optional[pathlib.Path] = None


def _judge_reference(matrix: fm.Matrix, rl_steps: int) -> pathlib.Path:
  """The judge job's uninterrupted run, graded by a well-behaved judge."""
  server = BurstJudge()
  try:
    return matrix._baseline(f"reference_judge_{rl_steps}",  # pylint: disable=protected-access
                            judge_args(matrix.root, rl_steps, server.base), source="prepared")
  finally:
    server.close()


@contextlib.contextmanager
def job_for(matrix: fm.Matrix, seed: int, plan: list[tuple[int, str]], rl_steps: int
            ) -> Iterator[Job]:
  """The job `plan` needs, its judge server and tmpfs held for the block."""
  kinds = {kind for _, kind in plan}
  if "disk_full" in kinds and os.geteuid() != 0:
    raise RuntimeError("disk_full mounts a tmpfs: run the soak as root")
  if "judge_burst" in kinds:
    reference, judge = _judge_reference(matrix, rl_steps), BurstJudge()
    job = Job(judge_args(matrix.root, rl_steps, judge.base), reference, judge=judge)
  else:
    reference = matrix._baseline(f"reference_{rl_steps}", job_args(rl_steps),  # pylint: disable=protected-access
                                 source="prepared")
    job = Job(job_args(rl_steps), reference)
  try:
    if "disk_full" in kinds:
      job.cache = matrix.root / "soak" / f"seed_{seed}.cache"
      if os.path.ismount(job.cache):
        fm.umount(job.cache)
      fm.mount_tmpfs(job.cache, CACHE_SIZE)
      job.args = job.args + [f"--config.eval.grading_cache={job.cache}"]
    yield job
  finally:
    if job.judge is not None:
      job.judge.close()
    if job.cache is not None:
      fm.umount(job.cache)


def _ready(workdir: pathlib.Path, proc, step: int, kind: str) -> Callable[[], bool]:
  """When fault (`step`, `kind`) strikes: after RL step `step`'s row (its dev evaluation
  then in flight for `sigterm_eval`), with a save in progress (`sigkill_save`: a later
  step's), with a grading browser alive (`chromium_killed`); while step `step` is graded
  (`GRADING`); when it is in flight (`judge_burst`, which starts at its first request)."""
  if kind == "sigkill_save":
    return lambda: step in _rl_rows(workdir) and _saving(workdir)
  if kind == "chromium_killed":
    return lambda: step in _rl_rows(workdir) and bool(_chromium_of(proc.pid))
  if kind in GRADING:
    return GradingWatch(workdir, proc.pid, step)
  if kind == "judge_burst":
    return lambda: window_open(workdir, step)
  return lambda: step in _rl_rows(workdir)


def _await(proc, ready: Callable[[], bool], missed: Callable[[], bool]) -> str:
  """"ready", "missed" (its moment passed, the job runs on) or "ended" (the job ended
  or ran past fm.RUN_TIMEOUT)."""
  hit = False

  def poll() -> bool:
    nonlocal hit
    hit = ready()
    return hit or missed()

  if not fm.wait_until(proc, poll, fm.RUN_TIMEOUT):
    return "ended"
  return "ready" if hit else "missed"


def _strike(kind: str, proc, workdir: pathlib.Path, job: Job,
            ready: Callable[[], bool] | GradingWatch) -> dict[str, Any]:
  """Injects fault `kind` into the running job (`ready`: its `_ready`, a GradingWatch for
  the GRADING kinds); what happened."""
  if kind == "chromium_killed":
    victims = _chromium_of(proc.pid)
    os.kill(victims[0], signal.SIGKILL)
    return {"note": f"killed one of {len(victims)} Chromium processes; the job goes on"}
  if kind == "worker_killed":
    os.kill(ready.busy, signal.SIGKILL)
    return {"note": f"SIGKILLed grading worker {ready.busy} of {len(ready.workers)} "
                    "while it graded; the job goes on"}
  if kind == "judge_burst":
    return {"burst": job.judge.arm(BURST_SECONDS),
            "note": f"judge burst of {BURST_SECONDS:g} s armed for the step's first request"}
  if kind == "disk_full":
    written = fill_disk(job.cache)
    usage = shutil.disk_usage(job.cache)
    return {"note": f"cache tmpfs filled ({written // 1024} KiB written, "
                    f"{usage.free} bytes free of {usage.total // 1024} KiB)"}
  hit = time.monotonic()
  os.kill(proc.pid, signal.SIGTERM if kind.startswith("sigterm") else signal.SIGKILL)
  event: dict[str, Any] = {"exit": fm.finish(proc), "stop_s": round(time.monotonic() - hit, 1)}
  if kind == "sigkill_grading":
    event["workers_gone_s"] = _gone_after(ready.workers, WORKER_GONE_S)
  elif kind == "torn_checkpoint":
    event["note"] = _tear_checkpoint(workdir)
  elif kind == "torn_metrics":
    event["note"] = _tear_metrics(workdir)
  return event


def _inject(root: pathlib.Path, workdir: pathlib.Path, job: Job, plan: list[tuple[int, str]],
            seed: int) -> tuple[list[dict[str, Any]], int, Optional[int]]:
  """Runs the job through `plan`'s faults, launching it again after each stop; (events,
  launches, the exit status of a job still running at the end, else None)."""
  proc, events, launches = None, [], 0
  for step, kind in plan:
    if proc is None:
      proc, launches = fm.launch(root, workdir, job.args), launches + 1
    event: dict[str, Any] = {"step": step, "kind": kind}
    ready = _ready(workdir, proc, step, kind)
    window = kind in GRADING or kind == "judge_burst"
    reached = _await(proc, ready, lambda: window and step in _rl_rows(workdir))
    if reached == "ended":
      event["not_reached"] = f"the job ended (exit {fm.finish(proc)})"
      proc = None
    elif reached == "missed":
      event["not_reached"] = f"step {step} was graded unseen"
    else:
      event.update(_strike(kind, proc, workdir, job, ready))
      if kind in STOPS:
        proc = None
    events.append(event)
    print(json.dumps({"seed": seed, **event}), flush=True)
  return events, launches, (fm.finish(proc) if proc is not None else None)


def _fault_problems(events: list[dict[str, Any]], rows: list[dict[str, Any]], job: Job
                    ) -> list[str]:
  """Adds each fault's trace in the rows to its event (the step's worker deaths and
  regradings, a burst's requests, the cache writes that failed after a full disk);
  a burst that met no request, a full disk never written to, or an orphaned worker
  that outlived a SIGKILLed job are problems."""
  rl = {r["step"]: r for r in rows if r["stage"] == "rl"}
  problems = []
  for event in events:
    step, kind = event["step"], event["kind"]
    if kind in GRADING or kind == "judge_burst":
      event["row"] = {k: rl.get(step, {}).get(k)
                      for k in ("worker_deaths", "regraded", "unscorable")}
    if "burst" in event:
      event["burst_requests"] = dict(job.judge.bursts[event["burst"]])
      if not event["burst_requests"]:
        problems.append(f"judge burst at step {step} met no judge request")
    if kind == "disk_full" and "not_reached" not in event:
      event["cache_write_errors"] = sum(r.get("cache_write_errors", 0)
                                        for s, r in rl.items() if s > step)
      if not event["cache_write_errors"]:
        problems.append(f"disk_full at step {step}: no cache write failed after it")
    if kind == "sigkill_grading" and "exit" in event and event["workers_gone_s"] is None:
      problems.append(f"a grading worker outlived the job SIGKILLed at step {step} by "
                      f"{WORKER_GONE_S:g} s")
  return problems


def _compare(workdir: pathlib.Path, reference: pathlib.Path, rl_steps: int) -> list[str]:
  """The promises against the uninterrupted run."""
  problems = []
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
  return problems


def soak(root: pathlib.Path, seed: int, faults: int, rl_steps: int,
         kinds: Optional[Sequence[str]] = None) -> dict[str, Any]:
  """One seed's soak: the schedule, each fault's outcome, restarts and the verdict."""
  matrix = fm.Matrix(root)
  plan = schedule(seed, faults, rl_steps, kinds)
  workdir = root / "soak" / f"seed_{seed}"
  with job_for(matrix, seed, plan, rl_steps) as job:
    shutil.rmtree(workdir, ignore_errors=True)
    for old in workdir.parent.glob(f"{workdir.name}.log*"):
      old.unlink()
    shutil.copytree(matrix.prepared(), workdir)
    t0 = time.time()
    events, launches, code = _inject(root, workdir, job, plan, seed)
    while code != 0 and launches <= 2 * faults + 3:  # restarted as rcca_jax.restart would
      code, launches = fm.run(root, workdir, job.args), launches + 1
      if code not in (fm.EXIT_PREEMPTED, -signal.SIGKILL, 0):
        break
    problems = [] if code == 0 else [f"final run exit {code}: {fm.log_text(workdir)[-800:]}"]
    problems += _fault_problems(events, fm.rows_of(workdir), job)
    problems += _compare(workdir, job.reference, rl_steps)
    return {"seed": seed, "faults": faults, "rl_steps": rl_steps, "schedule": plan,
            "judge": job.judge is not None, "reference": job.reference.name,
            "events": events, "launches": launches, "seconds": round(time.time() - t0),
            "ok": not problems, "problems": problems}


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--seeds", type=int, default=1, help="seeds SEED..SEED+N-1")
  p.add_argument("--faults", type=int, default=5)
  p.add_argument("--rl_steps", type=int, default=30)
  p.add_argument("--kinds", default="", help="the faults' kinds, one per fault, comma "
                 "separated (default: drawn from KINDS)")
  p.add_argument("--root", default="/tmp/rcca_chaos_soak")
  p.add_argument("--json", default="")
  args = p.parse_args()
  kinds = args.kinds.split(",") if args.kinds else None
  if kinds is not None and len(kinds) != args.faults:
    p.error(f"--kinds names {len(kinds)} faults, --faults {args.faults}")
  results = []
  for seed in range(args.seed, args.seed + args.seeds):
    result = soak(pathlib.Path(args.root), seed, args.faults, args.rl_steps, kinds)
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
