"""The copying families (issue 54): pools too large to memorize, splits whose dev ids were
never seen whole in train, graded difficulty, the no-copy floor and the copy metrics."""

import math
import random
import re

import numpy as np
from absl.testing import absltest

from rcca_jax.data import chat
from rcca_jax.data import draws
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.families import FAMILIES
from rcca_jax.data.families import base
from rcca_jax.data.families import copying
from rcca_jax.train import copy_metrics
from rcca_jax.train import rollouts
from rcca_jax.train import sections

_ID = re.compile(r"`#([a-z]+)-([a-z]+)-([a-z]+)`")


def _ids(request):
  return _ID.findall(request)


class PoolTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = sections.load_tokenizer("data/tokenizer")

  def test_committed_pool_is_the_builders(self):
    train, novel = copying.pool()
    self.assertEqual(sorted(train + novel), copying.build_word_pool(self.tokenizer))
    self.assertGreaterEqual(len(train), 800)
    self.assertEmpty(set(train) & set(novel))
    # 10^5 or more distinct ids per slot in every split.
    for split in copying.SPLITS:
      self.assertGreater(copying._compounds(split), 10_000, split)

  def test_words_are_single_tokens_in_place(self):
    train, novel = copying.pool()
    for w in train[::7] + novel[::3]:
      for text in (f'<div id="count-{w}-{w}">', f"`#add-{w}-{w}`", f'("box-{w}-{w}")',
                   f"<b>{w}</b>", f'"{w}"'):
        tokens = self.tokenizer.convert_ids_to_tokens(
            self.tokenizer.encode(text, add_special_tokens=False))
        self.assertIn(w, tokens, text)

  def test_no_pool_word_is_a_template_word(self):
    train, novel = copying.pool()
    self.assertIn("counter", copying.template_words())
    self.assertEmpty(set(train + novel) & copying.template_words())


class SplitTest(absltest.TestCase):

  def _draws(self, split, n=150):
    rng = random.Random(f"split:{split}")
    return [FAMILIES[name].draft(rng, split) for name in copying.BUILDERS
            for _ in range(n // len(copying.BUILDERS))]

  def test_dev_ids_are_never_train_ids_and_novel_words_never_train(self):
    train_words, novel_words = map(set, copying.pool())
    for d in self._draws("train"):
      for _, w1, w2 in _ids(d.request):
        self.assertNotEqual(copying.compound_class(w1, w2), 0)
        self.assertTrue({w1, w2} <= train_words)
    for d in self._draws("dev"):
      for _, w1, w2 in _ids(d.request):
        self.assertEqual(copying.compound_class(w1, w2), 0)
        self.assertTrue({w1, w2} <= train_words)
    for d in self._draws("novel"):
      self.assertTrue(_ids(d.request))
      for _, w1, w2 in _ids(d.request):
        self.assertTrue({w1, w2} <= novel_words)

  def test_graded_difficulty(self):
    rng = random.Random(0)
    counts = {len(_ids(FAMILIES["counter_copy"].draft(rng).request)) for _ in range(60)}
    self.assertEqual(counts, {2, 3, 4})
    entropies = {round(FAMILIES["dark_mode_copy"].draft(rng).entropy, 3) for _ in range(60)}
    self.assertLen(entropies, 3)  # no, one or two colours

  def test_entropy_by_hand(self):
    # A counter draft's entropy: each id ln(#compounds of its split), the label
    # ln(#words), start ln(1001), step ln(99), a colour 3 ln(256).
    train, _ = copying.pool()
    rng = random.Random(5)
    for _ in range(20):
      d = FAMILIES["counter_copy"].draft(rng, "train")
      want = (len(_ids(d.request)) * math.log(copying._compounds("train"))
              + math.log(len(train)) + math.log(1001) + math.log(99)
              + 3 * math.log(256) * ("rgb(" in d.request))
      self.assertAlmostEqual(d.entropy, want, places=9)

  def test_bad_split_is_rejected(self):
    with self.assertRaisesRegex(ValueError, "split 'test'"):
      FAMILIES["counter_copy"].draft(random.Random(0), "test")

  def test_no_copy_floor(self):
    drafts = [base.Draft("r", (), "a", entropy=6.0), base.Draft("r", (), "bb", entropy=3.0)]
    self.assertAlmostEqual(copying.no_copy_floor(drafts, lambda d: 10 * len(d.reference)),
                           9.0 / 30.0)
    with self.assertRaises(ValueError):
      copying.no_copy_floor([], len)
    tokenizer = sections.load_tokenizer("data/tokenizer")
    rng = random.Random(1)
    real = [FAMILIES["counter_copy"].draft(rng) for _ in range(50)]
    floor = copying.no_copy_floor(real, copying.sft_token_counter(tokenizer))
    self.assertGreater(floor, 0.2)
    self.assertLess(floor, 0.5)
    # Every id, label and the start value appear at least twice in a counter app (markup
    # and script), so copying nothing at all costs more than the first occurrences.
    strict = copying.no_copy_floor(real, copying.sft_token_counter(tokenizer), True)
    self.assertGreater(strict, 1.4 * floor)
    for d in real:
      self.assertAlmostEqual(sum(n for _, n in d.copied), d.entropy, places=9)
      self.assertTrue(all(copying.occurrences(v, d.reference) >= 1 for v, _ in d.copied))

  def test_occurrences_are_whole(self):
    self.assertEqual(copying.occurrences("x-ab-cd", 'id="x-ab-cd" ("x-ab-cd") x-ab-cde'), 2)
    self.assertEqual(copying.occurrences("12", "n = 12; m = 123; -12; (12)"), 2)


class FreshCopySplitsTest(absltest.TestCase):

  def test_dev_novel_and_train_disjoint_with_split_tags(self):
    fresh = draws.fresh_splits(("counter_copy", "dark_mode"), 40, 5, 3, frozenset(), 4)
    dev = [t for t in fresh["dev"] if t.extra["family"] == "counter_copy"]
    self.assertEqual([t.extra["split"] for t in dev], ["dev"] * 5 + ["novel"] * 4)
    self.assertLen([t for t in fresh["dev"] if t.extra["family"] == "dark_mode"], 5)
    train = [t for t in fresh["train"] if t.extra["family"] == "counter_copy"]
    self.assertLen(train, 40)
    train_ids = {"-".join(i) for t in train for i in _ids(t.request)}
    dev_ids = {"-".join(i) for t in dev for i in _ids(t.request)}
    self.assertEmpty(train_ids & dev_ids)
    for task in fresh["train"] + fresh["dev"]:
      self.assertEqual(draws.family_of_id(task.id), tasks_lib.family_of(task), task.id)


class CopyMetricsTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = sections.load_tokenizer("data/tokenizer")
    rng = random.Random(2)
    cls.tasks = [FAMILIES[n].generate(rng, i, split)
                 for i, (n, split) in enumerate((n, s) for n in copying.BUILDERS
                                                for s in ("dev", "novel"))]
    cls.tasks = [t.__class__(**{**t.__dict__, "extra": {"split": s}})
                 for t, s in zip(cls.tasks, ["dev", "novel"] * len(copying.BUILDERS))]

  def test_targets_point_at_each_values_first_token(self):
    task = self.tasks[0]
    prompt, answer, targets = copy_metrics.copy_targets(self.tokenizer, task)
    kinds = [k for k, _ in targets]
    ids = _ids(task.request)
    self.assertEqual(kinds.count("w1"), len(ids))
    self.assertEqual(kinds.count("w2"), len(ids))
    tokens = self.tokenizer.convert_ids_to_tokens(answer)
    w1s = [tokens[i] for k, i in targets if k == "w1"]
    self.assertEqual(w1s, [w1 for _, w1, _ in ids])
    self.assertEqual(prompt, chat.format_prompt(self.tokenizer, task.request))
    label = [tokens[i] for k, i in targets if k == "label"]
    self.assertEqual(label, re.findall(r'"([a-z]+)"', task.request))

  def test_metrics_read_the_target_positions(self):
    # A score that gives log 0.8 at every w1 target and log 0.3 elsewhere: the metrics
    # must read exactly the target positions.
    targets = {}
    for t in self.tasks:
      prompt, answer, tg = copy_metrics.copy_targets(self.tokenizer, t)
      targets[tuple(prompt + answer)] = {len(prompt) + i for k, i in tg if k == "w1"}

    def score(batch):
      out = np.full(batch["input_ids"].shape, math.log(0.3))
      for row, mask in enumerate(batch["attention_mask"]):
        key = tuple(int(x) for x in batch["input_ids"][row][mask > 0])
        for pos in targets[key]:
          out[row, pos] = math.log(0.8)
      entropy = np.where(out > math.log(0.5), 0.25, 2.0)  # 0.25 at w1, 2.0 elsewhere
      return out * batch["loss_mask"], entropy * batch["loss_mask"]

    out = copy_metrics.copy_metrics(score, self.tokenizer, self.tasks, rows=4, max_len=480,
                                    pad_id=0)
    for split in ("dev", "novel"):
      self.assertAlmostEqual(out[f"copy/{split}/p_w1"], 0.8)
      self.assertEqual(out[f"copy/{split}/copied_w1"], 1.0)
      self.assertAlmostEqual(out[f"copy/{split}/p_w2"], 0.3)
      self.assertEqual(out[f"copy/{split}/copied_w2"], 0.0)
      self.assertAlmostEqual(out[f"copy/{split}/entropy_w1"], 0.25)
      self.assertAlmostEqual(out[f"copy/{split}/entropy_label"], 2.0)
      self.assertGreater(out[f"copy/{split}/entropy_tokens"], 1.9)  # mostly 2.0
    self.assertEqual(out["copy/dev/n_w1"] + out["copy/novel/n_w1"],
                     sum(len(_ids(t.request)) for t in self.tasks))

  def _sampled(self, text):
    tokens = self.tokenizer.encode(text, add_special_tokens=False)
    decoded, offsets = rollouts.decode_with_offsets(self.tokenizer, tokens, ())
    self.assertEqual(decoded, text)
    return tokens, offsets

  def test_id_slots_are_the_first_words_written_after_each_role(self):
    for task in self.tasks:
      ids = _ids(task.request)
      text = chat.format_response(task.reference)
      tokens, offsets = self._sampled(text)
      slots = copy_metrics.id_slots(task.request, text, offsets)
      pieces = self.tokenizer.convert_ids_to_tokens([tokens[i] for i in slots])
      self.assertEqual(set(pieces), {w1 for _, w1, _ in ids}, task.id)
      roles = "|".join(role for role, _, _ in ids)
      self.assertLen(slots, len(re.findall(rf"(?<![\w-])(?:{roles})-", text)))
      # A wrong first word is still a slot: where the policy had to copy.
      wrong = text.replace(f"{ids[0][0]}-{ids[0][1]}-", f"{ids[0][0]}-zzzz-")
      self.assertLen(copy_metrics.id_slots(task.request, wrong, self._sampled(wrong)[1]),
                     len(slots))

  def test_slot_surprisal_reads_the_slots(self):
    samples = []
    for task in self.tasks[:4]:
      text = chat.format_response(task.reference)
      tokens, offsets = self._sampled(text)
      logprobs = np.full(len(tokens), math.log(0.9))
      logprobs[copy_metrics.id_slots(task.request, text, offsets)] = math.log(0.5)
      samples.append((task.request, text, offsets, logprobs))
    out = copy_metrics.slot_surprisal(samples)
    self.assertAlmostEqual(out["id_slot_surprisal"], math.log(2.0))
    self.assertBetween(out["token_surprisal"], -math.log(0.9), math.log(2.0))
    self.assertGreater(out["id_slots"], 1.0)
    plain = FAMILIES["counter"].generate(random.Random(0), 0)
    text = chat.format_response(plain.reference)
    self.assertEqual(copy_metrics.slot_surprisal(
        [(plain.request, text, self._sampled(text)[1], np.zeros(3))]), {})

  def test_tasks_without_split_give_nothing(self):
    plain = [FAMILIES["counter"].generate(random.Random(0), 0)]
    self.assertEqual(copy_metrics.copy_metrics(lambda b: (b["loss_mask"],) * 2, self.tokenizer,
                                               plain, rows=2, max_len=480, pad_id=0), {})


if __name__ == "__main__":
  absltest.main()
