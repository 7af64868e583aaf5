"""The package imports in one direction: base, then models/parallel, then the pipeline.

`rcca_jax/base` imports no other package; `models` and `parallel` only base and each
other; the pipeline packages data -> sampling -> evaluation -> credit -> rl -> train each
import base, models, parallel and the packages before them. Top-level modules (`main`,
`evaluate`, `ablation`, `bench`, ...) are applications and may import anything.
"""

import ast
import pathlib

from absl.testing import absltest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "rcca_jax"
PIPELINE = ("data", "sampling", "evaluation", "credit", "rl", "train")
BESIDE = ("models", "parallel")


def allowed_imports(layer: str) -> set[str]:
  """The layers a module of `layer` may import (itself included)."""
  if layer == "base":
    return {"base"}
  if layer in BESIDE:
    return {"base", *BESIDE}
  return {"base", *BESIDE, *PIPELINE[:PIPELINE.index(layer) + 1]}


def imported_layers(path: pathlib.Path) -> list[tuple[int, str]]:
  """(line, layer) of every rcca_jax import in a file, function-level ones included."""
  out = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names = ([f"{node.module}.{a.name}" for a in node.names]
               if node.module == "rcca_jax" else [node.module])
    else:
      continue
    for name in names:
      parts = name.split(".")
      if parts[0] == "rcca_jax" and len(parts) > 1:
        out.append((node.lineno, parts[1]))
  return sorted(out)


def violations() -> list[str]:
  out = []
  for path in sorted(PACKAGE.rglob("*.py")):
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1 or rel.parts[0] not in ("base", *BESIDE, *PIPELINE):
      continue  # applications
    layer = rel.parts[0]
    for line, target in imported_layers(path):
      if target not in allowed_imports(layer):
        out.append(f"rcca_jax/{rel}:{line}: {layer} imports {target}")
  return out


class LayersTest(absltest.TestCase):

  def test_no_import_against_the_pipeline(self):
    self.assertEqual(violations(), [])

  def test_the_checker_sees_a_violation(self):
    tmp = pathlib.Path(self.create_tempdir().full_path) / "probe.py"
    tmp.write_text("def f():\n  from rcca_jax.credit import localize\n"
                   "import rcca_jax.train.trainer\nfrom rcca_jax import rl\n")
    self.assertEqual(imported_layers(tmp), [(2, "credit"), (3, "train"), (4, "rl")])
    self.assertNotIn("credit", allowed_imports("data"))
    self.assertIn("data", allowed_imports("credit"))
    self.assertEqual(allowed_imports("base"), {"base"})


if __name__ == "__main__":
  absltest.main()
