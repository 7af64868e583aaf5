"""experiments/natural_ids.py: copied request ids and consistent lookups per family."""

import json
import os

from absl.testing import absltest

from experiments import natural_ids

REQUEST = ("A counter shown in `#tally`; a button (`#inc`) adds 1 and one (`#dec`) "
           "subtracts 1. Colour #16a34a.")


def _app(body: str, script: str) -> str:
  return (f"```html\n<!DOCTYPE html>\n<html><body>{body}<script>{script}</script></body>"
          "</html>\n```")


# Copies #tally and #inc (2 of 3), writes #minus for #dec and looks up what it wrote.
CONSISTENT = _app('<div id="tally"></div><button id="inc">+</button><button id=\'minus\'>'
                  "-</button>", 'document.getElementById("inc"); '
                  "document.querySelector('#minus');")
# Copies all three, but its script binds #plus, which the HTML lacks.
INCONSISTENT = _app('<div id="tally"></div><button id="inc"></button><b id="dec"></b>',
                    'document.getElementById("tally"); document.getElementById("plus");')


class NaturalIdsTest(absltest.TestCase):

  def test_request_ids_are_the_backticked_ones_not_colours(self):
    self.assertEqual(natural_ids.request_ids(REQUEST), {"tally", "inc", "dec"})

  def test_score_of_one_response(self):
    self.assertEqual(natural_ids.score(REQUEST, CONSISTENT), (2 / 3, True))
    self.assertEqual(natural_ids.score(REQUEST, INCONSISTENT), (1.0, False))
    self.assertEqual(natural_ids.score(REQUEST, "no app here"), (0.0, False))
    self.assertIsNone(natural_ids.score("A page without ids.", CONSISTENT))

  def test_family_rates_and_an_evaluation_directory(self):
    requests = {"counter-f0-000000": REQUEST, "counter-00090": REQUEST,
                "dark_mode-f0-000001": "A toggle (`#theme`)."}
    rows = [{"task_id": "counter-f0-000000", "response": CONSISTENT},
            {"task_id": "counter-00090", "response": INCONSISTENT},
            {"task_id": "dark_mode-f0-000001", "response": _app('<i id="theme"></i>', "")}]
    expected = {"counter": {"n": 2, "copied": (2 / 3 + 1.0) / 2, "consistent": 0.5},
                "dark_mode": {"n": 1, "copied": 1.0, "consistent": 1.0}}
    self.assertEqual(natural_ids.family_rates(requests, rows), expected)
    eval_dir = self.create_tempdir().full_path
    with open(os.path.join(eval_dir, "responses.jsonl"), "w", encoding="utf-8") as f:
      f.write("".join(json.dumps(r) + "\n" for r in rows))
    # No sampled.jsonl: a greedy-only evaluation has no sampled rates.
    self.assertEqual(natural_ids.evaluation_rates(eval_dir, requests), {"greedy": expected})


if __name__ == "__main__":
  absltest.main()
