"""Each fault of a long run injected into a short real one: what the run did, what was lost.

  .venv/bin/python benchmarks/fault_matrix.py [--rows NAME,...] [--root DIR] [--list]

The runs are `python -m rcca_jax.main` on a shrunk `experiments/tiny_natural.py`
(dark_mode only, real tokenizer, model, orbax checkpoints, Chromium pool, dev
evaluation after SFT and after RL steps 2 and 3), or the same job in this process
where a fault is injected at the grader. Faults are real: signals sent to the job,
torn and truncated files written over its own, a tmpfs that fills up, fake Chromium
executables, a second job on the same directory. Every run shares one persistent JAX
compilation cache (`--root`/jax_cache) and the test suite's fast-compile XLA flags.

Two uninterrupted runs are the baselines: `sft_reference` (a short SFT alone) for the
faults during SFT, `reference` (SFT until the policy writes whole apps, then 3 RL steps
of 2 prompts x 4 samples) for the others; every RL-stage row starts from a copy of the
reference's post-SFT directory (`prepared`), which the job resumes as a `rl.num_steps`
extension (the RL optimizer is constant, so the extension changes no number). A
baseline is made again when the code changed since it ran (`code_fingerprint`): a
change that moves a float32 rounding would otherwise fail every bitwise row. A row
prints what was injected, what the run did (exit status, seconds after the signal),
what was lost (steps redone), and whether the final parameters (and `best/`) are
bitwise those of its baseline. `tests/benchmarks/test_fault_matrix.py` runs each row as a test.
docs/faults.md states the promise each row checks.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Optional

REPO = pathlib.Path(__file__).resolve().parent.parent
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
RUN_TIMEOUT = 900
EXIT_STOPPED, EXIT_PREEMPTED = 3, 75  # rcca_jax.train.faults (not imported: no JAX here)

# The job: the dark_mode family alone, short dev evaluations, one grading worker.
JOB = ["--config=experiments/tiny_natural.py", "--config.data.families=('dark_mode',)",
       "--config.sft.log_every=1", "--config.rl.max_new_tokens=320",
       "--config.eval.max_new_tokens=320", "--config.eval.per_family=2",
       "--config.eval.workers=1", "--config.eval.num_reports=1",
       "--config.eval.every_rl_steps=2", "--config.eval.samples_per_request=0"]
SFT_STEPS = 80      # the reference's SFT: whole apps, so RL rewards differ in a group
RL_STEPS = 3
PREPARE = JOB + [f"--config.sft.num_steps={SFT_STEPS}", "--config.sft.checkpoint_every=40",
                 "--config.rl.num_steps=0"]
FULL = JOB + [f"--config.sft.num_steps={SFT_STEPS}", "--config.sft.checkpoint_every=40",
              f"--config.rl.num_steps={RL_STEPS}"]
# Faults during SFT: a short SFT, a checkpoint every 4 steps, no RL.
SHORT_SFT = JOB + ["--config.sft.num_steps=12", "--config.sft.checkpoint_every=4",
                   "--config.rl.num_steps=0", "--config.eval.enabled=False"]
# The same job as a one-arm ablation (`python -m rcca_jax.study`): its seed 0 SFT is a
# copy of the prepared post-SFT run, its arm `grpo` trains the RL steps.
ABLATION = "rcca_jax.study"
ABLATION_CONFIG = '''"""The fault matrix's job as a one-arm ablation (written by benchmarks/fault_matrix.py)."""

import ml_collections

from experiments import tiny_natural


def get_config():
  config = tiny_natural.get_config()
  config.arms = ml_collections.ConfigDict(dict(grpo="rl.policy_loss=grpo"))
  config.ablation = ml_collections.ConfigDict(dict(arms="grpo", bootstrap=100))
  return config
'''


@dataclasses.dataclass
class Row:
  """One fault's outcome; `ok` when every promise checked held."""
  fault: str
  injected: str
  did: str = ""
  lost: str = ""
  bitwise: str = "n/a"
  ok: bool = False
  problems: list[str] = dataclasses.field(default_factory=list)

  def check(self, condition: bool, what: str) -> None:
    if not condition:
      self.problems.append(what)

  def done(self) -> "Row":
    self.ok = not self.problems
    return self


# Fake Chromium executables (Python scripts): one that never answers on its DevTools
# pipe, one that fails every launch, one that fails its first launch and then runs the
# real browser ({real}).
NEVER_READY = "import time\ntime.sleep(120)\n"
FAILS = ("import sys\nsys.stderr.write('fake chromium: no display (exit 1)\\n')\n"
         "sys.exit(1)\n")
FAILS_ONCE = """import os, sys
count = sys.argv[0] + ".count"
if not os.path.exists(count):
  open(count, "w").close()
  sys.stderr.write("fake chromium: first launch fails\\n")
  sys.exit(1)
os.execv({real!r}, [{real!r}] + sys.argv[1:])
"""


def fake_chromium(directory: pathlib.Path, body: str) -> str:
  path = directory / "chromium"
  path.write_text(f"#!{sys.executable}\n{body}")
  path.chmod(0o755)
  return str(path)


def processes_naming(directory: str) -> list[int]:
  """Pids of live processes whose command line names `directory`."""
  found = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        cmdline = f.read()
      with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
      continue
    if directory.encode() in cmdline and state != "Z":
      found.append(int(entry))
  return found


def grade_with(executable: str, workers: int, jobs: int = 2, **config
               ) -> tuple[Any, float, str, dict]:
  """Two example jobs through an EvalPool whose browser is `executable`: (records or
  the RuntimeError, seconds, the pool's temporary directory, its stats)."""
  from rcca_jax.data import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.evaluation import pool as pool_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.evaluation.config import EvalConfig  # pylint: disable=import-outside-toplevel
  task = tasks_lib.parse_task({
      "id": "p", "request": "a heading", "rubrics": [
          {"id": "r1", "kind": "initial", "level": "core", "text": "shows Hi",
           "check": 'expect text "h1" == "Hi"'}]})
  app = "```html\n<!DOCTYPE html><html><body><h1>Hi</h1></body></html>\n```"
  old = os.environ.get("RCCA_CHROMIUM")
  os.environ["RCCA_CHROMIUM"] = executable
  pool = pool_lib.EvalPool(EvalConfig(**config), workers=workers)
  start = time.monotonic()
  try:
    out: Any = list(pool.run([pool_lib.Job(task, app, i) for i in range(jobs)]))
  except RuntimeError as e:
    out = e
  finally:
    pool.close()
    if old is None:
      os.environ.pop("RCCA_CHROMIUM", None)
    else:
      os.environ["RCCA_CHROMIUM"] = old
  return out, time.monotonic() - start, pool.tmp_dir, dict(pool.stats)


class JudgeServer:
  """An OpenAI-compatible judge on loopback that misbehaves on command: each POST takes
  the next scripted action (`next_action`), ("hang", seconds), ("slow", seconds: then
  the verdict), (status, headers) or ("body", text), then answers `verdict(request)`
  once the script is used up; `times` holds when each request came."""

  def __init__(self, actions=(), verdict: Callable[[dict], str] | None = None):
    import http.server  # pylint: disable=import-outside-toplevel
    import threading  # pylint: disable=import-outside-toplevel
    self.actions = list(actions)
    self.times: list[float] = []
    outer = self
    verdict = verdict or (lambda body: '{"passed": true, "reason": "fine"}')

    class Handler(http.server.BaseHTTPRequestHandler):
      def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        outer.times.append(time.monotonic())
        kind, value = outer.next_action()
        if kind == "hang":
          time.sleep(value)  # bounded: the handler thread ends by itself
          return
        if kind == "slow":
          time.sleep(value)
        if kind in ("verdict", "slow"):
          kind, value = "body", json.dumps({"choices": [{"message": {
              "role": "assistant", "content": verdict(request)}}]})
        status, headers, body = (200, {}, value) if kind == "body" else (kind, value, "")
        self.send_response(status)
        for name, header in headers.items():
          self.send_header(name, header)
        self.end_headers()
        self.wfile.write(body.encode())

      def log_message(self, *args):
        pass

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def next_action(self) -> tuple[Any, Any]:
    """The next request's action: the script's next, else ("verdict", None)."""
    return self.actions.pop(0) if self.actions else ("verdict", None)

  def close(self) -> None:
    self.server.shutdown()
    self.server.server_close()


def mount_tmpfs(directory: pathlib.Path, size: str) -> None:
  """A tmpfs of `size` (mount's syntax: 64k, 16m) on `directory`, made if absent (root
  only)."""
  directory.mkdir(parents=True, exist_ok=True)
  subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                 check=True)


def umount(directory: pathlib.Path) -> None:
  subprocess.run(["umount", str(directory)], check=False)


# ---- running the job ---------------------------------------------------------------

def env(root: pathlib.Path) -> dict[str, str]:
  return dict(os.environ, JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false",
              JAX_COMPILATION_CACHE_DIR=str(root / "jax_cache"),
              JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
              XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip())


def launch(root: pathlib.Path, workdir: pathlib.Path, args: list[str],
           extra_env: Optional[dict[str, str]] = None, module: str = "rcca_jax.main"
           ) -> subprocess.Popen:
  """The job (`python -m MODULE`) on `workdir`, its stderr in WORKDIR.logN (N counts the
  launches)."""
  workdir.parent.mkdir(parents=True, exist_ok=True)
  n = len(list(workdir.parent.glob(f"{workdir.name}.log*")))
  log = open(workdir.parent / f"{workdir.name}.log{n}", "w")  # pylint: disable=consider-using-with
  return subprocess.Popen(
      [sys.executable, "-m", module, f"--workdir={workdir}", *args], cwd=REPO,
      env={**env(root), **(extra_env or {})}, stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, timeout: float = RUN_TIMEOUT) -> int:
  try:
    return proc.wait(timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()
    return -9


def run(root: pathlib.Path, workdir: pathlib.Path, args: list[str], **kw) -> int:
  return finish(launch(root, workdir, args, **kw))


def log_text(workdir: pathlib.Path) -> str:
  logs = sorted(workdir.parent.glob(f"{workdir.name}.log*"),
                key=lambda p: int(p.name.rsplit("log", 1)[1]))
  return logs[-1].read_text(errors="replace") if logs else ""


def rows_of(workdir: pathlib.Path) -> list[dict[str, Any]]:
  """metrics.jsonl's rows (a torn last line left out, as the job's repair does)."""
  path = workdir / "metrics.jsonl"
  out = []
  if path.exists():
    for line in path.read_text().splitlines():
      try:
        out.append(json.loads(line))
      except json.JSONDecodeError:
        pass
  return out


def steps(rows: list[dict[str, Any]], stage: str) -> list[Any]:
  if stage == "eval":
    return [(r["after"], r["step"]) for r in rows if r["stage"] == "eval"]
  return [r["step"] for r in rows if r["stage"] == stage]


def wait_until(proc: subprocess.Popen, ready: Callable[[], bool], limit: float) -> bool:
  """Polls `ready` while the job runs; whether it became true before the job ended."""
  deadline = time.monotonic() + limit
  while time.monotonic() < deadline and proc.poll() is None:
    if ready():
      return True
    time.sleep(0.02)
  return False


def signal_at(proc: subprocess.Popen, ready: Callable[[], bool], sig: int
              ) -> tuple[bool, float]:
  """Sends `sig` once `ready()`; (sent, seconds from the signal to the job's exit)."""
  if not wait_until(proc, ready, RUN_TIMEOUT):
    finish(proc, 5)
    return False, 0.0
  t0 = time.monotonic()
  os.kill(proc.pid, sig)
  finish(proc)
  return True, time.monotonic() - t0


# ---- reading results -----------------------------------------------------------------

def checkpoint_state(directory: pathlib.Path, step: Optional[int] = None) -> dict:
  """The saved TrainState of a checkpoint directory (latest step by default) as numpy."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
  saved = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
  step = saved[-1] if step is None else step
  with ocp.StandardCheckpointer() as ckpt:
    state = ckpt.restore(directory / str(step) / "state")
  import jax  # pylint: disable=import-outside-toplevel
  return jax.tree.map(np.asarray, state)


def bitwise_equal(a: pathlib.Path, b: pathlib.Path) -> bool:
  """Whether two checkpoint directories' latest states are equal bit for bit."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  x, y = checkpoint_state(a), checkpoint_state(b)
  if jax.tree.structure(x) != jax.tree.structure(y):
    return False
  return all(u.dtype == v.dtype and u.shape == v.shape
             and np.ascontiguousarray(u).tobytes() == np.ascontiguousarray(v).tobytes()
             for u, v in zip(jax.tree.leaves(x), jax.tree.leaves(y)))


def all_checkpoints_finite(workdir: pathlib.Path) -> tuple[bool, int]:
  """(every floating leaf of every saved checkpoint is finite, checkpoints read)."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  count, finite = 0, True
  for stage in ("sft", "rl", "best"):
    directory = workdir / "checkpoints" / stage
    for step in (sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
                 if directory.exists() else []):
      count += 1
      for leaf in jax.tree.leaves(checkpoint_state(directory, step)):
        if np.issubdtype(leaf.dtype, np.floating) and not np.isfinite(leaf).all():
          finite = False
  return finite, count


def resumed_at(workdir: pathlib.Path) -> Optional[int]:
  found = re.findall(r"resuming RL at step (\d+)", log_text(workdir))
  return int(found[-1]) if found else None


def code_fingerprint(repo: pathlib.Path = REPO) -> str:
  """A hash of the code a run executes: the package's and experiments/' Python files."""
  digest = hashlib.sha256()
  for path in sorted([*repo.glob("rcca_jax/**/*.py"), *repo.glob("experiments/*.py")]):
    digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
  return digest.hexdigest()


class Matrix:
  """The rows, sharing the baselines under `root`."""

  def __init__(self, root: pathlib.Path):
    self.root = root
    root.mkdir(parents=True, exist_ok=True)

  def _baseline(self, name: str, args: list[str], source: Optional[str] = None,
                module: str = "rcca_jax.main", into: str = "") -> pathlib.Path:
    """A finished run of `args` (from a copy of baseline `source` in its subdirectory
    `into`, when given), made under ROOT/NAME once per `code_fingerprint`."""
    workdir = self.root / name
    done, fingerprint = self.root / f"{name}.done", code_fingerprint()
    if done.exists() and done.read_text() == fingerprint:
      return workdir
    shutil.rmtree(workdir, ignore_errors=True)
    if source:
      shutil.copytree(self._baseline_dir(source), workdir / into)
    code = run(self.root, workdir, args, module=module)
    if code:
      raise RuntimeError(f"baseline {name} failed (exit {code}):\n{log_text(workdir)[-3000:]}")
    done.write_text(fingerprint)
    return workdir

  def _baseline_dir(self, name: str) -> pathlib.Path:
    return {"prepared": self.prepared, "reference": self.reference,
            "sft_reference": self.sft_reference}[name]()

  def prepared(self) -> pathlib.Path:
    return self._baseline("prepared", PREPARE)

  def reference(self) -> pathlib.Path:
    return self._baseline("reference", FULL, source="prepared")

  def sft_reference(self) -> pathlib.Path:
    return self._baseline("sft_reference", SHORT_SFT)

  def ablation_args(self) -> list[str]:
    config = self.root / "ablation_job.py"
    config.write_text(ABLATION_CONFIG)
    return [f"--config={config}", "--seeds=1", *FULL[1:]]

  def ablation_reference(self) -> pathlib.Path:
    return self._baseline("ablation_reference", self.ablation_args(), source="prepared",
                          module=ABLATION, into="seed_0/sft")

  def fresh(self, name: str, source: Optional[str] = "prepared") -> pathlib.Path:
    """ROOT/rows/NAME, emptied, or a copy of baseline `source`."""
    workdir = self.root / "rows" / name
    shutil.rmtree(workdir, ignore_errors=True)
    for old in workdir.parent.glob(f"{name}.log*"):
      old.unlink()
    if source:
      shutil.copytree(self._baseline_dir(source), workdir)
    return workdir

  def compare_rl(self, row: Row, workdir: pathlib.Path) -> None:
    """The promises after a rerun: RL and eval rows once each, best/ and the final
    RL state bit for bit the reference's."""
    ref = self.reference()
    rows = rows_of(workdir)
    row.check(steps(rows, "rl") == list(range(1, RL_STEPS + 1)),
              f"RL rows {steps(rows, 'rl')}")
    row.check(steps(rows, "eval") == steps(rows_of(ref), "eval"),
              f"eval rows {steps(rows, 'eval')} vs {steps(rows_of(ref), 'eval')}")
    final = bitwise_equal(workdir / "checkpoints" / "rl", ref / "checkpoints" / "rl")
    best = bitwise_equal(workdir / "checkpoints" / "best", ref / "checkpoints" / "best")
    row.bitwise = f"final {'equal' if final else 'DIFFERENT'}, best/ {'equal' if best else 'DIFFERENT'}"
    row.check(final and best, row.bitwise)

  # ---- rows: signals -----------------------------------------------------------------

  def _signal_row(self, sig: int, where: str) -> Row:
    name = f"{signal.Signals(sig).name.lower()}_{where}"
    points = {
        "sft": ("after SFT step 5's row (checkpoints every 4)",
                lambda w: 5 in steps(rows_of(w), "sft")),
        "rl_step": ("after RL step 1's row (step 2 in flight)",
                    lambda w: 1 in steps(rows_of(w), "rl")),
        "dev_eval": ("after RL step 2's row (its dev evaluation in flight)",
                     lambda w: 2 in steps(rows_of(w), "rl")),
    }
    when, ready = points[where]
    row = Row(name, f"{signal.Signals(sig).name} {when}")
    sft = where == "sft"
    workdir = self.fresh(name, source=None if sft else "prepared")
    args = SHORT_SFT if sft else FULL
    proc = launch(self.root, workdir, args)
    sent, seconds = signal_at(proc, lambda: ready(workdir), sig)
    row.check(sent, "the job ended before the signal could be sent")
    code = proc.returncode
    want = EXIT_PREEMPTED if sig == signal.SIGTERM else -signal.SIGKILL
    row.did = f"exit {code} {seconds:.1f} s after the signal"
    row.check(code == want, f"exit status {code}, expected {want}")
    if sig == signal.SIGTERM:
      row.check(seconds <= 30, f"exited {seconds:.1f} s after SIGTERM (limit 30)")
    before = rows_of(workdir)
    code = run(self.root, workdir, args)
    row.check(code == 0, f"rerun exit {code}: {log_text(workdir)[-2000:]}")
    if sft:
      done = max(steps(before, "sft") or [0])
      saved = sorted(int(p.name) for p in (workdir / "checkpoints" / "sft").iterdir()
                     if p.name.isdigit())
      row.lost = f"SFT rows up to step {done} before; checkpoints now {saved}"
      same = bitwise_equal(workdir / "checkpoints" / "sft",
                           self.sft_reference() / "checkpoints" / "sft")
      row.bitwise = f"final SFT state {'equal' if same else 'DIFFERENT'}"
      row.check(same, row.bitwise)
      row.check(steps(rows_of(workdir), "sft") == list(range(1, 13)),
                f"SFT rows {steps(rows_of(workdir), 'sft')}")
    else:
      done = max(steps(before, "rl") or [0])
      again = resumed_at(workdir)
      row.lost = (f"{done} RL steps logged before; resumed at step {again}: "
                  f"{max(done - (again or 0), 0)} logged steps redone, and the step in "
                  "flight")
      if sig == signal.SIGTERM:
        row.check(again == done, f"SIGTERM: resumed at {again}, {done} were done")
      self.compare_rl(row, workdir)
    return row.done()

  def sigterm_ablation(self) -> Row:
    """SIGTERM to the ablation command: one line and 75 as from the main job, the
    stopped run's seconds kept, the rerun resumes and ends bitwise on its baseline."""
    row = Row("sigterm_ablation", "SIGTERM to `python -m rcca_jax.study` after its "
              "arm's RL step 1 row (step 2 in flight)")
    workdir, args = self.fresh(row.fault, source=None), self.ablation_args()
    shutil.copytree(self.prepared(), workdir / "seed_0" / "sft")
    arm = workdir / "seed_0" / "grpo"
    proc = launch(self.root, workdir, args, module=ABLATION)
    sent, seconds = signal_at(proc, lambda: 1 in steps(rows_of(arm), "rl"), signal.SIGTERM)
    row.check(sent, "the job ended before the signal could be sent")
    text = log_text(workdir)
    last = (text.strip().splitlines() or [""])[-1]
    row.did = f"exit {proc.returncode} {seconds:.1f} s after the signal: {last[:100]}"
    row.check(proc.returncode == EXIT_PREEMPTED,
              f"exit status {proc.returncode}, expected {EXIT_PREEMPTED}")
    row.check(seconds <= 30, f"exited {seconds:.1f} s after SIGTERM (limit 30)")
    row.check("Traceback" not in text and last.startswith("preempted:"),
              f"not one line saying it was preempted: {text[-1500:]}")
    walls = workdir / "wall_times.json"
    spent = json.loads(walls.read_text()).get("seed_0/grpo", 0.0) if walls.exists() else 0.0
    row.check(spent > 0, "the stopped run's seconds are not in wall_times.json")
    done = max(steps(rows_of(arm), "rl") or [0])
    code = run(self.root, workdir, args, module=ABLATION)
    row.check(code == 0, f"rerun exit {code}: {log_text(workdir)[-2000:]}")
    again = resumed_at(workdir)
    row.lost = (f"{done} RL steps logged before ({spent:.0f} s kept); resumed at step "
                f"{again}")
    row.check(again == done, f"resumed at {again}, {done} were done")
    row.check(steps(rows_of(arm), "rl") == list(range(1, RL_STEPS + 1)),
              f"RL rows {steps(rows_of(arm), 'rl')}")
    row.check((workdir / "summary.json").exists(), "no summary.json after the rerun")
    same = bitwise_equal(arm / "checkpoints" / "rl",
                         self.ablation_reference() / "seed_0" / "grpo" / "checkpoints" / "rl")
    row.bitwise = f"final {'equal' if same else 'DIFFERENT'}"
    row.check(same, row.bitwise)
    return row.done()

  # ---- rows: non-finite updates ----------------------------------------------------------

  def _nonfinite_row(self, stage: str) -> Row:
    name = f"nonfinite_{stage}"
    row = Row(name, f"{stage}.optimizer.learning_rate=1e8")
    sft = stage == "sft"
    workdir = self.fresh(name, source=None if sft else "prepared")
    # RL: the first update (finite, lr 1e8) makes the policy's log-probs overflow and
    # the steps after it are skipped: 5 RL steps reach the limit of 3 in a row.
    args = (SHORT_SFT if sft else FULL + [
        "--config.rl.num_steps=5", "--allow_config_change=rl.optimizer.learning_rate"]
            ) + [f"--config.{stage}.optimizer.learning_rate=1e8"]
    code = run(self.root, workdir, args)
    rows = [r for r in rows_of(workdir) if r["stage"] == stage]
    skipped = (max((r.get("skipped_nonfinite", 0) for r in rows), default=0) if sft  # running total
               else sum(r.get("skipped_nonfinite", 0) for r in rows))  # per step
    last = log_text(workdir).strip().splitlines()[-1:] or [""]
    finite, count = all_checkpoints_finite(workdir)
    row.did = f"exit {code}: {last[0][:160]}"
    row.lost = f"{skipped:g} updates skipped; {count} checkpoints, all finite: {finite}"
    row.check(code == EXIT_STOPPED, f"exit {code}, expected {EXIT_STOPPED}")
    row.check("non-finite" in last[0], "the last line does not say why")
    row.check(finite, "a saved checkpoint has a non-finite leaf")
    row.check(skipped > 0, "no skipped update logged")
    return row.done()

  # ---- rows: files a crash leaves --------------------------------------------------------

  def _killed_mid_rl(self, name: str) -> pathlib.Path:
    """A copy of `prepared` whose job was SIGKILLed after RL step 2's dev evaluation
    (RL checkpoints 1 and 2 on disk, step 3 in flight)."""
    workdir = self.fresh(name)
    proc = launch(self.root, workdir, FULL)
    signal_at(proc, lambda: ("rl", 2) in steps(rows_of(workdir), "eval"), signal.SIGKILL)
    return workdir

  def torn_metrics(self) -> Row:
    row = Row("torn_metrics", "SIGKILL mid-RL, then half a row appended to metrics.jsonl")
    workdir = self._killed_mid_rl(row.fault)
    with open(workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
      f.write('{"step": 3, "stage": "rl", "loss": 0.1')
    return self._rerun_repaired(row, workdir, "torn")

  def truncated_checkpoint(self) -> Row:
    row = Row("truncated_checkpoint", "SIGKILL mid-RL, then every file of the latest "
              "RL checkpoint cut to half its size")
    workdir = self._killed_mid_rl(row.fault)
    latest = max(int(p.name) for p in (workdir / "checkpoints" / "rl").iterdir()
                 if p.name.isdigit())
    for path in (workdir / "checkpoints" / "rl" / str(latest)).rglob("*"):
      if path.is_file() and path.stat().st_size > 1:
        with open(path, "r+b") as f:
          f.truncate(path.stat().st_size // 2)
    return self._rerun_repaired(row, workdir, "restor")

  def orbax_temp_dir(self) -> Row:
    row = Row("orbax_temp_dir", "SIGKILL mid-RL, then an orbax temporary directory of "
              "an unfinished save left in checkpoints/rl")
    workdir = self._killed_mid_rl(row.fault)
    tmp = workdir / "checkpoints" / "rl" / "3.orbax-checkpoint-tmp-1234567890"
    tmp.mkdir()
    (tmp / "partial").write_bytes(b"\0" * 100)
    self._rerun_repaired(row, workdir, "tmp")
    leftovers = list((workdir / "checkpoints" / "rl").glob("*tmp*"))
    row.check(not leftovers, f"left: {leftovers}")
    return row.done()

  def _rerun_repaired(self, row: Row, workdir: pathlib.Path, warning: str) -> Row:
    code = run(self.root, workdir, FULL)
    text = log_text(workdir)
    row.did = f"rerun exit {code}"
    row.check(code == 0, f"rerun failed: {text[-1500:]}")
    warned = [line for line in text.splitlines() if warning in line.lower()]
    row.did += f", warned: {warned[0][:150] if warned else 'nothing'}"
    row.check(bool(warned), f"no warning mentioning {warning!r}")
    row.lost = f"resumed at RL step {resumed_at(workdir)}"
    self.compare_rl(row, workdir)
    return row.done()

  def full_disk_cache(self) -> Row:
    row = Row("full_disk_cache", "the grading cache on a 64 KiB tmpfs that fills up")
    if os.geteuid() != 0:
      row.did = "skipped: mounting a tmpfs needs root"
      row.ok = True
      return row
    workdir = self.fresh(row.fault)
    cache = self.root / "rows" / "full_cache"
    mount_tmpfs(cache, "64k")
    try:
      code = run(self.root, workdir, FULL + [f"--config.eval.grading_cache={cache}"])
      used = shutil.disk_usage(cache)
    finally:
      umount(cache)
    rows = [r for r in rows_of(workdir) if r["stage"] == "rl"]
    errors = sum(r.get("cache_write_errors", 0) for r in rows_of(workdir))
    row.did = (f"exit {code}; tmpfs {used.used // 1024} of {used.total // 1024} KiB used; "
               f"cache write errors counted in the rows: {errors:g}")
    row.check(code == 0, f"the run failed: {log_text(workdir)[-1500:]}")
    row.check(used.free < 8192 and errors > 0, "the tmpfs did not fill up")
    row.lost = f"{len(rows)} RL rows"
    self.compare_rl(row, workdir)
    return row.done()

  # ---- rows: the work directory ------------------------------------------------------

  def second_run(self) -> Row:
    row = Row("second_run_refused", "the same job started again on a work directory "
              "whose first job is running RL")
    workdir = self.fresh(row.fault)
    first = launch(self.root, workdir, FULL)
    live = wait_until(first, lambda: 1 in steps(rows_of(workdir), "rl"), RUN_TIMEOUT)
    row.check(live, "the first job ended before the second could start")
    t0 = time.monotonic()
    code = run(self.root, workdir, FULL)
    refused = log_text(workdir).strip().splitlines()[-1:] or [""]
    row.did = f"second: exit {code} in {time.monotonic() - t0:.1f} s: {refused[0][:150]}"
    row.check(code == 2 and "in use by" in refused[0], "the second job was not refused")
    code = finish(first)
    row.lost = f"first job: exit {code}"
    row.check(code == 0, f"the first job failed (exit {code})")
    self.compare_rl(row, workdir)
    return row.done()

  def changed_config(self) -> Row:
    row = Row("changed_config_refused", "a finished run resumed with "
              "rl.optimizer.learning_rate changed (then allowed by the flag)")
    workdir = self.fresh(row.fault, source="reference")
    changed = FULL + ["--config.rl.optimizer.learning_rate=0.001"]
    code = run(self.root, workdir, changed)
    text = log_text(workdir)
    row.did = f"exit {code}: {' '.join(text.strip().splitlines()[-4:])[:220]}"
    row.check(code == 2 and "rl.optimizer.learning_rate" in text, "not refused by name")
    code = run(self.root, workdir,
               changed + ["--allow_config_change=rl.optimizer.learning_rate"])
    row.lost = f"with --allow_config_change: exit {code}"
    row.check(code == 0, f"the allowed change was refused: {log_text(workdir)[-800:]}")
    return row.done()

  # ---- rows: the evaluation pool ----------------------------------------------------

  def chromium(self, kind: str, workers: int = 1) -> Row:
    """A fake browser under the pool with its default settings."""
    from rcca_jax.evaluation import browser  # pylint: disable=import-outside-toplevel
    body = {"never_ready": NEVER_READY, "fails_always": FAILS,
            "fails_once": FAILS_ONCE.format(real=browser.find_chromium())}[kind]
    row = Row(f"chromium_{kind}_{workers}w", f"a Chromium that {kind.replace('_', ' ')}, "
              f"{workers} worker(s), default start timeout and retries")
    directory = self.root / "rows" / row.fault
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    out, seconds, tmp, stats = grade_with(fake_chromium(directory, body), workers)
    left = processes_naming(tmp)
    what = (f"raised: {str(out)[:160]}" if isinstance(out, RuntimeError)
            else f"records, rewards {[r['reward'] for r in out]}")
    row.did = f"{what} after {seconds:.1f} s; start failures {stats['start_failures']}"
    row.lost = f"left: {len(left)} processes, profile directory {os.path.exists(tmp)}"
    row.check(seconds <= 40, f"took {seconds:.1f} s (limit 40)")
    row.check(not left and not os.path.exists(tmp), "processes or files left")
    if kind == "fails_once":
      row.check(not isinstance(out, RuntimeError) and [r["reward"] for r in out] == [1.0, 1.0],
                "the retried start did not grade")
    else:
      row.check(isinstance(out, RuntimeError), "no error")
    return row.done()

  # ---- rows: the judge -------------------------------------------------------------------

  def judge(self, mode: str) -> Row:
    """The example apps of the judged task graded by the pool against a judge that
    misbehaves (`mode`) and against a working one, both with the default settings but a
    3 s budget per rubric."""
    from rcca_jax.data import tasks as tasks_lib  # pylint: disable=import-outside-toplevel
    from rcca_jax.evaluation import pool as pool_lib  # pylint: disable=import-outside-toplevel
    from rcca_jax.evaluation.config import EvalConfig  # pylint: disable=import-outside-toplevel
    scripts = {"never_answers": [("hang", 6.0)] * 50, "error_500": [(500, {})] * 50,
               "retry_after_429": [(429, {"Retry-After": "1"})] * 2,
               "not_json": [("body", "<html>busy</html>")] * 50}
    row = Row(f"judge_{mode}", f"a judge that {mode.replace('_', ' ')}")
    task = tasks_lib.parse_task({"id": "j", "request": "A greeting page", "rubrics": [
        {"id": "r1", "kind": "initial", "level": "core", "text": "Shows Hi",
         "check": 'expect text "h1" == "Hi"'},
        {"id": "r2", "kind": "initial", "level": "behavior", "text": "Friendly"},
        {"id": "r3", "kind": "initial", "level": "rendering", "text": "Laid out"}]})
    apps = [f"```html\n<!DOCTYPE html><html><body><h1>{t}</h1></body></html>\n```"
            for t in ("Hi", "Ho", "Hi there")]
    jobs = [pool_lib.Job(task, app, i) for i, app in enumerate(apps)]

    def verdict(request):  # r2 fails as minor, r3 passes
      failing = "Friendly" in request["messages"][1]["content"]
      return json.dumps({"passed": not failing, "severity": "minor" if failing else None,
                         "reason": "judged"})

    records = {}
    for name, actions in (("working", []), (mode, scripts[mode])):
      server = JudgeServer(actions, verdict)
      config = EvalConfig(judge_url=server.base, judge_model="m", judge_budget=3.0)
      try:
        with pool_lib.EvalPool(config, workers=1) as pool:
          start = time.monotonic()
          records[name] = list(pool.run(jobs))
          seconds = time.monotonic() - start
      finally:
        server.close()
    good, bad = records["working"], records[mode]
    unscorable = sum(r.get("unscorable") is not None for r in bad)
    row.did = (f"{unscorable} of {len(bad)} records unscorable, rewards "
               f"{[r['reward'] for r in bad]} vs working judge "
               f"{[r['reward'] for r in good]}, {seconds:.1f} s")
    for g, b in zip(good, bad):
      for rg, rb in zip(g["rubrics"], b["rubrics"]):
        row.check(rb["passed"] is None or rb["passed"] == rg["passed"],
                  f"rubric {rb['id']}: a verdict the judge did not give")
      row.check(b["reward"] is None or b["reward"] <= g["reward"],
                f"a reward rose: {b['reward']} > {g['reward']}")
    if mode == "retry_after_429":
      row.check([r["reward"] for r in bad] == [r["reward"] for r in good],
                "Retry-After was not waited out")
    elif mode in ("never_answers", "error_500", "not_json"):
      gated = [g for g in good if g["rubric_score"] is not None]
      row.check(unscorable == len(gated), "an app that reached the judge is not unscorable")
    row.lost = f"{unscorable} responses left out of training"
    return row.done()

  # ---- rows: grading faults (in this process, at the grader) ---------------------------

  def grading_failed(self, failed: int) -> Row:
    """RL with the real pool, `failed` of each step's 8 records replaced by the record
    the pool gives a response whose worker died on it twice (`pool.failed_record`)."""
    name = f"grading_failed_{failed}_of_8"
    row = Row(name, f"{failed} of 8 rollouts per RL step graded as their worker died "
              "(the pool's own record, unscorable)")
    workdir = self.fresh(name)
    proc = subprocess.run(
        [sys.executable, __file__, "--child-grading-failed", str(failed), str(workdir)],
        cwd=REPO, env=env(self.root), capture_output=True, text=True, timeout=RUN_TIMEOUT)
    out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    rows = [r for r in rows_of(workdir) if r["stage"] == "rl"]
    if failed < 8:
      row.did = (f"RL rows {[r['step'] for r in rows]}, grading_failed "
                 f"{[r.get('grading_failed') for r in rows]}, sequences "
                 f"{[r.get('sequences') for r in rows]}")
      row.check(proc.returncode == 0, f"child failed: {proc.stderr[-1500:]}")
      row.check(all(r.get("grading_failed") == failed for r in rows) and rows,
                "grading_failed not counted")
      row.check(all(r.get("sequences") == 8 - failed for r in rows),
                "unscorable rows not masked")
    else:
      saved = out.get("rl_checkpoints")
      row.did = f"stopped: {out.get('stopped', '')[:200]}"
      row.lost = f"RL checkpoints {saved}, RL rows {[r['step'] for r in rows]}"
      row.check(bool(out.get("stopped")), "the run did not stop")
      row.check(saved == [] and not rows, "a step was applied or checkpointed")
    return row.done()


def child_grading_failed(failed: int, workdir: str) -> None:
  """Runs the job in this process with `failed` of every 8-job batch unscorable."""
  from rcca_jax.credit.localize import localize_record  # pylint: disable=import-outside-toplevel
  from rcca_jax.evaluation import pool as pool_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.evaluation.grader import make_grader  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import faults  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import sections  # pylint: disable=import-outside-toplevel

  sys.path.insert(0, str(REPO))
  from experiments import tiny_natural  # pylint: disable=import-outside-toplevel
  config = tiny_natural.get_config()
  for arg in FULL[1:]:  # --config.a.b=value, as main's flags would set it
    path, value = arg[len("--config."):].split("=", 1)
    *parents, leaf = path.split(".")
    node = config
    for part in parents:
      node = node[part]
    try:
      node[leaf] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      node[leaf] = value
  job = sections.job_config(config)
  pool = make_grader(job.eval.evaluator, workers=1, post_process=localize_record)

  class FailingGrader:
    """The pool; in each batch of 8 (an RL step's), the first `failed` jobs get the
    record of a response whose worker died."""

    def __init__(self):
      self.stats = pool.stats

    def run(self, jobs, progress=None):
      jobs = list(jobs)
      lose = set(range(failed)) if len(jobs) == 8 else set()
      graded = iter(pool.run([j for i, j in enumerate(jobs) if i not in lose], progress))
      for i, job_ in enumerate(jobs):
        yield (pool_lib.failed_record(job_, "the evaluation worker died (injected)",
                                      pool.config, pool.post_process)
               if i in lose else next(graded))

    def close(self):
      pool.close()

  out: dict[str, Any] = {}
  try:
    trainer_lib.Trainer(config, workdir, grader=FailingGrader()).train()
  except faults.RunStopped as e:
    out["stopped"] = str(e)
  rl = pathlib.Path(workdir, "checkpoints", "rl")
  out["rl_checkpoints"] = sorted(int(p.name) for p in rl.iterdir() if p.name.isdigit()) \
      if rl.exists() else []
  print(json.dumps(out))


ROWS = {
    "grading_failed_2_of_8": lambda m: m.grading_failed(2),
    "grading_failed_8_of_8": lambda m: m.grading_failed(8),
    "nonfinite_sft": lambda m: m._nonfinite_row("sft"),  # pylint: disable=protected-access
    "nonfinite_rl": lambda m: m._nonfinite_row("rl"),  # pylint: disable=protected-access
    **{f"{sig.name.lower()}_{where}":
       (lambda m, s=sig, w=where: m._signal_row(s, w))  # pylint: disable=protected-access
       for sig in (signal.SIGTERM, signal.SIGKILL)
       for where in ("sft", "rl_step", "dev_eval")},
    "sigterm_ablation": Matrix.sigterm_ablation,
    "torn_metrics": Matrix.torn_metrics,
    "truncated_checkpoint": Matrix.truncated_checkpoint,
    "orbax_temp_dir": Matrix.orbax_temp_dir,
    "full_disk_cache": Matrix.full_disk_cache,
    "chromium_never_ready_1w": lambda m: m.chromium("never_ready", 1),
    "chromium_never_ready_2w": lambda m: m.chromium("never_ready", 2),
    "chromium_fails_always_1w": lambda m: m.chromium("fails_always", 1),
    "chromium_fails_once_1w": lambda m: m.chromium("fails_once", 1),
    **{f"judge_{mode}": (lambda m, k=mode: m.judge(k))
       for mode in ("never_answers", "error_500", "retry_after_429", "not_json")},
    "second_run_refused": Matrix.second_run,
    "changed_config_refused": Matrix.changed_config,
}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", default=",".join(ROWS))
  parser.add_argument("--root", default="/tmp/rcca_fault_matrix")
  parser.add_argument("--list", action="store_true")
  parser.add_argument("--child-grading-failed", nargs=2)
  args = parser.parse_args()
  if args.child_grading_failed:
    child_grading_failed(int(args.child_grading_failed[0]), args.child_grading_failed[1])
    return
  if args.list:
    print("\n".join(ROWS))
    return
  matrix = Matrix(pathlib.Path(args.root))
  t0 = time.time()
  results = []
  for name in args.rows.split(","):
    start = time.time()
    row = ROWS[name](matrix)
    results.append(row)
    print(f"| {row.fault} | {row.injected} | {row.did} | {row.lost} | {row.bitwise} | "
          f"{'ok' if row.ok else 'FAILED: ' + '; '.join(row.problems)[:300]} | "
          f"{time.time() - start:.0f} s |", flush=True)
  print(f"{sum(r.ok for r in results)} passed, {sum(not r.ok for r in results)} failed "
        f"in {time.time() - t0:.0f} s")
  if not all(r.ok for r in results):
    sys.exit(1)


if __name__ == "__main__":
  main()
