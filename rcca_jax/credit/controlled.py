"""The ablation's controlled setting: fixed requests whose SFT targets carry known bugs.

The first `tasks_per_family` train tasks of each chosen family are kept. Each gets one
mutant of its reference (`credit/mutations.py`) that fails at least one of its rubrics, and
a mutant rate taken round-robin from `rates` (shifted every round of operators). SFT
then sees, per task, `draws` targets of which `round(rate * draws)` are the mutant: the
SFT policy writes that bug at about that rate, and greedy decoding writes it where the
rate is above one half. RL on the same
requests has to unlearn the bug. Because the bug and its span are known, a rollout that
reproduces the mutant tells whether credit assignment blamed the right characters.

The set is materialised once as a task file: ordinary tasks (CONTRACTS §1) with
`extra["controlled"] = {"operator", "description", "response", "bug_span", "rate",
"reward"}` (the mutant response is the full answer text, fence included), so every arm
and seed of an ablation reads the same bugs.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Mapping, Sequence

from rcca_jax.base import mapping
from rcca_jax.credit import mutations
from rcca_jax.data import chat
from rcca_jax.data.tasks import Task, family_of

# Scores (task, response) pairs; returns one reward per pair (the evaluator in practice).
Scorer = Callable[[Sequence[tuple[Task, str]]], list[float]]
KEY = "controlled"


@dataclasses.dataclass(frozen=True)
class ControlledSpec:
  """Which tasks, which bugs and how often; all of it config (`data.controlled`)."""

  families: tuple[str, ...]
  tasks_per_family: int = 1
  rates: tuple[float, ...] = (0.25, 0.6, 0.75, 0.9)
  operators: tuple[str, ...] = ("handler_op", "drop_listener", "misspell_id", "throw")
  draws: int = 20
  max_mutant_reward: float = 0.9
  seed: int = 0

  def __post_init__(self):
    if not self.families:
      raise ValueError("data.controlled.families is empty")
    bad = [r for r in self.rates if not 0.0 <= r <= 1.0]
    if not self.rates or bad:
      raise ValueError(f"data.controlled.rates must be in [0, 1], got {list(self.rates)}")
    unknown = set(self.operators) - set(mutations.OPERATORS)
    if not self.operators or unknown:
      raise ValueError(f"data.controlled.operators: unknown {sorted(unknown)} "
                       f"(known: {list(mutations.OPERATORS)})")
    if self.draws < 1 or self.tasks_per_family < 1:
      raise ValueError("data.controlled.draws and tasks_per_family must be >= 1")

  @classmethod
  def from_mapping(cls, d: Mapping[str, Any]) -> "ControlledSpec":
    kw = mapping.strict_kwargs(cls, d, "data.controlled fields", ignore={"path"})
    for name in ("families", "rates", "operators"):
      if name in kw:
        kw[name] = tuple(kw[name])
    return cls(**kw)


def pick_tasks(tasks: Sequence[Task], spec: ControlledSpec) -> list[Task]:
  """The first `tasks_per_family` tasks with a reference of each family, family order."""
  picked = []
  for family in spec.families:
    of_family = [t for t in tasks if family_of(t) == family and t.reference]
    if not of_family:
      raise ValueError(f"data.controlled.families: no train task of family {family!r}")
    picked.extend(of_family[:spec.tasks_per_family])
  return picked


def build(tasks: Sequence[Task], spec: ControlledSpec, score: Scorer) -> list[Task]:
  """The controlled task set: each picked task with its mutant and rate in `extra`.

  Candidates are the task's mutants of the operator assigned to it (round-robin over
  `spec.operators`, the others as fallbacks), in a seeded order; the first whose reward
  is at most `max_mutant_reward` is kept. A task without such a mutant is an error.
  """
  picked = pick_tasks(tasks, spec)
  candidates: list[list[mutations.Mutant]] = []
  for i, task in enumerate(picked):
    response = chat.format_response(task.reference)
    first = spec.operators[i % len(spec.operators)]
    order = [first] + [op for op in spec.operators if op != first]
    found = mutations.mutants(response, seed=spec.seed, operators=order)
    random.Random(f"{spec.seed}:{task.id}").shuffle(found)
    found.sort(key=lambda m: order.index(m.operator))  # stable: shuffled within operator
    candidates.append(found)
  chosen: list[tuple[mutations.Mutant, float] | None] = [None] * len(picked)
  for k in range(max(len(found) for found in candidates)):  # k-th candidate, batched
    todo = [i for i, found in enumerate(candidates) if chosen[i] is None and k < len(found)]
    if not todo:
      break
    rewards = score([(picked[i], candidates[i][k].response) for i in todo])
    for i, reward in zip(todo, rewards):
      if reward <= spec.max_mutant_reward:
        chosen[i] = (candidates[i][k], float(reward))
  out = []
  for i, task in enumerate(picked):
    if chosen[i] is None:
      raise ValueError(f"{task.id}: no mutant of {list(spec.operators)} scores at most "
                       f"{spec.max_mutant_reward}")
    m, reward = chosen[i]
    record = {"operator": m.operator, "description": m.description,
              "response": m.response, "bug_span": list(m.bug_span), "rate": _rate(spec, i),
              "reward": reward}
    out.append(dataclasses.replace(task, extra={**dict(task.extra or {}), KEY: record}))
  return out


def _rate(spec: ControlledSpec, i: int) -> float:
  """Task i's mutant rate: round-robin, shifted by one every full round of operators, so
  that every operator meets every rate (not paired one to one)."""
  rounds, op = divmod(i, len(spec.operators))
  return spec.rates[(op + rounds) % len(spec.rates)]


def info(task: Task) -> Mapping[str, Any]:
  """The task's controlled-setting record; a clear error for an ordinary task."""
  value = (task.extra or {}).get(KEY)
  if not value:
    raise ValueError(f"task {task.id} has no {KEY!r} record (not a controlled task set)")
  return value


def sft_targets(tasks: Sequence[Task], draws: int) -> list[tuple[Task, str]]:
  """(task, answer text) pairs: per task `round(rate * draws)` mutants, the rest the
  reference."""
  out = []
  for task in tasks:
    rec = info(task)
    n_mut = int(round(rec["rate"] * draws))
    reference = chat.format_response(task.reference)
    out += [(task, rec["response"])] * n_mut + [(task, reference)] * (draws - n_mut)
  return out


def bug_outcome(task: Task, text: str, issues: Sequence[Mapping[str, Any]]
                ) -> dict[str, bool]:
  """Whether `text` is the task's mutant, its reference, and (for the mutant) whether a
  direct / direct-or-context span of `issues` overlaps the bug span."""
  rec = info(task)
  is_bug = text == rec["response"]
  out = {"bug": is_bug, "reference": text == chat.format_response(task.reference),
         "direct_hit": False, "any_hit": False}
  if is_bug:
    s, e = rec["bug_span"]
    e = max(e, s + 1)  # a deletion's empty span: the character after it
    def hits(spans):
      return any(a < e and s < b for a, b in spans or [])
    out["direct_hit"] = any(hits(i.get("direct")) for i in issues)
    out["any_hit"] = out["direct_hit"] or any(hits(i.get("context")) for i in issues)
  return out
