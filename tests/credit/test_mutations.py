"""Tests for rcca_jax.credit.mutations (bug operators for the localization benchmark)."""

from absl.testing import absltest, parameterized

from rcca_jax.credit import mutations
from rcca_jax.evaluation.extract import extract_app
from rcca_jax.evaluation.source import parse_app

_APP = """<!DOCTYPE html><html><head><style>
#count { font-size: 48px; color: red; }
</style></head><body>
<p>🙂 计数器</p>
<div id="count">0</div><button id="inc">+</button><button id="dec" onclick="dec()">-</button>
<script>
let count = 0;
const display = document.getElementById('count');
function render() {
  display.textContent = 'n=' + String(count);
}
function dec() {
  count = count - 1;
  render();
}
function unused() {
  return count * 2;
}
document.getElementById('inc').addEventListener('click', () => { count += 1; render(); });
</script></body></html>"""
RESPONSE = "Here 🙂:\n```html\n" + _APP + "\n```\n"


class MutationsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.all = mutations.mutants(RESPONSE)

  def _of(self, op):
    return [m for m in self.all if m.operator == op]

  def test_every_operator_applies(self):
    self.assertEqual({m.operator for m in self.all}, set(mutations.OPERATORS))

  @parameterized.parameters(*mutations.OPERATORS)
  def test_only_the_bug_span_changes(self, op):
    for m in self._of(op):
      s, e = m.bug_span
      self.assertEqual(m.response[:s], RESPONSE[:s], m.description)
      tail = len(m.response) - e
      self.assertEqual(m.response[e:], RESPONSE[len(RESPONSE) - tail:], m.description)
      self.assertNotEqual(m.response, RESPONSE)
      ext = extract_app(m.response)
      self.assertIsNotNone(ext)
      self.assertFalse(parse_app(ext.html).fatal, m.description)   # still valid code

  def test_handler_op_stays_in_handlers_and_their_callees(self):
    muts = self._of("handler_op")
    texts = {m.description for m in muts}
    self.assertIn("operator += -> -=", texts)         # the inc handler
    self.assertIn("operator - -> +", texts)           # dec(), bound by the attribute
    self.assertIn("constant 'n=' -> 'n=x'", texts)    # render(), called by handlers
    unused = RESPONSE.index("return count * 2")
    self.assertFalse(any(m.bug_span[0] == unused + len("return count ") for m in muts))
    self.assertNotIn("constant 0 -> 1", texts)        # `let count = 0` is not in a handler

  def test_drop_listener(self):
    muts = self._of("drop_listener")
    self.assertLen(muts, 2)
    for m in muts:
      self.assertEqual(m.bug_span[0], m.bug_span[1])
    dropped = {RESPONSE[m.bug_span[0]:m.bug_span[0] + len(RESPONSE) - len(m.response)]
               for m in muts}
    self.assertEqual(dropped, {' onclick="dec()"',
                               "document.getElementById('inc').addEventListener('click', () => "
                               "{ count += 1; render(); });"})

  def test_misspell_id(self):
    muts = self._of("misspell_id")
    got = sorted(m.response[m.bug_span[0]:m.bug_span[1]] for m in muts)
    self.assertEqual(got, ["coun", "coutn", "icn", "in"])

  def test_break_css(self):
    got = sorted(m.response[m.bug_span[0]:m.bug_span[1]] for m in self._of("break_css"))
    self.assertEqual(got, ["48pxq", "clor", "fnt-size", "redq"])

  def test_throw(self):
    muts = self._of("throw")
    # One before each statement: render 1, dec 2, unused 1, the click handler 2.
    self.assertLen(muts, 6)
    self.assertIn("throw before statement 2 of the anonymous function at app line 19",
                  [m.description for m in muts])
    for m in muts:
      self.assertEqual(m.response[m.bug_span[0]:m.bug_span[1]],
                       'throw new Error("injected fault"); ')

  def test_extra_operators_are_not_in_the_default_set(self):
    self.assertFalse(set(mutations.EXTRA_OPERATORS) & set(mutations.OPERATORS))
    extra = mutations.mutants(RESPONSE, operators=mutations.EXTRA_OPERATORS)
    self.assertEqual({m.operator for m in extra}, set(mutations.EXTRA_OPERATORS))

  def test_rename_id_is_consistent(self):
    muts = mutations.mutants(RESPONSE, operators=("rename_id",))
    names = {m.response[m.bug_span[0]:m.bug_span[1]] for m in muts}
    self.assertTrue({"count-box", "cnt", "inc-btn"} <= names, names)
    for m in muts:
      if not m.description.startswith("id 'count'"):
        continue
      new = m.response[m.bug_span[0]:m.bug_span[1]]
      self.assertEqual(m.response[m.bug_span[0] - 4:m.bug_span[0]], 'id="')
      self.assertNotIn("'count'", m.response)
      self.assertNotRegex(m.response, r"#count(?![\w-])")
      self.assertIn(f"getElementById('{new}')", m.response)
      self.assertIn(f"#{new} {{", m.response)
      self.assertFalse(parse_app(extract_app(m.response).html).fatal)

  def test_rename_id_leaves_ids_built_in_the_js(self):
    response = RESPONSE.replace("document.getElementById('count')",
                                "document.getElementById('cou' + 'nt')").replace(
                                    "'cou' + 'nt'", "'cou-' + 'nt'").replace(
                                        'id="count"', 'id="cou-nt"').replace("#count", "#cou-nt")
    names = {m.description.split("'")[1] for m in mutations.mutants(
        response, operators=("rename_id",))}
    self.assertNotIn("cou-nt", names)
    self.assertIn("inc", names)

  def test_wrong_event(self):
    muts = mutations.mutants(RESPONSE, operators=("wrong_event",))
    got = sorted(m.response[m.bug_span[0] - 2:m.bug_span[1] + 2] for m in muts)
    self.assertEqual(got, ["('clik',", "('dblclick',", 'onclik="', 'ondblclick="'])

  def test_syntax_leaves_the_construct_open(self):
    muts = mutations.mutants(RESPONSE, operators=("syntax",))
    self.assertEqual({m.response[m.bug_span[0]] for m in muts}, {"{", "'"})
    for m in muts:
      self.assertEqual(len(m.response), len(RESPONSE) - 1)
      self.assertEqual(m.response[:m.bug_span[1]], RESPONSE[:m.bug_span[1]])
      self.assertTrue(parse_app(extract_app(m.response).html).fatal, m.description)

  def test_hang_loops(self):
    muts = mutations.mutants(RESPONSE, operators=("hang",))
    self.assertEqual(sum("in the handler" in m.description for m in muts), 2)
    for m in muts:
      self.assertIn(m.response[m.bug_span[0]:m.bug_span[1]].strip(),
                    ("while (true) {}", "for (;;) {}"))
      self.assertFalse(parse_app(extract_app(m.response).html).fatal)

  def test_deterministic_sampling(self):
    a = mutations.mutants(RESPONSE, seed=3, per_operator=1)
    b = mutations.mutants(RESPONSE, seed=3, per_operator=1)
    self.assertEqual(a, b)
    self.assertLen(a, len(mutations.OPERATORS))
    seeds = {tuple(m.bug_span for m in mutations.mutants(RESPONSE, seed=s, per_operator=1))
             for s in range(8)}
    self.assertGreater(len(seeds), 1)

  def test_errors_and_no_app(self):
    with self.assertRaisesRegex(ValueError, "unknown mutation operators"):
      mutations.mutants(RESPONSE, operators=("nope",))
    self.assertEqual(mutations.mutants("no app here"), [])


if __name__ == "__main__":
  absltest.main()
