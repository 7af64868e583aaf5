"""Rules the test files keep so that markers mean what they say.

absl's `parameterized` decorators build new test methods from the function below them;
a pytest mark put above them lands on the builder and is lost, so a test meant to be
`slow` would run in the fast suite. Marks go below the parameterization.
"""

import pathlib
import re

from absl.testing import absltest

TESTS = pathlib.Path(__file__).resolve().parents[1]
_MARK_THEN_PARAMETERIZED = re.compile(
    r"^\s*@pytest\.mark\.\w+.*\n(\s*#.*\n)*\s*@parameterized\.", re.MULTILINE)


def lost_marks(text: str) -> list[int]:
  """Line numbers of pytest marks placed directly above a parameterized decorator."""
  return [text.count("\n", 0, m.start()) + 1 for m in _MARK_THEN_PARAMETERIZED.finditer(text)]


class SuiteRulesTest(absltest.TestCase):

  def test_no_mark_above_a_parameterization(self):
    found = {str(p.relative_to(TESTS)): lost_marks(p.read_text())
             for p in sorted(TESTS.rglob("test_*.py"))}
    self.assertEqual({name: lines for name, lines in found.items() if lines}, {})

  def test_the_rule_sees_a_lost_mark(self):
    self.assertEqual(lost_marks("class T:\n  @pytest.mark.slow\n  @parameterized.parameters(1)\n"
                                "  def test_x(self, v): pass\n"), [2])
    self.assertEqual(lost_marks("  @parameterized.parameters(1)\n  @pytest.mark.slow\n"), [])


if __name__ == "__main__":
  absltest.main()
