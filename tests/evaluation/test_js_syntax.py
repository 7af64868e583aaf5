"""Syntax errors are blamed on the construct left open and where parsing fails."""

from absl.testing import absltest, parameterized

from rcca_jax.evaluation import extract, js_syntax, source

_SCRIPT = """let count = 0;
const display = document.getElementById('count');
function render() {
  if (count > 0) {
    display.textContent = `n=${count}`;
  }
  display.title = 'x';
}
function dec() {
  count = count - 1;
  render();
}
document.getElementById('inc').addEventListener('click', () => { count += 1; render(); });
const re = /['"{(]/g; // a { in a comment
/* and } in another */
"""


def _lines(text, found):
  return [text[slice(*js_syntax.line_span(text, at))] for at in (found.opener, found.failure)]


class OpenConstructTest(parameterized.TestCase):

  def test_balanced_code(self):
    self.assertIsNone(js_syntax.open_construct(_SCRIPT))

  @parameterized.named_parameters(
      ("function_body", "  display.title = 'x';\n}\n", "  display.title = 'x';\n",
       "block", ["function render() {",
                 "/* and } in another */"]),
      ("inner_block", "    display.textContent = `n=${count}`;\n  }\n",
       "    display.textContent = `n=${count}`;\n", "block",
       ["if (count > 0) {", "/* and } in another */"]),
      ("string", "'x';", "'x;", "string", ["display.title = 'x;"] * 2),
      ("template", "`n=${count}`;", "`n=${count};", "template literal",
       ["display.textContent = `n=${count};", "/* and } in another */"]),
      ("inline_arrow", "render(); });", "render(); );", "block",
       ["document.getElementById('inc').addEventListener('click', () => { count += 1; "
        "render(); );"] * 2),
  )
  def test_open_construct(self, old, new, kind, lines):
    text = _SCRIPT.replace(old, new, 1)
    found = js_syntax.open_construct(text)
    self.assertEqual(found.kind, kind)
    self.assertEqual(_lines(text, found), lines)

  @parameterized.parameters("render(;\n}", "let a = [1, 2;\n", "f(); }")
  def test_parens_and_stray_closers_are_left_to_the_parser(self, text):
    self.assertIsNone(js_syntax.open_construct(text))


class SourceIssueTest(absltest.TestCase):

  def test_unclosed_function_body_blames_two_lines(self):
    body = "\n".join(f"  total += {k};" for k in range(40))
    app = (f"<!DOCTYPE html><html><body><p id=\"t\">0</p><script>\nlet total = 0;\n"
           f"function sum() {{\n{body}\n\nfunction show() {{\n  document.getElementById('t')"
           f".textContent = total;\n}}\nsum();\nshow();\n</script></body></html>")
    response = f"```html\n{app}\n```"
    ext = extract.extract_app(response)
    (issue,) = source.source_issues(ext)
    self.assertIn("missing '}'", issue.message)
    self.assertEqual([response[s:e] for s, e in issue.direct], ["function sum() {", "show();"])
    self.assertEqual(issue.evidence["syntax_spans"], [list(s) for s in issue.direct])
    share = sum(e - s for s, e in issue.direct) / len(app)
    self.assertLessEqual(share, 0.10)


if __name__ == "__main__":
  absltest.main()
