"""The study's old paths, aliases of `rcca_jax.study` kept for one release
(docs/contracts.md#8-interfaces-of-the-second-wave): they resolve to the same objects,
the old command still runs, and nothing else in the repository uses them."""

import ast
import importlib
import json
import pathlib
import subprocess
import sys

from absl.testing import absltest
from absl.testing import parameterized

from tests.repo import test_layers

REPO = pathlib.Path(__file__).resolve().parents[2]
# Alias -> the study modules whose public names it re-exports.
ALIASES = {
    "rcca_jax.ablation": ("rcca_jax.study.ablation",),
    "rcca_jax.ablation.__main__": ("rcca_jax.study.__main__",),
    "rcca_jax.ablation_report": ("rcca_jax.study.ablation_report", "rcca_jax.study.stats"),
    "rcca_jax.overrides": ("rcca_jax.study.overrides",),
    "rcca_jax.sweep": ("rcca_jax.study.sweep",),
    "rcca_jax.sweep_report": ("rcca_jax.study.sweep_report",),
}
# Files that may name the aliases: the aliases, this test and the layer test's list.
EXEMPT = {pathlib.Path(__file__).resolve(), REPO / "tests" / "repo" / "test_layers.py",
          REPO / "rcca_jax" / "ablation" / "__init__.py",
          REPO / "rcca_jax" / "ablation" / "__main__.py",
          *(REPO / "rcca_jax" / f"{name}.py"
            for name in ("ablation_report", "overrides", "sweep", "sweep_report"))}


def alias_uses(source: str) -> list[str]:
  """The aliases a Python source imports, or names whole in a string (`-m NAME`)."""
  out = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      out.add(node.module)
      out.update(f"{node.module}.{a.name}" for a in node.names)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
      out.add(node.value)
  return sorted(out & set(ALIASES))


def sources() -> list[tuple[pathlib.Path, str]]:
  """The repository's Python files and notebook code cells (committed results aside)."""
  out = []
  for top in ("rcca_jax", "tests", "benchmarks", "experiments"):
    for path in sorted((REPO / top).rglob("*")):
      if "results" in path.relative_to(REPO).parts or path.resolve() in EXEMPT:
        continue
      if path.suffix == ".py":
        out.append((path, path.read_text(encoding="utf-8")))
      elif path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        out += [(path, "".join(c["source"])) for c in cells if c["cell_type"] == "code"]
  return out


class AliasesTest(parameterized.TestCase):

  def test_the_aliases_are_the_layer_tests(self):
    self.assertCountEqual(ALIASES, test_layers.ALIASES)

  @parameterized.parameters(*ALIASES)
  def test_alias_resolves_to_the_same_objects(self, alias):
    module = importlib.import_module(alias)
    self.assertIn("alias kept for one release", module.__doc__.lower())
    for target in map(importlib.import_module, ALIASES[alias]):
      names = [n for n in vars(target) if not n.startswith("_")]
      self.assertNotEmpty(names)
      for name in names:
        self.assertIs(getattr(module, name), getattr(target, name), f"{alias}.{name}")

  @parameterized.parameters("rcca_jax.ablation", "rcca_jax.study")
  def test_the_old_and_new_command_check_the_config(self, module):
    workdir = self.create_tempdir().full_path
    proc = subprocess.run(
        [sys.executable, "-m", module, "--config=experiments/ablation_small.py",
         f"--workdir={workdir}", "--seeds=0"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    self.assertEqual(proc.returncode, 2, proc.stderr[-3000:])
    self.assertIn("invalid config (1 problem):\n  - --seeds=0: at least one seed\n",
                  proc.stderr)
    self.assertNotIn("Traceback", proc.stderr)

  def test_nothing_else_uses_the_aliases(self):
    found = [f"{path.relative_to(REPO)}: {name}" for path, source in sources()
             for name in alias_uses(source)]
    self.assertEqual(found, [])

  def test_the_scan_sees_each_use(self):
    self.assertEqual(alias_uses("from rcca_jax import ablation, sweep_report\n"
                                "from rcca_jax.ablation import __main__\n"
                                "import rcca_jax.overrides\n"
                                "CMD = ['-m', 'rcca_jax.ablation_report']\n"
                                "from rcca_jax.study import ablation, sweep\n"
                                "'''python -m rcca_jax.sweep'''\n"),
                     ["rcca_jax.ablation", "rcca_jax.ablation.__main__",
                      "rcca_jax.ablation_report", "rcca_jax.overrides",
                      "rcca_jax.sweep_report"])


if __name__ == "__main__":
  absltest.main()
