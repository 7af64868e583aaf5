"""`FIELD=VALUE` overrides (study/overrides.py): a tuple or list field takes a
comma-separated list, each item typed like the field's first item."""

import ml_collections
from absl.testing import absltest, parameterized

from experiments import credit_sweep
from rcca_jax.credit import controlled
from rcca_jax.study import overrides


class TupleOverrideTest(parameterized.TestCase):

  @parameterized.parameters(("0.8", (0.8,)), ("0.25, 0.5,1", (0.25, 0.5, 1.0)))
  def test_a_tuple_of_numbers(self, text, want):
    config = credit_sweep.get_config()
    overrides.set_field(config, "data.controlled.rates", text)
    self.assertEqual(config.data.controlled.rates, want)
    self.assertTrue(all(isinstance(x, float) for x in config.data.controlled.rates))
    spec = controlled.ControlledSpec.from_mapping(
        {k: v for k, v in config.data.controlled.items() if k != "path"})
    self.assertEqual(spec.rates, want)

  def test_a_tuple_of_text_and_an_empty_list(self):
    config = credit_sweep.get_config()
    overrides.set_field(config, "data.controlled.families", "counter, filter_search")
    self.assertEqual(config.data.controlled.families, ("counter", "filter_search"))
    config = ml_collections.ConfigDict({"a": [], "b": (1, 2)})
    overrides.set_field(config, "a", "1,x,2.5")
    overrides.set_field(config, "b", "3")
    self.assertEqual((config.a, config.b), ([1, "x", 2.5], (3,)))
    with self.assertRaises(ValueError):
      overrides.set_field(config, "b", "1,two")

  def test_scalars_are_unchanged(self):
    config = credit_sweep.get_config()
    overrides.set_field(config, "ablation.arms", "grpo,rcca")  # a text field stays text
    self.assertEqual(config.ablation.arms, "grpo,rcca")


if __name__ == "__main__":
  absltest.main()
