"""Corpus build: deterministic splits, held-out families, committed files up to date."""

import filecmp
import os
import random
import tempfile

from absl.testing import absltest

from rcca_jax.data import build
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.families import FAMILIES, Family

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SMALL = dict(train_per_family=6, dev_per_family=2, test_per_family=3)


class BuildTest(absltest.TestCase):

  def test_splits_by_family_and_parameters(self):
    splits = build.build_splits(seed=3, **SMALL)
    committed = [n for n, f in FAMILIES.items() if not f.split_aware]  # drawn fresh only
    n_train_fams = len(committed) - len(build.TEST_FAMILIES)
    self.assertLen(splits["train"], 6 * n_train_fams)
    self.assertLen(splits["dev"], 2 * n_train_fams)
    self.assertLen(splits["test"], 3 * len(build.TEST_FAMILIES))
    family = lambda t: t.id.rsplit("-", 1)[0]
    self.assertEqual({family(t) for t in splits["test"]}, set(build.TEST_FAMILIES))
    self.assertEmpty({family(t) for t in splits["train"] + splits["dev"]}
                     & set(build.TEST_FAMILIES))
    self.assertEqual({family(t) for t in splits["dev"]}, {family(t) for t in splits["train"]})
    train_requests = {t.request for t in splits["train"]}
    self.assertEmpty({t.request for t in splits["dev"]} & train_requests)
    ids = [t.id for s in splits.values() for t in s]
    self.assertEqual(len(ids), len(set(ids)))

  def test_same_seed_same_bytes(self):
    with tempfile.TemporaryDirectory() as d:
      for name in ("a", "b"):
        for split, items in build.build_splits(seed=1, **SMALL).items():
          os.makedirs(os.path.join(d, name), exist_ok=True)
          tasks_lib.write_tasks(os.path.join(d, name, f"{split}.jsonl"), items)
      for split in ("train", "dev", "test"):
        self.assertTrue(filecmp.cmp(os.path.join(d, "a", f"{split}.jsonl"),
                                    os.path.join(d, "b", f"{split}.jsonl"), shallow=False))
    other = build.build_splits(seed=2, **SMALL)
    self.assertNotEqual([t.request for t in other["train"]],
                        [t.request for t in build.build_splits(seed=1, **SMALL)["train"]])

  def test_family_without_variety_fails_clearly(self):
    counter = FAMILIES["counter"]
    constant = counter.draft(random.Random(0))
    family = Family("constant", "Tools", "easy", lambda rng: constant)
    self.assertLen(build.draw_unique(family, 0, 1), 1)
    with self.assertRaisesRegex(RuntimeError, "constant: only 1 distinct requests of 2"):
      build.draw_unique(family, 0, 2)

  def test_committed_corpus_is_the_seed0_build(self):
    with tempfile.TemporaryDirectory() as d:
      self.assertEqual(build.main(["--out", d, "--no-tokenizer"]), 0)
      for split, minimum in (("train", 2000), ("dev", 100), ("test", 200)):
        fresh = os.path.join(d, f"{split}.jsonl")
        self.assertGreaterEqual(len(tasks_lib.load_tasks(fresh)), minimum)
        self.assertTrue(filecmp.cmp(fresh, os.path.join(ROOT, "data", "tasks", f"{split}.jsonl"),
                                    shallow=False),
                        f"data/tasks/{split}.jsonl is stale: run python -m rcca_jax.data.build")

  def test_retrained_tokenizer_loads_with_special_tokens(self):
    from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as d:
      path = os.path.join(d, "train.jsonl")
      tasks_lib.write_tasks(path, build.build_splits(seed=0, **SMALL)["train"])
      vocab = build.retrain_tokenizer(path, os.path.join(d, "tok"), vocab_size=600)
      tok = AutoTokenizer.from_pretrained(os.path.join(d, "tok"))
      self.assertLen(tok, vocab)
      for special in ("<|pad|>", "<|end|>", "<|user|>", "<|assistant|>"):
        self.assertLen(tok.encode(special, add_special_tokens=False), 1)
      text = "<button id=\"inc\">+</button>"
      self.assertEqual(tok.decode(tok.encode(text, add_special_tokens=False)), text)


if __name__ == "__main__":
  absltest.main()
