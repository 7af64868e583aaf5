"""The ablation's controlled setting: fixed requests whose SFT targets carry known bugs.

The first `tasks_per_family` train tasks of each chosen family are kept. Each gets one
mutant of its reference (`credit/mutations.py`) that fails at least one of its rubrics, and
a mutant rate taken round-robin from `rates` (shifted every round of operators). SFT
then sees, per task, `draws` targets of which `round(rate * draws)` are the mutant: the
SFT policy writes that bug at about that rate, and greedy decoding writes it where the
rate is above one half. RL on the same
requests has to unlearn the bug. Because the bug and its span are known, a rollout that
reproduces the mutant tells whether credit assignment blamed the right characters.

The set is materialised once as a task file: ordinary tasks
(docs/contracts.md#1-task-file) with `extra["controlled"] = {"operator", "description",
"response", "bug_span", "rate", "reward"}` (the mutant response is the full answer text,
fence included), so every arm and seed of an ablation reads the same bugs.

With `bug_sites` > 1 or `neutral_sites` > 0 (the multi-site setting, `credit/multisite.py`)
each task has several known sites instead, `extra["controlled"]["sites"]` (`Site.to_json`),
beside `operator` (the bug sites' operators joined by "+"), `description`, `rate` (the
bug sites' rates, a list), `response` and `reward` (the response with every bug site
and no neutral site) and `seed`; tasks without enough sites are skipped with a logged
reason. SFT targets then draw every site independently (`sft_targets`), and outcomes are
read site by site (`site_outcome`).

With `padding` = n > 0 (long responses with a small blamed share) each picked task's
reference first gets n unused CSS rules (`PAD_RULE`: `.pad-0 { margin: 0px; }`, ...,
classes no element has) at the end of its first `<style>` block, before any site is
looked for; the padded reference must score exactly the reference's reward, gates and
rubric outcomes (else an error). The task file then holds the padded reference (every
target, site and metric reads it) and the record says `"padding": n`.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping, Sequence

from absl import logging

from rcca_jax.base import mapping
from rcca_jax.credit import multisite, mutations
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import chat
from rcca_jax.data.tasks import Task, family_of

# Scores (task, response) pairs: one evaluation record (docs/contracts.md#4-evaluation:
# "reward", "gates", "rubrics", ...) per pair; the evaluator in practice.
Scorer = multisite.Scorer
KEY = "controlled"
# One unused CSS rule of `padding` (about 12 tokens of the project's tokenizer).
PAD_RULE = ".pad-{i} {{ margin: {i}px; }}\n"


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
  bug_sites: int = 1      # K_bug: bug sites per task (1 and no neutral site: one mutant)
  neutral_sites: int = 0  # K_neutral: neutral sites per task
  padding: int = 0        # unused CSS rules added to every reference (`pad_reference`)

  @property
  def multi_site(self) -> bool:
    return self.bug_sites != 1 or self.neutral_sites != 0

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
    if self.padding < 0:
      raise ValueError(f"data.controlled.padding must be >= 0, got {self.padding}")
    if self.bug_sites < 1 or self.neutral_sites < 0:
      raise ValueError(f"data.controlled.bug_sites must be >= 1 and neutral_sites >= 0, got "
                       f"{self.bug_sites} and {self.neutral_sites}")

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
  The multi-site setting (`spec.multi_site`) is `credit/multisite.py`'s: a task without
  enough sites is skipped (logged with the reason); none left is an error.
  """
  picked = pick_tasks(tasks, spec)
  if spec.padding:
    built = build(_check_padding(picked, spec, score), dataclasses.replace(spec, padding=0),
                  score)
    return [dataclasses.replace(t, extra={**t.extra,
                                          KEY: {**info(t), "padding": spec.padding}})
            for t in built]
  if spec.multi_site:
    return _build_multi_site(picked, spec, score)
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
    rewards = [multisite.reward_of(r)
               for r in score([(picked[i], candidates[i][k].response) for i in todo])]
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


def _build_multi_site(picked: Sequence[Task], spec: ControlledSpec, score: Scorer
                      ) -> list[Task]:
  built, skipped = multisite.build(picked, spec, score)
  for task_id, reason in skipped.items():
    logging.warning("controlled setting: task %s skipped: %s", task_id, reason)
  if not built:
    raise ValueError(f"controlled setting: no task of {list(spec.families)} has "
                     f"{spec.bug_sites} bug and {spec.neutral_sites} neutral sites: "
                     + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
  return [dataclasses.replace(task, extra={**dict(task.extra or {}), KEY: record})
          for task, record in built]


def pad_reference(html: str, rules: int) -> str:
  """`html` with `rules` unused CSS rules (`PAD_RULE`, numbered from 0) at the end of its
  first `<style>` block; ValueError without one."""
  at = html.find("</style>")
  if at < 0:
    raise ValueError("data.controlled.padding: the reference has no <style> block")
  line = html.rfind("\n", 0, at) + 1
  at = line if not html[line:at].strip() else at  # before the closing tag's own line
  return html[:at] + "".join(PAD_RULE.format(i=i) for i in range(rules)) + html[at:]


def _padded(task: Task, rules: int) -> Task:
  return dataclasses.replace(task, reference=pad_reference(task.reference, rules))


def _check_padding(picked: Sequence[Task], spec: ControlledSpec, score: Scorer
                   ) -> list[Task]:
  """`picked` with padded references, once each scores exactly its reference's reward,
  gates and rubric outcomes (one batch); ValueError naming those that do not."""
  padded = [_padded(t, spec.padding) for t in picked]
  pairs = [(t, chat.format_response(t.reference)) for t in [*picked, *padded]]
  records = score(pairs)
  def key(record: Mapping[str, Any]) -> tuple:
    return (multisite.reward_of(record), dict(record.get("gates") or {}),
            multisite.outcomes_of(record))

  bad = [f"{task.id}: {key(a)} -> {key(b)}"
         for task, a, b in zip(picked, records, records[len(picked):]) if key(a) != key(b)]
  if bad:
    raise ValueError(f"data.controlled.padding={spec.padding} changes the score of: "
                     + "; ".join(bad))
  return padded


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
  reference.

  A multi-site task's `draws` targets draw every site independently with exact
  marginals: exactly `round(site.rate * draws)` of them carry site's variant, the
  targets picked by a permutation of the draws seeded by (record seed, task id, site
  name), one per site.
  """
  out = []
  for task in tasks:
    rec = info(task)
    if "sites" in rec:
      out += [(task, text) for text in _multi_site_targets(task, rec, draws)]
      continue
    n_mut = int(round(rec["rate"] * draws))
    reference = chat.format_response(task.reference)
    out += [(task, rec["response"])] * n_mut + [(task, reference)] * (draws - n_mut)
  return out


def _multi_site_targets(task: Task, rec: Mapping[str, Any], draws: int) -> list[str]:
  reference = sites_lib.reference_answer(task)
  sites = sites_lib.sites_of(task)
  carriers = {}
  for site in sites:
    seed = rec.get("seed", 0)  # the spec seed the build stored (0 for hand-made files)
    order = random.Random(f"{seed}:{task.id}:{site.name}").sample(range(draws), draws)
    carriers[site.name] = set(order[:int(round(site.rate * draws))])
  return [sites_lib.render(reference, sites, {n: d in c for n, c in carriers.items()})[0]
          for d in range(draws)]


def site_outcome(task: Task, text: str, issues: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:
  """What `text` is, site by site.

  `sites`: which sites carry their variant (`sites.decompose`; None when the text is
  not a combination of the task's sites), `reference`: the exact reference, `hits`:
  per bug site present, whether a direct / a direct or context span of `issues`
  overlaps the bug's span in `text` ({name: {"direct": bool, "any": bool}}). A
  single-bug record's bug span is its `bug_span`; a deletion's empty span is the
  character after it.
  """
  rec = info(task)
  reference = sites_lib.reference_answer(task)
  sites = sites_lib.sites_of(task)
  choice = sites_lib.decompose(reference, sites, text)
  blamed: dict[str, tuple[int, int]] = {}
  if choice is not None and "sites" not in rec:
    if choice["bug0"]:
      s, e = rec["bug_span"]
      blamed["bug0"] = (s, max(e, s + 1))
  elif choice is not None:
    _, spans = sites_lib.render(reference, sites, choice)
    present = [x for x in sites if x.kind == "bug" and choice[x.name]]
    blamed = dict(zip([x.name for x in present], sites_lib.blame_spans(spans, present, choice)))
  hits = {}
  for name, (s, e) in blamed.items():
    def hit(key: str) -> bool:
      return any(a < e and s < b for i in issues for a, b in i.get(key) or [])
    direct = hit("direct")
    hits[name] = {"direct": direct, "any": direct or hit("context")}
  return {"sites": choice, "reference": text == reference, "hits": hits}


def bug_outcome(task: Task, text: str, issues: Sequence[Mapping[str, Any]]
                ) -> dict[str, bool]:
  """Whether `text` carries a known bug (single-bug task: is its mutant; multi-site:
  is a combination of its sites with at least one bug site), is its reference, and
  whether every bug present has a direct / a direct or context span of `issues` on it
  (`site_outcome`)."""
  o = site_outcome(task, text, issues)
  hits = o["hits"].values()
  return {"bug": bool(hits), "reference": o["reference"],
          "direct_hit": bool(hits) and all(h["direct"] for h in hits),
          "any_hit": bool(hits) and all(h["any"] for h in hits)}
