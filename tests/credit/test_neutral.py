"""Tests for rcca_jax.credit.neutral (rewrites of a response no rubric can see)."""

from absl.testing import absltest, parameterized

from rcca_jax.credit import neutral
from rcca_jax.credit import sites as sites_lib
from rcca_jax.evaluation.extract import extract_app
from rcca_jax.evaluation.source import parse_app

_APP = """<!DOCTYPE html><html><head><style>
body { margin: 2rem; font-family: system-ui, sans-serif; }
#count { color: red; padding: .4rem; }
</style></head><body>
<p>Press the button to count.</p>
<p id="note">Counted by the page.</p>
<div id="count">0</div><button id="inc">+</button>
<script>
let count = 0;
const display = document.getElementById("count");
function render(n) {
  display.textContent = "n=" + n;
}
function bump(step) {
  count = count + step;
  count++;
  if (display.dataset.mode === "fast") count += 2 * step;
  render(count);
}
const twice = (x) => x * 2;
document.getElementById("inc").addEventListener("click", () => bump(1));
</script></body></html>"""
RESPONSE = "Here:\n```html\n" + _APP + "\n```\n"


class NeutralTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.all = neutral.rewrites(RESPONSE, protected=["The counter reads n=0", "#count color"])

  def edits(self, kind):
    return {(RESPONSE[s.start:s.end], s.variant) for s in self.all if s.operator == kind}

  def test_every_kind_applies(self):
    self.assertEqual({s.operator for s in self.all}, set(neutral.KINDS))

  @parameterized.parameters(*neutral.KINDS)
  def test_rewrites_are_one_edit_that_still_parses(self, kind):
    for site in [s for s in self.all if s.operator == kind]:
      self.assertEqual((site.kind, site.name), ("neutral", f"{kind}@{site.start}"))
      text, _ = sites_lib.render(RESPONSE, [site], {site.name: True})
      self.assertNotEqual(text, RESPONSE)
      self.assertEqual(text[:site.start], RESPONSE[:site.start])
      app = parse_app(extract_app(text).html)
      self.assertFalse(app.errors, (site.description, app.errors))

  def test_statement_forms(self):
    self.assertEqual(self.edits("statement_form"), {
        ("count = count + step", "count += step"),
        ("count++", "count += 1"),
        ("count += 2 * step", "count = count + (2 * step)"),
        ("x * 2", "{ return x * 2; }"),
        ("bump(1)", "{ return bump(1); }")})

  def test_declarations_equalities_and_styles(self):
    self.assertEqual(self.edits("declaration"), {("const", "let")})
    self.assertLen([s for s in self.all if s.operator == "declaration"], 2)
    self.assertEqual(self.edits("equality"), {("===", "==")})
    # `padding` and `margin` are free; `color` is not a free property at all.
    self.assertEqual(self.edits("style_value"), {
        ("2", "3"), (".4", ".5"), ("system-ui, sans-serif", "sans-serif")})

  def test_element_text_skips_ids_and_protected_text(self):
    self.assertEqual(self.edits("element_text"), {(" the ", " this ")})
    (site,) = [s for s in self.all if s.operator == "element_text"]
    self.assertIn("Press the button", RESPONSE[site.start - 6:site.end + 6])
    quoted = neutral.rewrites(RESPONSE, protected=["Press the button to count."],
                              kinds=["element_text"])
    self.assertEqual(quoted, [])

  def test_renames_cover_every_use_in_one_span(self):
    renames = {s.description: (RESPONSE[s.start:s.end], s.variant)
               for s in self.all if s.operator == "rename"}
    self.assertEqual(renames["rename 'n' -> 'num' (2 uses)"],
                     ('n) {\n  display.textContent = "n=" + n', 'num) {\n  display.textContent = "n=" + num'))
    self.assertEqual(renames["rename 'x' -> 'val' (2 uses)"], ("x) => x", "val) => val"))
    # `step` has 3 uses over more than one statement but within MAX_RENAME_SPAN.
    self.assertIn("rename 'step' -> 'stp' (3 uses)", renames)

  def test_comments_go_on_their_own_line(self):
    comments = [s for s in self.all if s.operator == "comment"]
    self.assertNotEmpty(comments)
    for s in comments:
      self.assertEqual(s.start, s.end)
      self.assertEqual(RESPONSE[s.start - 1], "\n")
      self.assertRegex(s.variant, r"^\s*// [a-z ]+\n$")

  def test_unknown_kind(self):
    with self.assertRaisesRegex(ValueError, "unknown neutral rewrite kinds"):
      neutral.rewrites(RESPONSE, kinds=["reformat"])
    self.assertEqual(neutral.rewrites("no app here"), [])


if __name__ == "__main__":
  absltest.main()
