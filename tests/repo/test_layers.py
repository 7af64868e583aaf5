"""The package imports in one direction: base, then models/parallel, then the pipeline.

`rcca_jax/base` imports no other package; `models` and `parallel` only base and each
other; the pipeline packages data -> sampling -> evaluation -> credit -> rl -> train each
import base, models, parallel and the packages before them. Top-level modules (`main`,
`evaluate`, `ablation`, `bench`, ...) are applications and may import anything. No two
modules of the package import each other, directly or through others.
"""

import ast
import pathlib

from absl.testing import absltest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "rcca_jax"
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


def module_name(path: pathlib.Path) -> str:
  """`rcca_jax/a/b.py` -> "rcca_jax.a.b"; a package's `__init__.py` is the package."""
  parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: pathlib.Path, modules: set[str]) -> set[str]:
  """The `modules` a file imports, function-level imports included; `from P import x`
  imports module P.x when there is one, else P."""
  out = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      out.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                 else node.module for a in node.names)
  return out & modules


def module_graph() -> dict[str, set[str]]:
  """{module: the other modules of the package it imports}."""
  paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
  return {m: imported_modules(p, set(paths)) - {m} for m, p in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components of more than one node (Tarjan's algorithm)."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  out = []

  def visit(v: str) -> None:
    index[v] = low[v] = len(index)
    stack.append(v)
    for w in sorted(graph.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = stack[stack.index(v):]
      del stack[stack.index(v):]
      if len(component) > 1:
        out.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return sorted(out)


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
  """The imports inside one cycle: "a -> b; b -> a"."""
  return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(component)))}"
                   for m in component)


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

  def test_no_import_cycles(self):
    graph = module_graph()
    self.assertEqual([describe(graph, c) for c in cycles(graph)], [])

  def test_the_cycle_finder_sees_cycles(self):
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    self.assertEqual(cycles(graph), [["a", "b", "c"], ["d", "e"]])
    self.assertEqual(describe(graph, ["d", "e"]), "d -> e; e -> d")
    self.assertEqual(cycles({"a": {"b"}, "b": {"c"}}), [])
    tmp = pathlib.Path(self.create_tempdir().full_path) / "probe.py"
    tmp.write_text("def f():\n  from rcca_jax.models import llama_checkpoint, LingConfig\n"
                   "import rcca_jax.sweep\nfrom rcca_jax import ablation\nimport os\n")
    self.assertEqual(imported_modules(tmp, set(module_graph())),
                     {"rcca_jax.models.llama_checkpoint", "rcca_jax.models", "rcca_jax.sweep",
                      "rcca_jax.ablation"})


if __name__ == "__main__":
  absltest.main()
