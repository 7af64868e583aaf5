"""The copy curriculum's first stage (experiments/copy_pretrain.py): its sequences, the
id word positions its copy rates read, and the Hugging Face directory it writes."""

import json
import os
import random

import numpy as np
from absl.testing import absltest

from experiments import copy_pretrain
from experiments import natural_v2
from rcca_jax.data.families import copying
from rcca_jax.models import llama_checkpoint
from rcca_jax.train import sections


def _tokenizer():
  return sections.load_tokenizer("data/tokenizer")


class SequencesTest(absltest.TestCase):

  def test_filler_is_no_pool_word_and_moves_the_ids(self):
    train, novel = copying.pool()
    self.assertEmpty(set(copy_pretrain.FILLER) & set(train + novel))
    rng = random.Random(0)
    offsets = set()
    for _ in range(50):
      request, divs, ids, labels = copy_pretrain.example(rng, "train", 2, 8)
      self.assertEmpty(labels)
      self.assertBetween(len(ids), 1, 2)
      self.assertEqual(divs.splitlines(), [f'<div id="{i}"></div>' for i in ids])
      for ident in ids:
        self.assertIn(f"`#{ident}`", request)
        self.assertEqual(copying.compound_class(*ident.split("-")[1:]) == 0, False)
      offsets.add(request.index("`#"))
    self.assertGreater(len(offsets), 5)  # where the first id stands varies

  def test_shuffle_reorders_the_divs_only(self):
    orders = set()
    for seed in range(40):
      plain = copy_pretrain.example(random.Random(seed), "train", 4, 8, labels=0.5)
      mixed = copy_pretrain.example(random.Random(seed), "train", 4, 8, labels=0.5,
                                    shuffle=True)
      self.assertEqual(mixed[0], plain[0])  # the same request
      self.assertCountEqual(mixed[2], plain[2])
      by_id = {line.split('"')[1]: line for line in plain[1].splitlines()}
      self.assertEqual(mixed[1].splitlines(), [by_id[i] for i in mixed[2]])
      orders.add(mixed[2] == plain[2])
    self.assertEqual(orders, {True, False})  # some lists reordered, some not

  def test_sites_point_at_the_id_words(self):
    tokenizer = _tokenizer()
    rng = random.Random(1)
    for _ in range(10):
      request, divs, ids, labels = copy_pretrain.example(rng, "dev", 2, 8, labels=1.0)
      self.assertLen(labels, len(ids))
      for ident, word in zip(ids, labels):
        self.assertIn(f'`#{ident}` reads "{word}"', request)
        self.assertIn(f'<div id="{ident}">{word}</div>', divs)
      bare = copy_pretrain.encode(tokenizer, request, divs, ids, labels)
      self.assertLen([k for k, _ in bare[2] if k == "label"], len(labels))
      framed = copy_pretrain.framed(rng, "dev", tokenizer)
      app = copy_pretrain.framed(rng, "dev", tokenizer, "counter_copy")
      def words(row):
        return [k for k, _ in row[2] if k != "label"]
      self.assertLen(words(bare), 2 * len(ids))  # both words of every id found
      self.assertBetween(len(words(framed)), 2, 4)
      self.assertBetween(len(words(app)), 4, 8)  # two to four ids
      self.assertIn("label", [k for k, _ in app[2]])  # the add button's label
      for tokens, mask, sites in (bare, framed, app):
        self.assertLen(tokens, len(mask))
        self.assertEqual(words((tokens, mask, sites)),
                         ["w1", "w2"] * (len(words((tokens, mask, sites))) // 2))
        for kind, pos in sites:
          self.assertEqual(mask[pos], 1)  # an answer token, the loss sees it
          piece = tokenizer.convert_ids_to_tokens([tokens[pos]])[0]
          self.assertIn(piece, copying.pool()[0])
          before = tokenizer.convert_ids_to_tokens([tokens[pos - 1]])[0]
          if kind == "label":
            self.assertTrue(before.endswith(">") or before.endswith('"'), before)
          else:
            self.assertEqual(before, "-")

  def test_batch_pads_to_the_bucket(self):
    rows = [([5, 6, 7], [0, 1, 1], []), ([5] * 17, [1] * 17, [])]
    ids, mask = copy_pretrain.batch(rows, pad_id=0)
    self.assertEqual(ids.shape, (2, 32))
    np.testing.assert_array_equal(mask.sum(1), [2, 17])
    self.assertEqual(ids[0, 3:].sum(), 0)


class RunTest(absltest.TestCase):

  def test_init_continues_from_a_written_policy(self):
    root = self.create_tempdir().full_path
    first, second = os.path.join(root, "first"), os.path.join(root, "second")
    self.assertEqual(copy_pretrain.main([f"--out={first}", "--steps=1", "--batch=2"]), 0)
    self.assertEqual(copy_pretrain.main(
        [f"--out={second}", f"--init={first}", "--steps=1", "--batch=2", "--lr=0",
         "--framed_families=dark_mode_copy,echo_short_copy"]), 0)
    before, after = (llama_checkpoint.model_tensors(llama_checkpoint.load(d))
                     for d in (first, second))
    for name, value in before.items():  # a zero learning rate: the same parameters
      np.testing.assert_array_equal(after[name], value, err_msg=name)

  def test_two_steps_write_a_directory_init_from_hf_reads(self):
    root = self.create_tempdir().full_path
    out, history = os.path.join(root, "policy"), os.path.join(root, "curve.json")
    self.assertEqual(copy_pretrain.main(
        [f"--out={out}", "--steps=2", "--every=1", "--batch=2", f"--json={history}"]), 0)
    with open(history) as f:
      curve = json.load(f)["history"]
    self.assertEqual([p["step"] for p in curve], [1, 2])
    self.assertTrue(all(0.0 <= p[k] <= 1.0 for p in curve
                        for k in ("bare_w1", "bare_w2", "framed_w1", "framed_w2")))
    model = llama_checkpoint.load(out, attention_block_size=0)  # a runtime field
    job = sections.job_config(natural_v2.get_config("pilot"))
    self.assertEqual(model.config, sections.model_config(job, _tokenizer()))


if __name__ == "__main__":
  absltest.main()
