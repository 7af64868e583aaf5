"""Known sites of a controlled task: where a response may differ from the reference.

A site is one edit of the reference answer (`chat.format_response(task.reference)`):
the characters `[start, end)` replaced by `variant`. A *bug* site's variant fails at
least one rubric the reference passes (`rubrics`); a *neutral* site's variant scores
exactly the reference's reward (a rewrite no rubric can see). A task's sites never
overlap, so any choice of variants renders one response (`render`), and a response
that is such a combination can be read back site by site (`decompose`).

Sites are stored in the task file as `extra["controlled"]["sites"]` (see `to_json`).
A task of the single-bug setting carries only the older record (`response`,
`bug_span`, `rate`, ...); its one bug site is derived from it (`sites_of`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from rcca_jax.data import chat

KINDS = ("bug", "neutral")
REFERENCE = "reference"  # the variant name of a site left as in the reference


@dataclasses.dataclass(frozen=True)
class Site:
  """One edit of the reference answer; spans are in the reference answer's text."""

  name: str                 # unique within the task, e.g. "bug0", "neutral2"
  kind: str                 # "bug" | "neutral"
  start: int
  end: int
  variant: str              # the text that replaces reference[start:end]
  operator: str = ""        # mutation operator or rewrite kind
  description: str = ""
  rate: float = 0.5         # share of SFT targets that carry the variant
  rubrics: tuple[str, ...] = ()  # rubric ids the variant alone fails (bug sites)
  reward: Optional[float] = None  # reward of the reference with only this variant

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"site {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
    if not 0 <= self.start <= self.end:
      raise ValueError(f"site {self.name!r}: bad span [{self.start}, {self.end})")
    if not 0.0 <= self.rate <= 1.0:
      raise ValueError(f"site {self.name!r}: rate {self.rate} is not in [0, 1]")

  def to_json(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out["span"] = [out.pop("start"), out.pop("end")]
    out["rubrics"] = list(self.rubrics)
    return out

  @classmethod
  def from_json(cls, obj: Mapping[str, Any]) -> "Site":
    fields = dict(obj)
    start, end = fields.pop("span")
    fields["rubrics"] = tuple(fields.get("rubrics") or ())
    return cls(start=int(start), end=int(end), **fields)


def check_sites(reference: str, sites: Sequence[Site]) -> None:
  """Sites lie inside the reference, have unique names, differ from it and do not
  overlap (touching is allowed only when neither is an insertion at the seam)."""
  names = [s.name for s in sites]
  if len(set(names)) != len(names):
    raise ValueError(f"site names are not unique: {names}")
  ordered = sorted(sites, key=lambda s: (s.start, s.end))
  for s in ordered:
    if s.end > len(reference):
      raise ValueError(f"site {s.name!r}: span [{s.start}, {s.end}) beyond the "
                       f"reference ({len(reference)} characters)")
    if reference[s.start:s.end] == s.variant:
      raise ValueError(f"site {s.name!r}: the variant equals the reference text")
  for a, b in zip(ordered, ordered[1:]):
    if b.start < a.end or (b.start == a.end and (a.start == a.end or b.start == b.end)):
      raise ValueError(f"sites {a.name!r} [{a.start}, {a.end}) and {b.name!r} "
                       f"[{b.start}, {b.end}) overlap")


def _legacy_site(reference: str, record: Mapping[str, Any]) -> Site:
  """The one bug site of a single-bug record: the edit turning the reference into the
  mutant (longest common prefix and suffix)."""
  mutant = record["response"]
  prefix = 0
  limit = min(len(reference), len(mutant))
  while prefix < limit and reference[prefix] == mutant[prefix]:
    prefix += 1
  suffix = 0
  while (suffix < limit - prefix
         and reference[len(reference) - 1 - suffix] == mutant[len(mutant) - 1 - suffix]):
    suffix += 1
  return Site(name="bug0", kind="bug", start=prefix, end=len(reference) - suffix,
              variant=mutant[prefix:len(mutant) - suffix],
              operator=record.get("operator", ""),
              description=record.get("description", ""),
              rate=float(record.get("rate", 0.5)),
              rubrics=tuple(record.get("rubrics") or ()),
              reward=record.get("reward"))


def reference_answer(task: Any) -> str:
  """The reference as an answer text (fence included), the text sites index."""
  return chat.format_response(task.reference)


def sites_of(task: Any) -> list[Site]:
  """The task's sites in reference order ([] for a task without a controlled record)."""
  record = (task.extra or {}).get("controlled")
  if not record:
    return []
  if "sites" in record:
    sites = [Site.from_json(s) for s in record["sites"]]
  else:
    sites = [_legacy_site(reference_answer(task), record)]
  return sorted(sites, key=lambda s: (s.start, s.end))


def render(reference: str, sites: Sequence[Site], choice: Mapping[str, bool]
           ) -> tuple[str, dict[str, tuple[int, int]]]:
  """The reference with the sites named True in `choice` set to their variant.

  Returns the text and, for every site, its span in that text (the variant's or the
  reference's characters; empty for a deletion or an empty reference span).
  """
  out, spans, pos = [], {}, 0
  length = 0
  for s in sorted(sites, key=lambda s: (s.start, s.end)):
    out.append(reference[pos:s.start])
    length += s.start - pos
    piece = s.variant if choice.get(s.name, False) else reference[s.start:s.end]
    spans[s.name] = (length, length + len(piece))
    out.append(piece)
    length += len(piece)
    pos = s.end
  out.append(reference[pos:])
  return "".join(out), spans


def decompose(reference: str, sites: Sequence[Site], text: str
              ) -> Optional[dict[str, bool]]:
  """Which sites of `text` carry their variant, when `text` is exactly one of the
  responses `render` can make; None otherwise (sampled noise, another bug)."""
  ordered = sorted(sites, key=lambda s: (s.start, s.end))
  gaps = [reference[a.end if a else 0:b.start if b else len(reference)]
          for a, b in zip([None] + ordered, ordered + [None])]

  def match(i: int, at: int) -> Optional[dict[str, bool]]:
    if not text.startswith(gaps[i], at):
      return None
    at += len(gaps[i])
    if i == len(ordered):
      return {} if at == len(text) else None
    s = ordered[i]
    for carries, piece in ((False, reference[s.start:s.end]), (True, s.variant)):
      if text.startswith(piece, at):
        rest = match(i + 1, at + len(piece))
        if rest is not None:
          return {s.name: carries, **rest}
    return None

  return match(0, 0)


def _occurrences(text: str, window: str, limit: int = 2) -> list[int]:
  """Start positions of `window` in `text` (overlapping ones too), at most `limit`."""
  out, at = [], text.find(window)
  while at >= 0 and len(out) < limit:
    out.append(at)
    at = text.find(window, at + 1)
  return out


def _windows(reference: str, ordered: Sequence[Site], i: int, context: int
             ) -> tuple[str, str, str, str]:
  """Site i's neighbourhood (up to `context` characters each side, cut at its
  neighbours) and its two pieces: (before, reference piece, variant, after)."""
  s = ordered[i]
  lo = max(s.start - context, ordered[i - 1].end if i else 0)
  hi = min(s.end + context, ordered[i + 1].start if i + 1 < len(ordered) else len(reference))
  return reference[lo:s.start], reference[s.start:s.end], s.variant, reference[s.end:hi]


def find_sites(reference: str, sites: Sequence[Site], text: str, *,
               contexts: Sequence[int] = (16, 32, 64, 128)
               ) -> dict[str, tuple[bool, tuple[int, int]]]:
  """Each site that `text` holds in its neighbourhood: whether it carries its variant,
  and that piece's span in `text`. A site's neighbourhood is the first of `contexts`
  (characters of the reference each side, cut at the neighbouring sites) whose two
  windows (reference piece or variant in that neighbourhood) each occur once in the
  reference with the site rendered either way; a site is found when exactly one window
  occurs in `text`, exactly once. So a response with sampled noise elsewhere (which
  `decompose` rejects whole) still shows which bugs it carries; sites with noise in
  their neighbourhood, or without a unique one, are left out."""
  ordered = sorted(sites, key=lambda s: (s.start, s.end))
  out = {}
  for i, s in enumerate(ordered):
    with_variant, _ = render(reference, [s], {s.name: True})
    for context in contexts:
      before, piece, variant, after = _windows(reference, ordered, i, context)
      kept, changed = before + piece + after, before + variant + after
      if ([len(_occurrences(reference, w)) for w in (kept, changed)] == [1, 0] and
          [len(_occurrences(with_variant, w)) for w in (kept, changed)] == [0, 1]):
        break
    else:
      continue
    found = []
    for carries, middle in ((False, piece), (True, variant)):
      for at in _occurrences(text, before + middle + after):
        found.append((carries, (at + len(before), at + len(before) + len(middle))))
    if len(found) == 1:
      out[s.name] = found[0]
  return out


def blame_spans(spans: Mapping[str, tuple[int, int]], sites: Sequence[Site],
                choice: Mapping[str, bool]) -> list[tuple[int, int]]:
  """The text spans of the bug sites that carry their bug (a deletion's empty span
  becomes the character after it, as a blamed span must cover a character)."""
  out = []
  for s in sites:
    if s.kind == "bug" and choice.get(s.name, False):
      a, b = spans[s.name]
      out.append((a, max(b, a + 1)))
  return out
