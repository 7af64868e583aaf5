"""Distinct draws of the task families' generators: the committed corpus's
(`build.build_splits`) and fresh ones a job adds to its task files (`data.fresh`)."""

from __future__ import annotations

import dataclasses
import functools
import random
import re

from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.families import FAMILIES, Family, copying

_MAX_DRAWS_PER_TASK = 20  # a family that cannot produce enough distinct requests fails
CORPUS_STREAM = "rcca-corpus"  # the committed splits' draws
FRESH_STREAM = "rcca-fresh"  # `fresh_splits`' draws, another sequence of the same families
_FRESH_ID = re.compile(r"^(?P<family>.+)-f\d+-[nt]?\d{6}$")


def draw_unique(family: Family, seed: int, count: int, *, stream: str = CORPUS_STREAM,
                exclude: frozenset[str] = frozenset(), split: str = "train",
                drafting: copying.Drafting | None = None) -> list[tasks_lib.Task]:
  """`count` tasks of `family` with pairwise distinct requests, none in `exclude`, ids
  `NAME-00000`...; `stream` and `seed` name the random sequence (a split-aware family
  draws each split from its own sequence, its drafts shaped by `drafting`)."""
  name = family.name if not family.split_aware else f"{family.name}:{split}"
  rng = random.Random(f"{stream}:{seed}:{name}")
  out: list[tasks_lib.Task] = []
  seen: set[str] = set(exclude)
  for _ in range(count * _MAX_DRAWS_PER_TASK):
    if len(out) == count:
      break
    draft = family.draft(rng, split, drafting)
    if draft.request in seen:
      continue
    seen.add(draft.request)
    out.append(family.to_task(draft, len(out)))
  if len(out) < count:
    raise RuntimeError(f"family {family.name}: only {len(out)} distinct requests of "
                       f"{count} wanted")
  return out


@dataclasses.dataclass(frozen=True)
class FreshSpec:
  """Fresh tasks a job adds to its task files (`data.fresh`): per family of
  `data.families`, `train_per_family` train tasks (SFT and RL) and `dev_per_family` dev
  tasks, requests disjoint from each other, from the job's train and dev files and from
  the `exclude` files (`fresh_splits`)."""
  train_per_family: int = 0
  dev_per_family: int = 0
  novel_dev_per_family: int = 0  # split-aware families: dev ids of never-trained words
  seed: int = 0
  exclude: tuple[str, ...] = ("data/tasks/test.jsonl",)
  # split-aware families' phrasing and imperfect teacher (families/copying.Drafting)
  insist_share: float = 0.0
  loose_ignore: float = 0.0
  ids_last: bool = False

  def __post_init__(self):
    copying.Drafting(self.insist_share, self.loose_ignore, self.ids_last)  # raises on a bad field
    for name in ("train_per_family", "dev_per_family", "novel_dev_per_family", "seed"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}={value!r} must be an integer >= 0")
    object.__setattr__(self, "exclude", tuple(self.exclude))
    if not all(isinstance(p, str) and p for p in self.exclude):
      raise ValueError(f"exclude={self.exclude!r} must be task file paths")

  @property
  def drafting(self) -> copying.Drafting:
    return copying.Drafting(self.insist_share, self.loose_ignore, self.ids_last)

  @property
  def enabled(self) -> bool:
    return (self.train_per_family > 0 or self.dev_per_family > 0
            or self.novel_dev_per_family > 0)


def _fresh_ids(tasks: list[tasks_lib.Task], name: str, seed: int, tag: str = "",
               split: str = "") -> list[tasks_lib.Task]:
  extra = {"family": name, **({"split": split} if split else {})}
  return [dataclasses.replace(t, id=f"{name}-f{seed}-{tag}{i:06d}",
                              extra={**t.extra, **extra}) for i, t in enumerate(tasks)]


@functools.lru_cache(maxsize=4)
def fresh_splits(families: tuple[str, ...], train_per_family: int, dev_per_family: int,
                 seed: int, exclude: frozenset[str], novel_dev_per_family: int = 0,
                 drafting: copying.Drafting | None = None
                 ) -> dict[str, tuple[tasks_lib.Task, ...]]:
  """Fresh draws of `families` beyond the committed corpus: per family
  `dev_per_family` dev tasks, then `train_per_family` train tasks, all requests pairwise
  distinct and none in `exclude`. Dev is drawn first, so a larger train set keeps the
  same dev set. Ids are `NAME-fSEED-000000`..., the family in `extra["family"]`; `train`
  is shuffled across families, `dev` grouped by family.

  A split-aware family (families/copying.py) draws train, dev and novel-word dev
  (`novel_dev_per_family`, ids `NAME-fSEED-n000000`) each for its own split and from
  its own sequence, with `extra["split"]` naming it, its drafts shaped by `drafting`;
  the others ignore `novel_dev_per_family` and `drafting`."""
  unknown = sorted(set(families) - set(FAMILIES))
  if unknown:
    raise ValueError(f"unknown families: {', '.join(unknown)}")
  splits: dict[str, list[tasks_lib.Task]] = {"train": [], "dev": []}
  for name in families:
    family = FAMILIES[name]
    if family.split_aware:
      taken = set(exclude)
      for split, count, tag in (("dev", dev_per_family, ""),
                                ("novel", novel_dev_per_family, "n")):
        drawn = draw_unique(family, seed, count, stream=FRESH_STREAM,
                            exclude=frozenset(taken), split=split, drafting=drafting)
        taken |= {t.request for t in drawn}
        splits["dev"] += _fresh_ids(drawn, name, seed, tag, split)
      drawn = draw_unique(family, seed, train_per_family, stream=FRESH_STREAM,
                          exclude=frozenset(taken), split="train", drafting=drafting)
      splits["train"] += _fresh_ids(drawn, name, seed, "t", "train")
      continue
    drawn = _fresh_ids(draw_unique(family, seed, dev_per_family + train_per_family,
                                   stream=FRESH_STREAM, exclude=exclude), name, seed)
    splits["dev"] += drawn[:dev_per_family]
    splits["train"] += drawn[dev_per_family:]
  random.Random(f"{FRESH_STREAM}:{seed}:shuffle").shuffle(splits["train"])
  return {k: tuple(v) for k, v in splits.items()}


def family_of_id(task_id: str) -> str:
  """A task's family from its id alone (where only ids are at hand, as in a summary's
  `pass_at_1_tasks`): `NAME-fSEED-[n|t]NNNNNN` (`fresh_splits`) or `NAME-NNNNN`."""
  match = _FRESH_ID.match(task_id)
  return match.group("family") if match else task_id.rsplit("-", 1)[0]
