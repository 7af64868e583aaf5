"""Several known sites per controlled task: K_bug bugs and K_neutral neutral rewrites.

For each task the reference answer is scored, then candidate edits, each alone:
- bug candidates are the reference's mutants (`credit/mutations.py`; the configured
  operators, then `FALLBACK_OPERATORS`; only mutants that are one contiguous edit). A
  candidate is usable when its reward is at most `max_mutant_reward`, its gates are the
  reference's (a bug that fails the runtime gate, as `throw` and most `misspell_id`
  mutants do, caps the reward whatever the other bugs are: it would hide them) and it
  fails at least one rubric the reference passes (`Site.rubrics`). The task's K_bug bug
  sites are the first usable
  candidates (in candidate order) that lie at separate places (`sites.check_sites`)
  and each fail a rubric that none of the others fails, so each bug is visible in the
  rubric outcomes whichever others are present;
- neutral candidates are `credit/neutral.py`'s rewrites. A candidate is usable when its
  reward, gates and rubric outcomes equal the reference's exactly; K_neutral usable
  ones that overlap no chosen site are kept, of different kinds where the task has
  enough kinds (`pick_neutrals`).
Candidates are scored in rounds, one batch over all tasks per round (the browser is the
expensive part), a few per task at a time, until every task is complete or out of
candidates. Candidate order is seeded: operators (rewrite kinds) round-robin, the first
one rotating with the task's index, each one's candidates shuffled; the fallback
operators' candidates come after all of the configured ones.

Bug site j (in reference order) of the i-th complete task gets the rate
`rates[(i * K_bug + j) % len(rates)]`, so a task's bug sites get different rates while
there are enough rates; neutral sites get 0.5.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Mapping, Sequence

from rcca_jax.credit import mutations, neutral
from rcca_jax.credit import sites as sites_lib
from rcca_jax.credit.sites import Site

# Scores (task, response) pairs: one evaluation record (docs/contracts.md#4-evaluation)
# per pair.
Scorer = Callable[[Sequence[tuple[Any, str]]], list[Mapping[str, Any]]]
NEUTRAL_RATE = 0.5
# Bug operators tried after the configured ones: edits that fail a rubric without an
# error (a style property misspelt, a listener bound to a wrong event).
FALLBACK_OPERATORS = ("break_css", "wrong_event")


def reward_of(record: Mapping[str, Any]) -> float:
  return float(record.get("reward") or 0.0)


def outcomes_of(record: Mapping[str, Any]) -> dict[str, Any]:
  """Rubric id -> passed (True / False / None) of a record."""
  return {r["id"]: r.get("passed") for r in record.get("rubrics") or []}


@dataclasses.dataclass
class _State:
  """One task's search: its candidates, what was scored, what was chosen."""

  task: Any
  reference: str
  record: Mapping[str, Any]
  bug_candidates: list[Site]
  neutral_candidates: list[Site]
  usable_bugs: list[Site] = dataclasses.field(default_factory=list)
  usable_neutrals: list[Site] = dataclasses.field(default_factory=list)
  bugs: list[Site] | None = None
  neutrals: list[Site] = dataclasses.field(default_factory=list)
  tried_bugs: int = 0
  tried_neutrals: int = 0


def build(picked: Sequence[Any], spec: Any, score: Scorer
          ) -> tuple[list[tuple[Any, dict[str, Any]]], dict[str, str]]:
  """(task, controlled record) of each task that gets a full set of sites, and the
  reason each other task was skipped (task id -> reason)."""
  refs = [sites_lib.reference_answer(t) for t in picked]
  records = score(list(zip(picked, refs)))
  skipped = {t.id: why for t, rec in zip(picked, records) if (why := _bad_reference(rec))}
  states = [_State(t, ref, rec, _bug_candidates(t, ref, spec, i),
                   _neutral_candidates(t, ref, spec, i))
            for i, (t, ref, rec) in enumerate(zip(picked, refs, records))
            if t.id not in skipped]
  _choose_bugs(states, spec, score)
  _choose_neutrals(states, spec, score)
  done = []
  for s in states:
    if s.bugs is None:
      skipped[s.task.id] = (
          f"{len(s.usable_bugs)} of {s.tried_bugs} bug mutants "
          f"({', '.join(_bug_operators(spec))}) fail a rubric at reward <= "
          f"{spec.max_mutant_reward} with the gates passing; no {spec.bug_sites} of them at "
          "separate places each fail a rubric the others pass")
    elif len(s.neutrals) < spec.neutral_sites:
      skipped[s.task.id] = (
          f"{len(s.neutrals)} neutral rewrites away from the bug sites score exactly the "
          f"reference's reward, gates and rubrics ({s.tried_neutrals} of "
          f"{len(s.neutral_candidates)} candidates looked at); {spec.neutral_sites} needed")
    else:
      done.append(s)
  named = [_named(s, spec, i) for i, s in enumerate(done)]
  all_bugs = [sites_lib.render(s.reference, sites, {x.name: x.kind == "bug" for x in sites})[0]
              for s, sites in zip(done, named)]
  bug_records = score([(s.task, text) for s, text in zip(done, all_bugs)]) if done else []
  out = []
  for s, sites, text, rec in zip(done, named, all_bugs, bug_records):
    sites_lib.check_sites(s.reference, sites)
    bugs = [x for x in sites if x.kind == "bug"]
    out.append((s.task, {
        "operator": "+".join(x.operator for x in bugs),
        "description": "; ".join(x.description for x in bugs),
        "response": text, "rate": [x.rate for x in bugs], "reward": reward_of(rec),
        "seed": spec.seed, "sites": [x.to_json() for x in sites]}))
  return out, skipped


def _rotated(names: Sequence[str], i: int) -> list[str]:
  k = i % len(names)
  return list(names[k:]) + list(names[:k])


def _interleave(groups: Sequence[Sequence[Site]]) -> list[Site]:
  out, seen = [], set()
  for k in range(max((len(g) for g in groups), default=0)):
    for g in groups:
      if k < len(g) and (g[k].start, g[k].end, g[k].variant) not in seen:
        seen.add((g[k].start, g[k].end, g[k].variant))
        out.append(g[k])
  return out


def _bug_operators(spec: Any) -> list[str]:
  return list(spec.operators) + [op for op in FALLBACK_OPERATORS if op not in spec.operators]


def _bad_reference(record: Mapping[str, Any]) -> str:
  """Why a reference cannot anchor sites ("" when it passes every gate): every site is
  judged against the reference's gates and rubric outcomes."""
  failed = [name for name, ok in dict(record.get("gates") or {}).items() if not ok]
  if not failed:
    return ""
  return (f"its reference fails the {', '.join(failed)} gate (reward {reward_of(record)}):"
          " a reference must pass every gate; under heavy CPU load the evaluator's "
          "wall-clock deadlines do this (docs/environment.md)")


def _bug_candidates(task: Any, reference: str, spec: Any, i: int) -> list[Site]:
  """The reference's one-edit mutants as bug sites, in the seeded candidate order."""
  def group(op: str) -> list[Site]:
    found = []
    for m in mutations.mutants(reference, seed=spec.seed, operators=[op]):
      site = _as_site(reference, m)
      if site is not None:
        found.append(site)
    random.Random(f"{spec.seed}:{task.id}:{op}").shuffle(found)
    return found
  fallbacks = [op for op in FALLBACK_OPERATORS if op not in spec.operators]
  return (_interleave([group(op) for op in _rotated(spec.operators, i)])
          + _interleave([group(op) for op in fallbacks]))


def _as_site(reference: str, m: mutations.Mutant) -> Site | None:
  """The mutant as one edit of the reference ([start, end) -> its bug text), or None when
  it is not one contiguous edit at its bug span (several places, or a bug span that is
  not the edit)."""
  start, stop = m.bug_span
  variant = m.response[start:stop]
  end = stop + len(reference) - len(m.response)
  if end < start or reference[:start] + variant + reference[end:] != m.response:
    return None
  return Site(name=f"{m.operator}@{start}", kind="bug", start=start, end=end,
              variant=variant, operator=m.operator, description=m.description)


def _neutral_candidates(task: Any, reference: str, spec: Any, i: int) -> list[Site]:
  protected = [task.request] + [r.check or "" for r in task.rubrics]
  found = neutral.rewrites(reference, protected=protected)
  groups = []
  for kind in _rotated(neutral.KINDS, i):
    group = [s for s in found if s.operator == kind]
    random.Random(f"{spec.seed}:{task.id}:{kind}").shuffle(group)
    groups.append(group)
  return _interleave(groups)


def clash(a: Site, b: Site) -> bool:
  """Whether two sites overlap (`sites.check_sites`'s rule)."""
  if (b.start, b.end) < (a.start, a.end):
    a, b = b, a
  return b.start < a.end or (b.start == a.end and (a.start == a.end or b.start == b.end))


def _choose_bugs(states: list[_State], spec: Any, score: Scorer) -> None:
  chunk = 2 * spec.bug_sites
  while True:
    todo = [s for s in states if s.bugs is None and s.tried_bugs < len(s.bug_candidates)]
    if not todo:
      return
    batch = [(s, c) for s in todo for c in s.bug_candidates[s.tried_bugs:s.tried_bugs + chunk]]
    for s in todo:
      s.tried_bugs = min(s.tried_bugs + chunk, len(s.bug_candidates))
    records = score([(s.task, sites_lib.render(s.reference, [c], {c.name: True})[0])
                     for s, c in batch])
    for (s, c), rec in zip(batch, records):
      before, after = outcomes_of(s.record), outcomes_of(rec)
      failed = tuple(sorted(k for k, v in before.items() if v is True and after.get(k) is False))
      if (failed and reward_of(rec) <= spec.max_mutant_reward
          and dict(rec.get("gates") or {}) == dict(s.record.get("gates") or {})):
        s.usable_bugs.append(dataclasses.replace(c, rubrics=failed, reward=reward_of(rec)))
    for s in todo:
      s.bugs = pick_bugs(s.usable_bugs, spec.bug_sites)


def pick_bugs(usable: Sequence[Site], k: int) -> list[Site] | None:
  """The first k of `usable` (lexicographically by index) that do not overlap and each
  fail a rubric none of the others fails; None when there are none."""
  def unique(chosen: Sequence[Site]) -> bool:
    return all(set(a.rubrics) - {r for b in chosen if b is not a for r in b.rubrics}
               for a in chosen)

  def extend(chosen: list[Site], start: int) -> list[Site] | None:
    if len(chosen) == k:
      return chosen if unique(chosen) else None
    for j in range(start, len(usable)):
      c = usable[j]
      if any(clash(c, x) or set(c.rubrics) <= set(x.rubrics) or set(x.rubrics) <= set(c.rubrics)
             for x in chosen):
        continue  # a subset's rubrics are never its own once the other is chosen
      found = extend(chosen + [c], j + 1)
      if found is not None:
        return found
    return None

  return extend([], 0)


def _choose_neutrals(states: list[_State], spec: Any, score: Scorer) -> None:
  """Scores neutral candidates (those missing the bug sites) until `pick_neutrals` has
  K_neutral sites of different kinds, or has K_neutral sites and every kind was tried."""
  chunk, k = spec.neutral_sites + 2, spec.neutral_sites

  def searching(s: _State) -> bool:
    if s.bugs is None or s.tried_neutrals == len(s.neutral_candidates):
      return False
    picked = pick_neutrals(s.usable_neutrals, s.bugs, k)
    kinds = {c.operator for c in s.neutral_candidates}
    tried = {c.operator for c in s.neutral_candidates[:s.tried_neutrals]}
    return len(picked) < k or (len({x.operator for x in picked}) < k and tried != kinds)

  while True:
    todo = [s for s in states if searching(s)]
    if not todo:
      break
    batch = []
    for s in todo:
      n = 0
      while s.tried_neutrals < len(s.neutral_candidates) and n < chunk:
        c = s.neutral_candidates[s.tried_neutrals]
        s.tried_neutrals += 1
        if not any(clash(c, x) for x in s.bugs):
          batch.append((s, c))
          n += 1
    records = score([(s.task, sites_lib.render(s.reference, [c], {c.name: True})[0])
                     for s, c in batch])
    for (s, c), rec in zip(batch, records):
      if (reward_of(rec) == reward_of(s.record)
          and outcomes_of(rec) == outcomes_of(s.record)
          and dict(rec.get("gates") or {}) == dict(s.record.get("gates") or {})):
        s.usable_neutrals.append(dataclasses.replace(c, rate=NEUTRAL_RATE,
                                                     reward=reward_of(rec)))
  for s in states:
    if s.bugs is not None:
      s.neutrals = pick_neutrals(s.usable_neutrals, s.bugs, k)


def pick_neutrals(usable: Sequence[Site], taken: Sequence[Site], k: int) -> list[Site]:
  """Up to k of `usable` that overlap neither `taken` nor each other: first one per kind
  (in order), then any."""
  out: list[Site] = []
  for one_per_kind in (True, False):
    for c in usable:
      if len(out) == k:
        return out
      if c in out or any(clash(c, x) for x in list(taken) + out):
        continue
      if one_per_kind and any(x.operator == c.operator for x in out):
        continue
      out.append(c)
  return out


def _named(s: _State, spec: Any, i: int) -> list[Site]:
  """The task's sites in reference order, named bug0.., neutral0.., bug rates assigned."""
  bugs = sorted(s.bugs, key=lambda x: (x.start, x.end))
  out = [dataclasses.replace(b, name=f"bug{j}",
                             rate=spec.rates[(i * spec.bug_sites + j) % len(spec.rates)])
         for j, b in enumerate(bugs)]
  out += [dataclasses.replace(n, name=f"neutral{j}")
          for j, n in enumerate(sorted(s.neutrals, key=lambda x: (x.start, x.end)))]
  return sorted(out, key=lambda x: (x.start, x.end))
