"""Tests for the rubric check DSL parser and its canonical printing."""

import pickle

from absl.testing import absltest, parameterized

from rcca_jax.base import dsl
from rcca_jax.base.dsl import Step

_ROUND_TRIP = [
    'click "#inc"',
    'dblclick ".cell:nth-child(2)"',
    'hover "nav > a[href=\\"#x\\"]"',
    'fill "#name" "Ada Lovelace"',
    'fill "#t" ""',
    'press "Enter"',
    'press "#input" "ArrowDown"',
    'select "#color" "red"',
    'check "input[type=checkbox]"',
    'uncheck "#agree"',
    'wait 500',
    'wait 12.5',
    'expect exists "#board"',
    'expect visible ".modal"',
    'expect hidden ".modal"',
    'expect count "li.todo" == 3',
    'expect count "li" >= 0',
    'expect text "#count" == "0"',
    'expect text "#msg" contains "won"',
    'expect text "#t" matches "^\\\\d+:\\\\d{2}$"',
    'expect value "#in" != ""',
    'expect attr "#btn" disabled == "true"',
    'expect attr "a" "data x" contains "y"',
    'expect style "#box" background-color == "rgb(255, 0, 0)"',
    'expect style ":root" --main-color == "red"',
    'expect number "#score" > -1.5',
    'expect number "#temp" <= 0.001',
    'expect number "#big" == 1e+20',
    'expect js "window.state.items.length === 2"',
    'expect js "document.title == \\"Hi\\\\n\\""',
    'expect no_errors',
    'fill "#multi" "line1\\nline2\\tend"',
]


class ParseTest(parameterized.TestCase):

  @parameterized.parameters(*_ROUND_TRIP)
  def test_canonical_text_round_trips(self, text):
    (step,) = dsl.parse_check(text)
    self.assertEqual(str(step), text)
    self.assertEqual(dsl.parse_check(str(step)), (step,))

  def test_round_trip_of_whole_check(self):
    text = "\n".join(_ROUND_TRIP)
    steps = dsl.parse_check(text)
    self.assertLen(steps, len(_ROUND_TRIP))
    self.assertEqual(dsl.parse_check(dsl.format_steps(steps)), steps)

  def test_fields(self):
    steps = dsl.parse_check(
        'click "#inc"; press "Enter"; press "#q" "Tab"; wait 250\n'
        'expect attr "#a" href contains "x"; expect count "li" < 4; expect js "1"')
    self.assertEqual(steps, (
        Step("click", selector="#inc"),
        Step("press", value="Enter"),
        Step("press", selector="#q", value="Tab"),
        Step("wait", value=250.0),
        Step("expect", selector="#a", expect="attr", name="href", op="contains", value="x"),
        Step("expect", selector="li", expect="count", op="<", value=4.0),
        Step("expect", expect="js", value="1"),
    ))
    self.assertIsInstance(steps[3].value, float)
    self.assertTrue(steps[4].is_expectation)
    self.assertFalse(steps[0].is_expectation)

  def test_positions_are_one_based_line_and_column(self):
    steps = dsl.parse_check('click "#a";  click "#b"\n\n   expect no_errors')
    self.assertEqual([(s.line, s.column) for s in steps], [(1, 1), (1, 14), (3, 4)])

  def test_positions_do_not_affect_equality(self):
    self.assertEqual(dsl.parse_check('   click "#a"'), dsl.parse_check('click "#a"'))

  def test_escapes(self):
    (step,) = dsl.parse_check(r'expect text "#q" == "say \"hi\" \\ \n \d"')
    self.assertEqual(step.value, 'say "hi" \\ \n \\d')
    self.assertEqual(dsl.parse_check(str(step)), (step,))

  def test_unicode_strings(self):
    (step,) = dsl.parse_check('expect text "#t" == "héllo 👋"')
    self.assertEqual(step.value, "héllo 👋")

  def test_separators_and_blank_checks(self):
    self.assertEqual(dsl.parse_check(""), ())
    self.assertEqual(dsl.parse_check(" ;\n ; \r\n"), ())
    steps = dsl.parse_check(';click "#a";;\r\n\nclick "#b";\n')
    self.assertEqual([s.selector for s in steps], ["#a", "#b"])

  def test_keyword_like_names(self):
    (step,) = dsl.parse_check('expect attr "#x" value == "3"')
    self.assertEqual(step.name, "value")
    (step,) = dsl.parse_check('expect attr "#x" contains contains "3"')
    self.assertEqual((step.name, step.op), ("contains", "contains"))

  def test_negative_and_float_numbers(self):
    (step,) = dsl.parse_check("expect number \"#n\" >= -.5")
    self.assertEqual(step.value, -0.5)
    self.assertEqual(str(step), 'expect number "#n" >= -0.5')


class SyntaxErrorTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown_step", 'klick "#a"', 1, 1, "unknown step 'klick'"),
      ("unknown_expectation", 'expect shown "#a"', 1, 8, "expected an expectation"),
      ("contains_for_count", 'expect count "li" contains "3"', 1, 19,
       "operator 'contains' is not allowed in 'expect count'; use one of == != < <= > >="),
      ("lt_for_text", 'expect text "#a" < "3"', 1, 18,
       "operator '<' is not allowed in 'expect text'; use one of == != contains matches"),
      ("matches_for_number", 'expect number "#a" matches "3"', 1, 20, "not allowed"),
      ("single_equals", 'expect text "#a" = "x"', 1, 18, "expected an operator"),
      ("unterminated", 'click "#a', 1, 7, "unterminated string"),
      ("missing_separator", 'click "#a" click "#b"', 1, 12, "missing ';'"),
      ("too_short", 'expect text "#a" ==', 1, 20, "ends too early"),
      ("incomplete_step", 'click; click "#b"', 1, 6, "incomplete"),
      ("number_for_text", 'expect text "#a" == 2', 1, 21, "must be a quoted string"),
      ("string_for_count", 'expect count "li" == "2"', 1, 22, "must be a number"),
      ("fractional_count", 'expect count "li" == 2.5', 1, 22, "non-negative integer"),
      ("negative_wait", "wait -1", 1, 6, "must not be negative"),
      ("unit_on_wait", "wait 500ms", 1, 6, "malformed number '500ms'"),
      ("unquoted_selector", "click #a", 1, 7, "unexpected character '#'"),
      ("unquoted_key", "press Enter", 1, 7, "expected a quoted string"),
      ("second_line", 'click "#a"\n  expect visble "#b"', 2, 10, "expected an expectation"),
      ("huge_number", "wait 1e999", 1, 6, "out of range"),
  )
  def test_error(self, text, line, column, reason):
    with self.assertRaises(dsl.DslSyntaxError) as cm:
      dsl.parse_check(text)
    e = cm.exception
    self.assertEqual((e.line, e.column), (line, column))
    self.assertIn(reason, e.reason)
    self.assertIsInstance(e, ValueError)

  def test_message_shows_line_and_caret(self):
    with self.assertRaises(dsl.DslSyntaxError) as cm:
      dsl.parse_check('click "#a";\nexpect count "li" contains "3"')
    lines = str(cm.exception).split("\n")
    self.assertTrue(lines[0].startswith("syntax error at line 2, column 19: "))
    self.assertEqual(lines[1], '  expect count "li" contains "3"')
    self.assertEqual(lines[2], "  " + " " * 18 + "^")
    self.assertEqual(cm.exception.message, str(cm.exception))

  def test_error_pickles(self):
    with self.assertRaises(dsl.DslSyntaxError) as cm:
      dsl.parse_check('click "#a";\nexpect txt "#b"')
    copy = pickle.loads(pickle.dumps(cm.exception))
    self.assertEqual((copy.line, copy.column, copy.reason, str(copy)),
                     (2, 8, cm.exception.reason, str(cm.exception)))

  def test_single_line_message_names_only_the_column(self):
    with self.assertRaises(dsl.DslSyntaxError) as cm:
      dsl.parse_check('expect text "#a" < "3"')
    self.assertTrue(str(cm.exception).startswith("syntax error at column 18: "))


if __name__ == "__main__":
  absltest.main()
