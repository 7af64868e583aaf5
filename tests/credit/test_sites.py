"""Sites of a controlled task: render, decompose, legacy records."""

import itertools
import json

from absl.testing import absltest
from absl.testing import parameterized

from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import tasks as tasks_lib

REF = "let a = 1 + 2;\nconsole.log(a); // note\nb();\n"
SITES = [
    sites_lib.Site(name="bug0", kind="bug", start=10, end=11, variant="-", rate=0.6),
    sites_lib.Site(name="neutral0", kind="neutral", start=31, end=38, variant="",
                   operator="comment"),
    sites_lib.Site(name="bug1", kind="bug", start=39, end=43, variant="c()", rate=0.25),
]
COMMITTED = "experiments/results/ablation_small/controlled_tasks.jsonl"


class SitesTest(parameterized.TestCase):

  def test_render_spans_hold_the_chosen_text_and_decompose_inverts_it(self):
    for bits in itertools.product([False, True], repeat=len(SITES)):
      choice = {s.name: b for s, b in zip(SITES, bits)}
      text, spans = sites_lib.render(REF, SITES, choice)
      for s in SITES:
        a, b = spans[s.name]
        self.assertEqual(text[a:b], s.variant if choice[s.name] else REF[s.start:s.end])
      self.assertEqual(sites_lib.decompose(REF, SITES, text), choice)

  def test_decompose_refuses_other_text(self):
    self.assertIsNone(sites_lib.decompose(REF, SITES, REF + " "))
    self.assertIsNone(sites_lib.decompose(REF, SITES, REF.replace("log", "warn")))

  def test_blame_spans_are_the_present_bugs(self):
    choice = {"bug0": True, "neutral0": True, "bug1": False}
    text, spans = sites_lib.render(REF, SITES, choice)
    self.assertEqual(sites_lib.blame_spans(spans, SITES, choice), [spans["bug0"]])
    self.assertEqual(text[slice(*spans["bug0"])], "-")

  def test_deletion_is_blamed_on_the_next_character(self):
    site = sites_lib.Site(name="bug0", kind="bug", start=10, end=12, variant="")
    text, spans = sites_lib.render(REF, [site], {"bug0": True})
    self.assertEqual(sites_lib.blame_spans(spans, [site], {"bug0": True}), [(10, 11)])
    self.assertEqual(text, REF[:10] + REF[12:])

  def test_overlap_and_no_op_are_refused(self):
    with self.assertRaisesRegex(ValueError, "overlap"):
      sites_lib.check_sites(REF, [SITES[0], sites_lib.Site(
          name="x", kind="bug", start=9, end=12, variant="?")])
    with self.assertRaisesRegex(ValueError, "equals"):
      sites_lib.check_sites(REF, [sites_lib.Site(name="x", kind="bug", start=10, end=11,
                                                 variant="+")])
    with self.assertRaisesRegex(ValueError, "kind"):
      sites_lib.Site(name="x", kind="other", start=0, end=1, variant="")
    sites_lib.check_sites(REF, SITES)

  def test_find_sites_agrees_with_render_on_every_combination(self):
    for bits in itertools.product([False, True], repeat=len(SITES)):
      choice = {s.name: b for s, b in zip(SITES, bits)}
      text, spans = sites_lib.render(REF, SITES, choice)
      found = sites_lib.find_sites(REF, SITES, text, contexts=(8,))
      self.assertEqual(found, {s.name: (choice[s.name], spans[s.name]) for s in SITES})

  def test_find_sites_reads_a_bug_through_noise_elsewhere(self):
    text, spans = sites_lib.render(REF, SITES, {"bug0": True})
    noisy = "// sampled noise\n" + text.replace("b();", "b( );")
    self.assertIsNone(sites_lib.decompose(REF, SITES, noisy))
    found = sites_lib.find_sites(REF, SITES, noisy, contexts=(8,))
    shift = len("// sampled noise\n")
    self.assertEqual(found["bug0"], (True, (spans["bug0"][0] + shift, spans["bug0"][1] + shift)))
    self.assertEqual(noisy[slice(*found["bug0"][1])], "-")
    self.assertNotIn("bug1", found)  # its neighbourhood holds the noise

  def test_find_sites_leaves_out_repeated_windows(self):
    text, _ = sites_lib.render(REF, SITES, {"bug0": True})
    self.assertEqual(sites_lib.find_sites(REF, SITES, text + text, contexts=(8,)), {})

  def test_find_sites_widens_a_neighbourhood_the_reference_repeats(self):
    ref = "f(1 + 2);\nA\nf(1 + 2);\nB\n"
    site = sites_lib.Site(name="bug0", kind="bug", start=4, end=5, variant="-")
    text, spans = sites_lib.render(ref, [site], {"bug0": True})
    self.assertEqual(sites_lib.find_sites(ref, [site], text + "noise", contexts=(4, 16)),
                     {"bug0": (True, spans["bug0"])})
    # Four characters each side do not tell the two calls apart: left out.
    self.assertEqual(sites_lib.find_sites(ref, [site], text, contexts=(4,)), {})
    # The other call carrying the minus is not this site's bug.
    other = "f(1 + 2);\nA\nf(1 - 2);\nB\n"
    self.assertEqual(sites_lib.find_sites(ref, [site], other, contexts=(4, 16)), {})

  def test_json_round_trip(self):
    for s in SITES:
      self.assertEqual(sites_lib.Site.from_json(json.loads(json.dumps(s.to_json()))), s)

  def test_single_bug_record_gives_its_one_bug(self):
    for task in tasks_lib.load_tasks(COMMITTED):
      record = task.extra["controlled"]
      (site,) = sites_lib.sites_of(task)
      ref = sites_lib.reference_answer(task)
      text, _ = sites_lib.render(ref, [site], {"bug0": True})
      self.assertEqual(text, record["response"])
      self.assertEqual(site.rate, record["rate"])
      self.assertEqual(sites_lib.decompose(ref, [site], record["response"]),
                       {"bug0": True})
      self.assertEqual(sites_lib.decompose(ref, [site], ref), {"bug0": False})


if __name__ == "__main__":
  absltest.main()
