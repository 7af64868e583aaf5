"""The Colab notebooks: valid, compiling, and executed end to end (real kernel)."""

import ast
import json
import os
import pathlib
from unittest import mock

import nbclient
import nbformat
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from tests.fixtures import sweep_fixtures

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "notebooks"
NAMES = ("credit_walkthrough", "small_model_ablation")


def execute(name: str, env: dict[str, str] | None = None, timeout: int = 300):
  nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
  with mock.patch.dict(os.environ, env or {}):
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
  return nb


def text_outputs(nb) -> str:
  out = []
  for cell in nb.cells:
    for o in cell.get("outputs", []):
      if o.output_type == "stream":
        out.append(o.text)
      elif o.output_type in ("display_data", "execute_result"):
        out.append(o.data.get("text/markdown", "") + o.data.get("text/html", ""))
  return "\n".join(out)


class NotebookFormatTest(parameterized.TestCase):

  @parameterized.parameters(*NAMES)
  def test_valid_and_compiles(self, name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    self.assertGreater(len(code), 3)
    self.assertIn("pip", code[0].source)  # the first cell installs the package
    for cell in code:
      ast.parse(cell.source)
      self.assertEqual(cell.get("outputs"), [], "commit notebooks without outputs")

  @parameterized.parameters(*NAMES)
  def test_setup_cell_names_what_to_do_without_a_checkout(self, name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    setup = next(c.source for c in nb.cells if c.cell_type == "code")
    self.assertNotIn("github.com", setup)  # no made-up repository URL
    cwd = os.getcwd()
    os.chdir(self.create_tempdir().full_path)  # no checkout above it
    try:
      with mock.patch.dict(os.environ, {"RCCA_JAX_REPO": ""}):
        with self.assertRaisesRegex(RuntimeError, "set RCCA_JAX_REPO to the git URL"):
          exec(compile(setup, "setup-cell", "exec"), {})  # pylint: disable=exec-used
    finally:
      os.chdir(cwd)


class WalkthroughTest(absltest.TestCase):

  def test_executes_and_shows_each_stage(self):
    text = text_outputs(execute("credit_walkthrough"))
    self.assertIn("reward: 0.6", text)
    self.assertIn("expected number in '#fahrenheit' == 212, got 232", text)
    self.assertIn("direct  [", text)  # spans printed
    self.assertIn("wbar=4.0", text)
    self.assertIn("<title>credit heatmap</title>", text)
    self.assertIn("loss 1.5284 = mean of per-token terms 1.5284", text)
    self.assertIn("plain GRPO loss (w = 1): 0.8000", text)


class AblationNotebookTest(absltest.TestCase):

  def test_loads_and_plots_a_sweep_directory(self):
    results = self.create_tempdir().full_path
    for setting, offset in (("s1_0", 0.0), ("s3_4", 0.15)):
      os.makedirs(os.path.join(results, setting))
      with open(os.path.join(results, setting, "summary.json"), "w") as f:
        json.dump(sweep_fixtures.summary(offset), f)
    nb = execute("small_model_ablation", {"ABLATION_RESULTS": results})
    text = text_outputs(nb)
    self.assertIn(f"results from {results}", text)  # RUN defaults to off
    self.assertIn("settings: s3_4, s1_0", text)  # the sweep's order
    self.assertIn("| s3_4 | rcca | 5 | 0.600 | 0.353 | -0.080 [", text)
    self.assertIn("| s1_0 | rcca | 5 | 0.600 | 0.433 | +0.000 [", text)
    self.assertTrue(any("image/png" in o.get("data", {})
                        for cell in nb.cells for o in cell.get("outputs", [])))

  @pytest.mark.slow
  def test_smoke_preset_runs_one_setting(self):
    workdir = self.create_tempdir().full_path
    text = text_outputs(execute("small_model_ablation", {
        "ABLATION_RUN": "1", "ABLATION_PRESET": "smoke", "ABLATION_WORKDIR": workdir,
        "ABLATION_SETTING": "s1_0"}, timeout=1500))
    self.assertIn(f"results from {workdir}", text)
    self.assertTrue(os.path.exists(os.path.join(workdir, "s1_0", "summary.json")))
    self.assertIn("| s1_0 | rcca_focus |", text)

if __name__ == "__main__":
  absltest.main()
