"""The browser-action model that credit and bench share with the rubric runner."""

from absl.testing import absltest

from rcca_jax.base import dsl
from rcca_jax.evaluation import actions


def _step(text):
  return dsl.parse_check(text)[0]


class FiredEventsTest(absltest.TestCase):

  def test_click_changes_form_controls_only(self):
    on_button = actions.fired_events(_step('click "#b"'), "button", "")
    on_checkbox = actions.fired_events(_step('click "#c"'), "input", "checkbox")
    self.assertIn("click", on_button)
    self.assertNotIn("change", on_button)
    self.assertIn("change", on_checkbox)

  def test_fill_types_text_but_sets_value_inputs(self):
    typed = actions.fired_events(_step('fill "#t" "abc"'), "input", "text")
    dated = actions.fired_events(_step('fill "#d" "2024-01-01"'), "input", "date")
    cleared = actions.fired_events(_step('fill "#t" ""'), "input", "text")
    self.assertEqual(typed, {"input", "beforeinput"})  # no key events, no blur
    self.assertEqual(dated, {"input", "beforeinput", "change"})
    self.assertTrue({"keydown", "keyup"} <= cleared)  # cleared with Delete

  def test_input_types(self):
    self.assertLessEqual(actions.VALUE_SET_INPUTS, actions.TEXT_INPUTS)
    self.assertIn("", actions.TEXT_INPUTS)  # no type attribute: a text field
    self.assertNotIn("checkbox", actions.TEXT_INPUTS)
    self.assertEqual(actions.ACTION_EVENTS["uncheck"], actions.ACTION_EVENTS["check"])


if __name__ == "__main__":
  absltest.main()
