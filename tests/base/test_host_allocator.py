"""The host allocator: a process re-executed with tcmalloc, its children without it,
and XLA's per-step buffers no longer page-faulted in again (real processes)."""

import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

from absl.testing import absltest

from rcca_jax.base import host_allocator

# A jitted step whose temporaries (two [4096, 4096] float32 buffers, 64 MB each) are
# above every glibc mmap threshold; the minor page faults of its 6th-10th calls, its
# result's checksum, whether tcmalloc is mapped, the preload children would inherit,
# and whether a child process runs with tcmalloc.
PROBE = textwrap.dedent("""
    import json, os, resource, subprocess, sys
    from rcca_jax.base import host_allocator
    host_allocator.preload_tcmalloc()
    import jax, jax.numpy as jnp
    step = jax.jit(lambda x: jnp.tanh(jnp.outer(x, x) * 1e-3).sum(0) @ jnp.outer(x, x))
    x = jnp.linspace(0.0, 1.0, 4096)
    for _ in range(5):
      y = step(x).block_until_ready()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
      y = step(x).block_until_ready()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5
    child = subprocess.run([sys.executable, "-c", "from rcca_jax.base import "
                            "host_allocator as h; print(h.tcmalloc_loaded())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    print(json.dumps({"loaded": host_allocator.tcmalloc_loaded(), "faults": faults,
                      "sum": float(y.sum()), "preload": os.environ.get("LD_PRELOAD"),
                      "child": child}))
""")


# 600 MB of arrays freed at once, then the free memory tcmalloc keeps, right away and
# after the reserve's thread had 5 polls.
RETAIN = textwrap.dedent("""
    import json, time
    from rcca_jax.base import host_allocator
    host_allocator.preload_tcmalloc()
    import numpy as np
    free_bytes, _ = host_allocator._tcmalloc_api()
    arrays = [np.ones(25_000_000) for _ in range(3)]
    del arrays
    right_away = free_bytes()
    time.sleep(0.5)
    print(json.dumps({"right_away": right_away, "later": free_bytes()}))
""")


def run(code: str, env: dict[str, str]) -> dict:
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True, env=env, timeout=300)
  return json.loads(out.stdout.strip().splitlines()[-1])


def probe(allocator: str | None) -> dict:
  # The jobs' own XLA flags: with the tests' fast-compile ones (unoptimised programs)
  # some temporaries fall outside tcmalloc's reuse on some runs.
  # A reserve of 1 MB: tcmalloc keeps what it frees however short of memory the
  # machine is (the reserve's releases are the test below).
  env = {**os.environ, "XLA_FLAGS": "", host_allocator.RESERVE_ENV: "1"}
  env.pop(host_allocator.ENV, None)
  env.pop("LD_PRELOAD", None)
  if allocator is not None:
    env[host_allocator.ENV] = allocator
  return run(PROBE, env)


@absltest.skipUnless(host_allocator.find_tcmalloc(), "libtcmalloc-minimal4 not installed")
class HostAllocatorTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tcmalloc, cls.system = probe(None), probe("system")  # tcmalloc by default

  def test_the_process_runs_with_tcmalloc_and_its_children_without(self):
    self.assertTrue(self.tcmalloc["loaded"])
    self.assertIsNone(self.tcmalloc["preload"])
    self.assertEqual(self.tcmalloc["child"], "False")
    self.assertFalse(self.system["loaded"])
    self.assertFalse(host_allocator.tcmalloc_loaded())  # pytest itself: not re-executed

  def test_steady_steps_stop_faulting_their_buffers_in(self):
    # glibc maps each 64 MB temporary afresh: at least 16,384 4-KB pages a call.
    # tcmalloc reuses them: 0-1 faults a call on most runs, about 3,279 on some (17 of
    # 19 and 2 of 3 runs, at its default release rate and at rate 0 alike); a quarter of
    # one temporary's pages bounds it.
    self.assertGreater(self.system["faults"], 16384)
    self.assertLess(self.tcmalloc["faults"], 16384 / 4)

  def test_the_arithmetic_is_the_same(self):
    self.assertEqual(self.tcmalloc["sum"], self.system["sum"])


  def test_free_memory_goes_back_when_the_machine_runs_short(self):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", host_allocator.ENV)}
    # A reserve above the machine's memory: always short, so all free pages go back;
    # a reserve of 1 MB: never short, so tcmalloc (release rate 0) keeps all 600 MB.
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    short = run(RETAIN, {**env, host_allocator.RESERVE_ENV: str(2 * total_mb)})
    plenty = run(RETAIN, {**env, host_allocator.RESERVE_ENV: "1"})
    for result in (short, plenty):
      self.assertGreaterEqual(result["right_away"], 600_000_000)
    self.assertLess(short["later"], 1 << 20)
    self.assertGreaterEqual(plenty["later"], 600_000_000)

  def test_the_default_reserve_is_a_quarter_of_memory(self):
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    env = {k: v for k, v in os.environ.items() if k != host_allocator.RESERVE_ENV}
    with mock.patch.dict(os.environ, env, clear=True):
      self.assertEqual(host_allocator.reserve_bytes(), total // 4)
    self.assertGreater(host_allocator.available_bytes(), 0)


if __name__ == "__main__":
  absltest.main()
