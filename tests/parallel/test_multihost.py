"""The main job over two JAX processes on one machine, then resumed by one process.

The end-to-end test runs exactly the README's "Running on a cluster" commands.
"""

import os
import pathlib
import socket
import subprocess
import sys

import pytest
from absl.testing import absltest

from rcca_jax.parallel import multihost
from rcca_jax.train import run_log

REPO = pathlib.Path(__file__).resolve().parents[2]
ACCEPTANCE = ["--config.sft.num_steps=4", "--config.eval.enabled=False",
              "--config.rl.prompts_per_step=2"]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _main(workdir: str, devices: int, *extra: str, log: str) -> subprocess.Popen:
  env = dict(os.environ, JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false",
             XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                       f"--xla_force_host_platform_device_count={devices}")
  cmd = [sys.executable, "-m", "rcca_jax.main", "--config=experiments/tiny_natural.py",
         f"--workdir={workdir}", *ACCEPTANCE, *extra]
  with open(log, "w", encoding="utf-8") as out:
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _tail(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()[-3000:]


class SingleProcessTest(absltest.TestCase):
  """In one process every hook is the identity."""

  def test_hooks_are_identities(self):
    batch = {"input_ids": [[1, 2], [3, 4]]}
    self.assertIs(multihost.local_share(batch, None), batch)
    fn = lambda state, batch: (state, batch)
    self.assertIs(multihost.feed_global(fn, None), fn)
    self.assertIs(multihost.local_logprobs(fn, None), fn)
    self.assertEqual(multihost.prompt_share(None, ["a", "b"], 4), ["a", "b"])
    self.assertEqual(multihost.gather_shares({"loss": 1.0}, 4), [({"loss": 1.0}, 4)])
    self.assertIsNone(multihost.sampling_mesh(None))


@pytest.mark.slow
class TwoProcessMainTest(absltest.TestCase):

  def _two_processes(self, workdir: str, *extra: str, logs: list[str]) -> None:
    address = f"--coordinator_address=127.0.0.1:{_free_port()}"
    procs = [_main(workdir, 2, *extra, address, "--num_processes=2", f"--process_id={i}",
                   log=logs[i]) for i in range(2)]
    for proc, log in zip(procs, logs):
      self.assertEqual(proc.wait(timeout=1500), 0, _tail(log))

  def test_two_processes_then_one_resumes(self):
    tmp = self.create_tempdir().full_path
    workdir = os.path.join(tmp, "run")
    logs = [os.path.join(tmp, f"p{i}.log") for i in range(5)]
    self._two_processes(workdir, "--config.rl.num_steps=2", logs=logs[:2])
    rows = run_log.read_rows(workdir)
    self.assertEqual([r["step"] for r in rows if r["stage"] == "rl"], [1, 2])
    self.assertEqual([r["step"] for r in rows if r["stage"] == "sft"], [4])
    for row in rows:
      if row["stage"] == "rl":
        self.assertTrue(0.0 <= row["reward_mean"] <= 1.0, row)
    resumed = _main(workdir, 4, "--config.rl.num_steps=3", log=logs[2])
    self.assertEqual(resumed.wait(timeout=1500), 0, _tail(logs[2]))
    rows = run_log.read_rows(workdir)
    self.assertEqual([r["step"] for r in rows if r["stage"] == "rl"], [1, 2, 3])
    self.assertEqual([r["step"] for r in rows if r["stage"] == "sft"], [4])
    # --mode=eval on two processes: process 0 evaluates and prints, process 1 waits.
    self._two_processes(workdir, "--mode=eval", "--config.eval.num_tasks=1",
                        "--config.rl.num_steps=3", logs=logs[3:])
    self.assertEqual(os.listdir(os.path.join(workdir, "eval")), ["rl_000003_dev"])
    self.assertIn('"samples": 1', _tail(logs[3]).strip().splitlines()[-1])
    self.assertNotIn('"samples"', _tail(logs[4]))


if __name__ == "__main__":
  absltest.main()
