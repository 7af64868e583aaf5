"""References to the design documents point into the repository's `docs/` and resolve.

(a) Nothing under rcca_jax/, tests/, benchmarks/, experiments/ (notebooks included),
data/ or README.md cites a document outside the repository (`shared/design`,
`../shared`) or by its old name (`METHOD §5`, `CONTRACTS.md`, `ABLATION.md`, ...).
(b) Every `docs/NAME.md#anchor` there, and every `NAME.md#anchor` link between the docs
pages, names an existing page and one of its headings, by GitHub's anchor rule.
"""

import collections
import pathlib
import re

from absl.testing import absltest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCANNED = ("rcca_jax", "tests", "benchmarks", "experiments", "data")
SUFFIXES = (".py", ".md", ".ipynb", ".lark", ".txt", ".cfg", ".toml", ".sh")
TOP_FILES = ("README.md", "Makefile", "BUILD_NOTES.md", "setup.cfg")
THIS = pathlib.Path(__file__).resolve()

_DESIGN_NAMES = ("METHOD", "CONTRACTS", "MODEL", "ABLATION", "BENCHMARKS", "ENVIRONMENT",
                 "LESSONS", "EVAL_INTERFACES")
# What a reference to a document outside docs/ looks like.
OUTSIDE = re.compile(
    r"shared/design|\.\./shared|\b(?:" + "|".join(_DESIGN_NAMES) + r")\.md\b"
    r"|\b(?:METHOD|CONTRACTS|EVAL_INTERFACES)\b")
DOCS_REF = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")
# A link from one docs page to another (or to itself: `#anchor`).
PAGE_LINK = re.compile(r"\]\(([\w.-]+\.md)?(?:#([\w-]+))?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def github_anchor(heading: str) -> str:
  """GitHub's anchor of a heading: lowercase, punctuation other than '-' and '_'
  dropped, spaces to '-'."""
  text = re.sub(r"`|\*\*|\*|~~", "", heading.strip().lower())
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
  """Anchors of every heading outside code fences (repeats get -1, -2, ...)."""
  seen: collections.Counter = collections.Counter()
  out, fenced = set(), False
  for line in markdown.splitlines():
    if _FENCE.match(line):
      fenced = not fenced
      continue
    m = None if fenced else _HEADING.match(line)
    if m:
      base = github_anchor(m.group(2))
      out.add(base if not seen[base] else f"{base}-{seen[base]}")
      seen[base] += 1
  return out


def scanned_files() -> list[pathlib.Path]:
  files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
  for top in SCANNED:
    files += [p for p in sorted((ROOT / top).rglob("*"))
              if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
  return [p for p in files if p.resolve() != THIS]


def line_of(text: str, pos: int) -> int:
  return text.count("\n", 0, pos) + 1


class AnchorRuleTest(absltest.TestCase):

  def test_github_anchor(self):
    self.assertEqual(github_anchor("5. Diagnostic weights"), "5-diagnostic-weights")
    self.assertEqual(github_anchor("8. Interfaces of the second wave"),
                     "8-interfaces-of-the-second-wave")
    self.assertEqual(github_anchor("The `credit` section: a/b, c_d"), "the-credit-section-ab-c_d")

  def test_repeats_and_fences(self):
    text = "# A\n## A\n```bash\n# not a heading\n```\n### B.\n"
    self.assertEqual(anchors(text), {"a", "a-1", "b"})

  def test_outside_pattern(self):
    for bad in ("see METHOD §5", "(../shared/design/METHOD.md)", "ABLATION.md says",
                "CONTRACTS §4", "EVAL_INTERFACES.md"):
      self.assertIsNotNone(OUTSIDE.search(bad), bad)
    for good in ("docs/method.md#5-diagnostic-weights", "--workdir=/shared/run",
                 "`DIR/ablation.md`", "summary.md"):
      self.assertIsNone(OUTSIDE.search(good), good)


class DocsReferencesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.pages = {p.name: anchors(p.read_text(encoding="utf-8")) for p in DOCS.glob("*.md")}

  def test_no_reference_outside_the_repository(self):
    found = []
    for path in scanned_files():
      text = path.read_text(encoding="utf-8", errors="replace")
      for m in OUTSIDE.finditer(text):
        found.append(f"{path.relative_to(ROOT)}:{line_of(text, m.start())}: {m.group(0)!r}")
    self.assertEqual(found, [])

  def test_every_docs_reference_resolves(self):
    bad, count = [], 0
    for path in scanned_files():
      text = path.read_text(encoding="utf-8", errors="replace")
      for m in DOCS_REF.finditer(text):
        count += 1
        page, anchor = m.group(1), m.group(2)
        where = f"{path.relative_to(ROOT)}:{line_of(text, m.start())}: {m.group(0)}"
        if page not in self.pages:
          bad.append(f"{where}: no page docs/{page}")
        elif anchor is not None and anchor not in self.pages[page]:
          bad.append(f"{where}: no heading with anchor #{anchor}")
    self.assertEqual(bad, [])
    self.assertGreater(count, 50, "the code cites the docs; the scan found too few")

  def test_links_between_docs_pages_resolve(self):
    bad = []
    for path in sorted(DOCS.glob("*.md")):
      text = path.read_text(encoding="utf-8")
      for m in PAGE_LINK.finditer(text):
        page, anchor = m.group(1) or path.name, m.group(2)
        if page not in self.pages:
          bad.append(f"{path.name}:{line_of(text, m.start())}: no page {page}")
        elif anchor is not None and anchor not in self.pages[page]:
          bad.append(f"{path.name}:{line_of(text, m.start())}: no #{anchor} in {page}")
    self.assertEqual(bad, [])

  def test_numbered_sections_are_stable(self):
    # `method §N` / `contracts §N` in prose map to exactly one numbered heading.
    for page, numbers in (("method.md", range(1, 10)), ("contracts.md", range(1, 9))):
      for n in numbers:
        hits = [a for a in self.pages[page] if a.startswith(f"{n}-")]
        self.assertLen(hits, 1, f"{page} section {n}: {hits}")


if __name__ == "__main__":
  absltest.main()
