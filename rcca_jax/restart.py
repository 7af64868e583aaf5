"""Reruns a job while it stops preempted: the restart loop of docs/faults.md#8-restarts.

    python -m rcca_jax.restart [--max_restarts=N] [--delay=S] -- \
        python -m rcca_jax.main --config=... --workdir=DIR

The command's exit status decides: 75 (preempted, checkpointed) runs it again, after
`--delay` seconds, at most `--max_restarts` times; anything else ends the loop with that
status: 0 done, 2 a bad config or a busy workdir, 3 stopped safely (restarting as is
cannot help). A job killed by a signal (SIGKILL, an out-of-memory kill) is restarted too:
it resumes from its last checkpoint. The loop's own SIGTERM is passed on to the job,
which then checkpoints and exits 75, and the loop ends with it.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

RESTART = 75  # train.faults.EXIT_PREEMPTED (not imported: this module loads no JAX)


def should_restart(status: int) -> bool:
  """75 (preempted) and a death by a signal (negative status) restart."""
  return status == RESTART or status < 0


def run(command: Sequence[str], *, max_restarts: int = 100, delay: float = 0.0,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
        ) -> int:
  """Runs `command` until it exits with a status that does not restart it, or
  `max_restarts` restarts are spent; the last exit status (128 + N for signal N)."""
  stopping = False
  child: Optional[subprocess.Popen] = None

  def forward(signum, _frame):
    nonlocal stopping
    stopping = True
    if child is not None and child.poll() is None:
      child.send_signal(signum)

  previous = signal.signal(signal.SIGTERM, forward)
  try:
    for attempt in range(max_restarts + 1):
      child = subprocess.Popen(list(command))
      status = child.wait()
      if stopping or not should_restart(status) or attempt == max_restarts:
        break
      log(f"restart: exit {status}; restarting ({attempt + 1} of {max_restarts})")
      time.sleep(delay)
  finally:
    signal.signal(signal.SIGTERM, previous)
  return 128 - status if status < 0 else status


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--max_restarts", type=int, default=100)
  p.add_argument("--delay", type=float, default=5.0, help="seconds before a restart")
  p.add_argument("command", nargs=argparse.REMAINDER)
  args = p.parse_args(argv)
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command:
    p.error("no command given (put it after --)")
  return run(command, max_restarts=args.max_restarts, delay=args.delay)


if __name__ == "__main__":
  sys.exit(main())
