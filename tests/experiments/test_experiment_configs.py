"""Experiment configs set only what differs from the section defaults
(`train/sections.py`): a literal assigned to a field that equals its default fails,
unless the config lists the field in `DELIBERATE` (e.g. a config it builds on sets
it otherwise). Every config also builds into a valid job."""

import ast
import dataclasses
import importlib
import math
import pathlib
import sys

import jax
from absl.testing import absltest, parameterized

from rcca_jax.train import config_check
from rcca_jax.train import sections

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
CONFIGS = sorted(p.stem for p in (REPO / "experiments").glob("*.py")
                 if p.stem != "__init__" and "def get_config" in p.read_text())


def _dotted(node: ast.AST) -> str | None:
  """`config.a.b` -> "a.b" (None for anything not rooted at the name `config`)."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if isinstance(node, ast.Name) and node.id == "config" and parts:
    return ".".join(reversed(parts))
  return None


def _literal(node: ast.AST):
  try:
    return True, ast.literal_eval(node)
  except (ValueError, SyntaxError, TypeError):
    return False, None


def literal_settings(source: str) -> list[tuple[int, str, object]]:
  """(line, dotted field, value) of every literal a config's source sets: `config.a.b =
  LITERAL`, `config.a.update(b=LITERAL, ...)`, `config.a = ConfigDict(dict(b=LITERAL))`."""
  out = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
      path = _dotted(node.targets[0])
      if path is None:
        continue
      ok, value = _literal(node.value)
      if ok:
        out.append((node.lineno, path, value))
      for call in ast.walk(node.value):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "dict":
          out += [(k.value.lineno, f"{path}.{k.arg}", v) for k in call.keywords
                  for ok, v in [_literal(k.value)] if ok and k.arg]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr == "update"):
      path = _dotted(node.func.value)
      if path is not None:
        out += [(k.value.lineno, f"{path}.{k.arg}", v) for k in node.keywords
                for ok, v in [_literal(k.value)] if ok and k.arg]
  return out


def _same(value, default) -> bool:
  if isinstance(default, tuple):
    default = list(default)
  if isinstance(value, tuple):
    value = list(value)
  return type(value) is type(default) and value == default


def restated_defaults(source: str, deliberate=()) -> list[str]:
  out = []
  for line, path, value in literal_settings(source):
    try:
      default = sections.default(path)
    except KeyError:
      continue
    if default is not dataclasses.MISSING and _same(value, default) and (
        path not in deliberate):
      out.append((line, f"line {line}: {path} = {value!r} is its default"))
  return [text for _, text in sorted(out)]


class ExperimentConfigsTest(parameterized.TestCase):

  def test_finds_a_restated_default(self):
    source = ("def get_config():\n  config = base()\n  config.rl.overlap_steps = 0\n"
              "  config.eval.update(workers=2, per_family=3)\n"
              "  config.credit = ConfigDict(dict(direct=3.0, cap=5.0))\n")
    self.assertEqual(restated_defaults(source), [
        "line 3: rl.overlap_steps = 0 is its default",
        "line 4: eval.workers = 2 is its default",
        "line 5: credit.direct = 3.0 is its default"])
    self.assertEqual(restated_defaults(source, ("rl.overlap_steps", "eval.workers",
                                                "credit.direct")), [])

  @parameterized.parameters(*CONFIGS)
  def test_sets_only_what_differs(self, name):
    path = REPO / "experiments" / f"{name}.py"
    module = importlib.import_module(f"experiments.{name}")
    deliberate = getattr(module, "DELIBERATE", ())
    self.assertEqual(restated_defaults(path.read_text(), deliberate), [],
                     f"{path}: set these only if DELIBERATE says why")
    config = module.get_config()
    sections.job_config(config)
    sizes = [int(v) for v in config.mesh.values()] if "mesh" in config else [-1]
    devices = math.prod(sizes) if min(sizes) > 0 else jax.device_count()
    self.assertEqual(config_check.problems(config, num_devices=devices, mode="plan"), [])


if __name__ == "__main__":
  absltest.main()
