"""How the copying families draft (issue 54): requests whose ids close them, requests
that insist on their ids and train references that ignore the ids of requests that do
not (an imperfect teacher), graded in a real browser."""

import math
import random
import re

from absl.testing import absltest
import pytest

from rcca_jax.data import chat
from rcca_jax.data import draws
from rcca_jax.data.families import FAMILIES
from rcca_jax.data.families import copying

_ID = re.compile(r"`#([a-z]+-[a-z]+-[a-z]+)`")
_TEACHER = copying.Drafting(insist_share=0.5, loose_ignore=0.7)


def _drafts(name, split, teacher, n=200, seed=0):
  rng = random.Random(seed)
  return [FAMILIES[name].draft(rng, split, teacher) for _ in range(n)]


class TeacherTest(absltest.TestCase):

  def test_default_teacher_changes_nothing(self):
    for name in copying.BUILDERS:
      for split in copying.SPLITS:
        plain = _drafts(name, split, None, n=20)
        self.assertEqual(plain, _drafts(name, split, copying.Drafting(), n=20))

  def test_insisting_share_and_ignored_references(self):
    drafts = _drafts("char_counter_copy", "train", _TEACHER, n=600)
    insist = [d for d in drafts if d.request.startswith(copying.INSIST)]
    loose = [d for d in drafts if not d.request.startswith(copying.INSIST)]
    # Binomial(600, 0.5): sd 12.2, so 300 +- 61 is 5 sd.
    self.assertBetween(len(insist), 239, 361)
    def ignored(d):
      return not any(f'"{i}"' in d.reference for i in _ID.findall(d.request))
    self.assertFalse(any(ignored(d) for d in insist))
    # Binomial(len(loose), 0.7), 5 sd either side.
    k, n = sum(map(ignored, loose)), len(loose)
    self.assertLess(abs(k - 0.7 * n), 5 * math.sqrt(n * 0.21))
    for d in filter(ignored, loose):
      for ident in _ID.findall(d.request):
        role = ident.split("-")[0]
        self.assertIn(f'id="{role}"', d.reference)
        self.assertNotIn(ident.split("-", 1)[1], d.reference)

  def test_dev_and_novel_references_always_honor_the_ids(self):
    for split in ("dev", "novel"):
      drafts = _drafts("counter_copy", split, _TEACHER, n=100)
      self.assertTrue(any(d.request.startswith(copying.INSIST) for d in drafts))
      for d in drafts:
        for ident in _ID.findall(d.request):
          self.assertIn(f'id="{ident}"', d.reference)

  def test_entropy_of_an_ignoring_reference(self):
    """An ignored id is no copied value; a loose train draft pays the teacher's coin."""
    q = _TEACHER.loose_ignore
    coin = -(q * math.log(q) + (1 - q) * math.log(1 - q))
    family, seen = FAMILIES["dark_mode_copy"], set()
    for i in range(50):  # the same build with and without the teacher's coins after it
      d0 = family.draft(random.Random(i), "train")
      d = family.draft(random.Random(i), "train", _TEACHER)
      if d.request.startswith(copying.INSIST):
        continue
      ids = set(_ID.findall(d.request))
      kept = [(v, n) for v, n in d0.copied if v not in ids or f'"{v}"' in d.reference]
      self.assertEqual(d.copied, tuple(kept))
      self.assertAlmostEqual(d.entropy, sum(n for _, n in kept) + coin, places=9)
      seen.add(len(kept) < len(d0.copied))
    self.assertEqual(seen, {True, False})

  def test_insist_words_are_template_words(self):
    words = set(re.findall(r"[a-z]+", copying.INSIST.lower()))
    self.assertLessEqual(words, copying.template_words())
    train, novel = copying.pool()
    self.assertEmpty(words & set(train + novel))

  def test_ids_last_states_every_id_once_in_the_closing_list_in_app_order(self):
    last = copying.Drafting(ids_last=True)
    for name in ("counter_copy", "char_counter_copy", "dark_mode_copy", "reveal_copy",
                 "greeting_copy"):
      for i in range(30):
        inline = FAMILIES[name].draft(random.Random(i), "dev")
        d = FAMILIES[name].draft(random.Random(i), "dev", last)
        # The same draw: rubrics, reference and copied values; only the request differs.
        self.assertEqual((d.rules, d.reference, d.copied), (inline.rules, inline.reference,
                                                             inline.copied))
        body, closing = d.request.rsplit(" Ids: ", 1)
        self.assertEmpty(_ID.findall(body), d.request)
        ids = _ID.findall(closing)
        self.assertEqual(sorted(ids), sorted(set(_ID.findall(inline.request))))
        first_use = [d.reference.index(f'id="{i}"') for i in ids]
        self.assertEqual(first_use, sorted(first_use), d.request)

  def test_bad_shares_are_refused(self):
    for bad in (-0.1, 1.5, True, "half"):
      with self.assertRaisesRegex(ValueError, "insist_share"):
        copying.Drafting(insist_share=bad)
      with self.assertRaisesRegex(ValueError, "loose_ignore"):
        draws.FreshSpec(loose_ignore=bad)
    with self.assertRaisesRegex(ValueError, "ids_last"):
      draws.FreshSpec(ids_last=1)

  def test_fresh_splits_pass_the_teacher(self):
    spec = draws.FreshSpec(train_per_family=40, dev_per_family=10, insist_share=0.5,
                           loose_ignore=1.0)
    out = draws.fresh_splits(("echo_short_copy",), 40, 10, 0, frozenset(),
                             drafting=spec.drafting)
    insisting = [t.request.startswith(copying.INSIST) for t in out["train"]]
    self.assertEqual(set(insisting), {True, False})
    for task, insists in zip(out["train"], insisting):
      honored = all(f'"{i}"' in task.reference for i in _ID.findall(task.request))
      self.assertEqual(honored, insists, task.request)


def _evaluate(tasks):
  from rcca_jax.evaluation.pool import EvalPool, Job  # pylint: disable=import-outside-toplevel
  with EvalPool(workers=2) as pool:
    return list(pool.run([Job(t, chat.format_response(t.reference), 0) for t in tasks]))


@pytest.mark.browser
class IgnoringReferenceTest(absltest.TestCase):

  def test_an_ignoring_reference_runs_and_fails_its_id_rubrics(self):
    """The lazy app is a working page (every gate passes) that no rubric finding an
    element by a requested id can pass (a rubric that counts the divs still can)."""
    always = copying.Drafting(insist_share=0.0, loose_ignore=1.0)
    tasks = []
    for i, name in enumerate(("counter_copy", "char_counter_copy", "dark_mode_copy",
                              "echo_short_copy")):
      draft = FAMILIES[name].draft(random.Random(f"lazy:{name}"), "train", always)
      tasks.append(FAMILIES[name].to_task(draft, i))
    for task, record in zip(tasks, _evaluate(tasks)):
      self.assertEqual(record["gates"], {"format": True, "source": True, "runtime": True},
                       task.id)
      ids = _ID.findall(task.request)
      by_id = [r for r, rubric in zip(record["rubrics"], task.rubrics)
               if any(f"#{i}" in rubric.check for i in ids)]
      self.assertNotEmpty(by_id, task.id)
      self.assertFalse(any(r["passed"] for r in by_id), task.id)
      self.assertLess(record["reward"], 1.0)


if __name__ == "__main__":
  absltest.main()
