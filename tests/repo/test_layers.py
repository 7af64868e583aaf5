"""The package imports in one direction: base, then models/parallel, then the pipeline.

`rcca_jax/base` imports no other package; `models` and `parallel` only base and each
other; the pipeline packages data -> sampling -> evaluation -> credit -> rl -> train,
and `study` (ablations and sweeps) above them, each import base, models, parallel and
the packages before them, so nothing below `study` imports it. Top-level modules
(`main`, `evaluate`, `bench`, ...) are applications and may import anything; of them
only the aliases of the old study modules (`ALIASES`) import `study`, and within `study`
each module imports only those before it in `STUDY_ORDER`. No two modules of the
package import each other, directly or through others.
"""

import ast
import pathlib
from collections.abc import Sequence

from absl.testing import absltest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "rcca_jax"
PIPELINE = ("data", "sampling", "evaluation", "credit", "rl", "train")
BESIDE = ("models", "parallel")
TOP = ("study",)  # above the pipeline: the studies that run it (ablations, sweeps)
LAYERED = (*PIPELINE, *TOP)
# The study modules of the old layout, kept for one release as aliases of
# `rcca_jax.study` (docs/contracts.md).
ALIASES = ("rcca_jax.ablation", "rcca_jax.ablation.__main__", "rcca_jax.ablation_report",
           "rcca_jax.overrides", "rcca_jax.sweep", "rcca_jax.sweep_report")
# `rcca_jax.study`'s modules, each importing only those before it.
STUDY_ORDER = ("overrides", "stats", "ablation_report", "sweep_report", "ablation", "sweep",
               "__main__")


def allowed_imports(layer: str) -> set[str]:
  """The layers a module of `layer` may import (itself included)."""
  if layer == "base":
    return {"base"}
  if layer in BESIDE:
    return {"base", *BESIDE}
  return {"base", *BESIDE, *LAYERED[:LAYERED.index(layer) + 1]}


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
    if len(rel.parts) == 1 or rel.parts[0] not in ("base", *BESIDE, *LAYERED):
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


def importers_of(graph: dict[str, set[str]], package: str) -> list[str]:
  """The modules outside `package` that import one of its modules."""
  inside = lambda m: m == package or m.startswith(package + ".")
  return sorted(m for m, targets in graph.items()
                if not inside(m) and any(inside(t) for t in targets))


def against_order(graph: dict[str, set[str]], package: str, order: Sequence[str]
                  ) -> list[str]:
  """Each import "A -> B" between modules of `package` where B is not before A in
  `order` (a module that `order` leaves out ranks last)."""
  rank = {f"{package}.{name}": i for i, name in enumerate(order)}
  out = []
  for m in sorted(n for n in graph if n.startswith(package + ".")):
    for t in sorted(graph[m]):
      if t.startswith(package + ".") and rank.get(t, len(order)) >= rank.get(m, len(order)):
        out.append(f"{m} -> {t}")
  return out


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

  def test_only_the_aliases_import_study_from_outside(self):
    self.assertEqual(importers_of(module_graph(), "rcca_jax.study"), list(ALIASES))

  def test_study_imports_one_way(self):
    graph = module_graph()
    self.assertCountEqual([m.removeprefix("rcca_jax.study.") for m in graph
                           if m.startswith("rcca_jax.study.")], STUDY_ORDER)
    self.assertEqual(against_order(graph, "rcca_jax.study", STUDY_ORDER), [])
    study = {m: t for m, t in graph.items() if m.startswith("rcca_jax.study")}
    self.assertEqual(cycles(study), [])

  def test_the_order_checks_see_violations(self):
    graph = {"p.a": set(), "p.b": {"p.a"}, "p.c": {"p.b", "p.d"}, "p.d": {"p.a"},
             "q": {"p.b"}, "p": set(), "r": {"p"}}
    self.assertEqual(importers_of(graph, "p"), ["q", "r"])
    self.assertEqual(against_order(graph, "p", ("a", "b", "c")), ["p.c -> p.d"])
    self.assertEqual(against_order(graph, "p", ("b", "a", "d", "c")), ["p.b -> p.a"])
    self.assertEqual(against_order(graph, "p", ("a", "b", "d", "c")), [])
    self.assertIn("train", allowed_imports("study"))
    self.assertNotIn("study", allowed_imports("train"))

  def test_the_cycle_finder_sees_cycles(self):
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    self.assertEqual(cycles(graph), [["a", "b", "c"], ["d", "e"]])
    self.assertEqual(describe(graph, ["d", "e"]), "d -> e; e -> d")
    self.assertEqual(cycles({"a": {"b"}, "b": {"c"}}), [])
    tmp = pathlib.Path(self.create_tempdir().full_path) / "probe.py"
    tmp.write_text("def f():\n  from rcca_jax.models import llama_checkpoint, LingConfig\n"
                   "import rcca_jax.study.sweep\nfrom rcca_jax.study import ablation\n"
                   "import os\n")
    self.assertEqual(imported_modules(tmp, set(module_graph())),
                     {"rcca_jax.models.llama_checkpoint", "rcca_jax.models",
                      "rcca_jax.study.sweep", "rcca_jax.study.ablation"})


if __name__ == "__main__":
  absltest.main()
