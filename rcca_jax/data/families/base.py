"""Shared pieces of the task families: the Family type, check builders, page template.

A family draws its parameters from a `random.Random`, then returns a `Draft`: the
request text, the rubrics (each with an executable `check` in the rubric DSL of
docs/contracts.md#2-rubric-check-dsl) and a reference app that passes all of them.
"""

from __future__ import annotations

import dataclasses
import html
import json
import random
from typing import Any, Callable, Sequence

from rcca_jax.base.schema import KINDS, LEVELS
from rcca_jax.data import tasks


@dataclasses.dataclass(frozen=True)
class Rule:
  """One rubric before it gets its id: kind, level, text and check steps."""

  kind: str
  level: str
  text: str
  steps: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Draft:
  """What a family's builder returns for one parameter draw."""

  request: str
  rules: tuple[Rule, ...]
  reference: str
  entropy: float = 0.0  # nats of the values the app must copy (families/copying.py)
  copied: tuple[tuple[str, float], ...] = ()  # each such value and its nats


@dataclasses.dataclass(frozen=True)
class Family:
  """A parameterised generator of mini-app tasks. A split-aware family
  (`split_build`) draws its values for a split: `train`, `dev` or `novel`
  (families/copying.py); the others draw the same way for every split."""

  name: str
  category: str
  difficulty: str
  build: Callable[[random.Random], Draft] | None = None
  split_build: Callable[..., Draft] | None = None  # (rng, split, drafting=None)

  def __post_init__(self):
    if (self.build is None) == (self.split_build is None):
      raise ValueError(f"family {self.name}: give exactly one of build and split_build")

  @property
  def split_aware(self) -> bool:
    return self.split_build is not None

  def draft(self, rng: random.Random, split: str = "train", drafting: Any = None) -> Draft:
    """One draw; `drafting` (families/copying.Drafting) reaches split-aware families only."""
    if self.split_build is not None:
      return self.split_build(rng, split, drafting)
    return self.build(rng)

  def to_task(self, draft: Draft, index: int) -> tasks.Task:
    """Turns a draft into a validated Task with id `{name}-{index:05d}`."""
    obj = {
        "id": f"{self.name}-{index:05d}",
        "request": draft.request,
        "category": self.category,
        "difficulty": self.difficulty,
        "rubrics": [
            {"id": f"r{i + 1}", "kind": r.kind, "level": r.level, "text": r.text,
             "check": "; ".join(r.steps)}
            for i, r in enumerate(draft.rules)
        ],
        "reference": draft.reference,
    }
    return tasks.parse_task(obj, where=f"family {self.name}")

  def generate(self, rng: random.Random, index: int, split: str = "train") -> tasks.Task:
    return self.to_task(self.draft(rng, split), index)


def rule(kind: str, level: str, text: str, *steps: str) -> Rule:
  if kind not in KINDS or level not in LEVELS or not steps:
    raise ValueError(f"bad rule {kind!r}/{level!r} with {len(steps)} steps: {text}")
  return Rule(kind, level, text, tuple(steps))


# ---- check steps (docs/contracts.md#2-rubric-check-dsl); every string argument is DSL-quoted

def q(s: object) -> str:
  """A DSL string literal."""
  return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def click(sel: str) -> str:
  return f"click {q(sel)}"


def fill(sel: str, text: object) -> str:
  return f"fill {q(sel)} {q(text)}"


def press(key: str, sel: str | None = None) -> str:
  return f"press {q(sel)} {q(key)}" if sel else f"press {q(key)}"


def select(sel: str, value: str) -> str:
  return f"select {q(sel)} {q(value)}"


def check(sel: str) -> str:
  return f"check {q(sel)}"


def wait(ms: int) -> str:
  return f"wait {int(ms)}"


def exists(sel: str) -> str:
  return f"expect exists {q(sel)}"


def visible(sel: str) -> str:
  return f"expect visible {q(sel)}"


def hidden(sel: str) -> str:
  return f"expect hidden {q(sel)}"


def count(sel: str, op: str, n: int) -> str:
  return f"expect count {q(sel)} {op} {int(n)}"


def text(sel: str, op: str, s: object) -> str:
  return f"expect text {q(sel)} {op} {q(s)}"


def value(sel: str, op: str, s: object) -> str:
  return f"expect value {q(sel)} {op} {q(s)}"


def attr(sel: str, name: str, op: str, s: object) -> str:
  return f"expect attr {q(sel)} {q(name)} {op} {q(s)}"


def style(sel: str, prop: str, op: str, s: object) -> str:
  return f"expect style {q(sel)} {q(prop)} {op} {q(s)}"


def number(sel: str, op: str, x: float) -> str:
  return f"expect number {q(sel)} {op} {x:g}"


def js(expr: str) -> str:
  return f"expect js {q(expr)}"


def no_errors() -> str:
  return "expect no_errors"


# ---- parameter pools ----

COLORS = (
    ("blue", "#2563eb"), ("red", "#dc2626"), ("green", "#16a34a"), ("purple", "#9333ea"),
    ("orange", "#ea580c"), ("teal", "#0d9488"), ("pink", "#db2777"), ("indigo", "#4f46e5"),
    ("amber", "#b45309"), ("slate", "#475569"), ("crimson", "#be123c"), ("navy", "#1e3a8a"),
)

OPENINGS = ("Build", "Create", "Make", "Write", "Implement", "Put together")


def rgb(hex_color: str) -> str:
  """`#rrggbb` -> the computed-style form `rgb(r, g, b)`."""
  h = hex_color.lstrip("#")
  return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


def pick(rng: random.Random, pool: Sequence, k: int | None = None):
  """One element of `pool`, or `k` distinct ones (in drawn order)."""
  return rng.choice(pool) if k is None else rng.sample(list(pool), k)


def article(word: str) -> str:
  return "an" if word[:1].lower() in "aeiou" else "a"


def opening(rng: random.Random, thing: str) -> str:
  where = pick(rng, ("as a single HTML file", "in one self-contained HTML page",
                     "as one HTML document with inline CSS and JavaScript"))
  return f"{pick(rng, OPENINGS)} {thing} {where}."


def esc(s: object) -> str:
  return html.escape(str(s), quote=True)


def jsv(x: object) -> str:
  """A JavaScript literal for a JSON-able value."""
  return json.dumps(x, ensure_ascii=False)


def page(title: str, css: str, body: str, script: str) -> str:
  """A complete small HTML document with inline CSS and JS."""
  return (
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      f"<title>{esc(title)}</title>\n<style>\n"
      "body { font-family: system-ui, sans-serif; margin: 2rem; }\n"
      "button { padding: .4rem .8rem; margin: .2rem; cursor: pointer; }\n"
      f"{css.strip()}\n</style>\n</head>\n<body>\n{body.strip()}\n"
      f"<script>\n{script.strip()}\n</script>\n</body>\n</html>\n")
