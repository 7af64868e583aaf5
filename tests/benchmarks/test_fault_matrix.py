"""benchmarks/fault_matrix.py's rows as tests: each fault injected into a short real run
(real signals, torn files, a full tmpfs, fake Chromium), every promise of its row held.

The rows share their baselines (an uninterrupted run, its post-SFT directory) under one
directory made for this module, so the first row pays for them.
"""

import importlib.util
import pathlib
import shutil
import sys
import tempfile

import pytest
from absl.testing import absltest
from absl.testing import parameterized

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "fault_matrix.py"
_SPEC = importlib.util.spec_from_file_location("fault_matrix", _PATH)
fault_matrix = importlib.util.module_from_spec(_SPEC)
sys.modules["fault_matrix"] = fault_matrix  # its dataclasses look their module up
_SPEC.loader.exec_module(fault_matrix)


class FaultMatrixTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = pathlib.Path(tempfile.mkdtemp(prefix="fault_matrix_"))
    cls.matrix = fault_matrix.Matrix(cls.root)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  @parameterized.named_parameters((name, name) for name in fault_matrix.ROWS)
  @pytest.mark.slow  # below the parameterization, so that every generated test keeps it
  def test_row(self, name):
    row = fault_matrix.ROWS[name](self.matrix)
    self.assertTrue(row.ok, f"{row.fault}: {row.problems} (did: {row.did}; lost: "
                            f"{row.lost}; {row.bitwise})")


class CodeFingerprintTest(absltest.TestCase):

  def test_changes_with_the_code_the_runs_execute_only(self):
    repo = pathlib.Path(self.create_tempdir().full_path)
    for name, text in (("rcca_jax/a.py", "x = 1\n"), ("rcca_jax/sub/b.py", "y = 2\n"),
                       ("experiments/c.py", "z = 3\n"), ("notes/d.md", "text\n")):
      (repo / name).parent.mkdir(parents=True, exist_ok=True)
      (repo / name).write_text(text)
    first = fault_matrix.code_fingerprint(repo)
    (repo / "notes/d.md").write_text("other text\n")
    self.assertEqual(fault_matrix.code_fingerprint(repo), first)
    (repo / "rcca_jax/sub/b.py").write_text("y = 3\n")
    second = fault_matrix.code_fingerprint(repo)
    self.assertNotEqual(second, first)
    (repo / "experiments/c.py").write_text("z = 4\n")
    self.assertNotEqual(fault_matrix.code_fingerprint(repo), second)


if __name__ == "__main__":
  absltest.main()
