"""SentencePiece tokenizers (`tokenizer.model`, as Gemma, Llama-2 and T5 ship them).

`SentencePieceTokenizer` wraps `sentencepiece.SentencePieceProcessor` with the part of
the transformers tokenizer interface this project uses (`encode`, `__call__` with
`return_offsets_mapping`, `decode`, `convert_tokens_to_ids`, the special-token ids,
`apply_chat_template`, `save_pretrained`), so that `data.chat` renders prompts with it
and `train.offsets` aligns sampled tokens. Character offsets come from the pieces' byte
spans (`encode(..., return_type="proto")`; sentencepiece >= 0.2.1 names the former
"immutable_proto" so), converted to `str` indices; a byte-fallback piece holding part of
a multi-byte character gets that whole character's span, as the BPE path does.

Special tokens are the model's control symbols (and any other pieces
`tokenizer_config.json` names): plain text never turns into one (sentencepiece does
not match control symbols in text); `encode(..., split_special_tokens=False)` (how
`chat` encodes a chat template's own text) recognises them. A directory holds
`tokenizer.model` and a `tokenizer_config.json` with the special-token names (and
optionally a `chat_template`), the keys transformers writes.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

MODEL_FILE = "tokenizer.model"
CONFIG_FILE = "tokenizer_config.json"
_ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")


def _sentencepiece():
  try:
    import sentencepiece  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("SentencePiece tokenizers need the `sentencepiece` package") from e
  return sentencepiece


def _content(value: Any) -> str | None:
  """A token name from tokenizer_config.json (a string or an AddedToken dict)."""
  if isinstance(value, dict):
    return value.get("content")
  return value


def char_index(text: str) -> list[int]:
  """Byte offsets where each character of `text` starts, plus the total length."""
  starts, pos = [], 0
  for ch in text:
    starts.append(pos)
    pos += len(ch.encode("utf-8"))
  starts.append(pos)
  return starts


def byte_spans_to_chars(spans: Sequence[tuple[int, int]], text: str) -> np.ndarray:
  """[n, 2] character ranges of UTF-8 byte ranges of `text`; an empty range inside a
  character (a byte-fallback piece before the one that completes it) gets the whole
  character."""
  starts = char_index(text)
  total = starts[-1]
  out = np.zeros((len(spans), 2), np.int64)
  for i, (b, e) in enumerate(spans):
    first = bisect.bisect_right(starts, b) - 1
    if e > b:
      last = bisect.bisect_left(starts, e)
      out[i] = (first, last)
    elif b < total:  # empty: the character at b (partial bytes of it)
      out[i] = (first, first + 1) if starts[first] <= b else (first, first)
    else:
      out[i] = (len(text), len(text))
  return out


class SentencePieceTokenizer:
  """A SentencePiece model with special tokens, offsets and an optional chat template."""

  is_fast = True  # gives character offsets (what callers check `is_fast` for)

  def __init__(self, model_proto: bytes, *, bos_token: str | None = None,
               eos_token: str | None = None, pad_token: str | None = None,
               unk_token: str | None = None, special_tokens: Sequence[str] = (),
               chat_template: str | None = None):
    self.model_proto = model_proto
    self.sp = _sentencepiece().SentencePieceProcessor(model_proto=model_proto)
    size = self.sp.get_piece_size()
    self.unk_token_id = self.sp.unk_id()
    self.unk_token = self.sp.id_to_piece(self.unk_token_id) if self.unk_token_id >= 0 else None
    names = dict(bos_token=bos_token, eos_token=eos_token, pad_token=pad_token,
                 unk_token=unk_token or self.unk_token)
    missing = [f"{role}={name!r}" for role, name in names.items()
               if name is not None and self._id(name) is None]
    missing += [repr(t) for t in special_tokens if self._id(t) is None]
    if missing:
      raise ValueError(f"SentencePiece model has no piece for {', '.join(missing)}")
    for role, name in names.items():
      setattr(self, role, name)
      setattr(self, f"{role}_id", None if name is None else self._id(name))
    controls = [self.sp.id_to_piece(i) for i in range(size)
                if self.sp.is_control(i) and not self.sp.is_unknown(i)]
    self.special_tokens = tuple(dict.fromkeys([*controls, *special_tokens,
                                               *[n for n in names.values() if n]]))
    self.all_special_ids = sorted({self._id(t) for t in self.special_tokens})
    self._special_re = (re.compile("|".join(re.escape(t) for t in sorted(
        self.special_tokens, key=len, reverse=True))) if self.special_tokens else None)
    self.chat_template = chat_template

  # ---- loading and saving ---------------------------------------------------------

  @classmethod
  def from_directory(cls, path: str) -> "SentencePieceTokenizer":
    """`tokenizer.model` plus the special-token names of `tokenizer_config.json`."""
    model = os.path.join(path, MODEL_FILE)
    if not os.path.isfile(model):
      raise FileNotFoundError(f"{path}: no {MODEL_FILE}")
    config: dict[str, Any] = {}
    if os.path.isfile(os.path.join(path, CONFIG_FILE)):
      with open(os.path.join(path, CONFIG_FILE)) as f:
        config = json.load(f)
    with open(model, "rb") as f:
      proto = f.read()
    extra = [_content(v) for v in (config.get("added_tokens_decoder") or {}).values()]
    extra += [_content(v) for v in (config.get("additional_special_tokens") or [])]
    return cls(proto, **{role: _content(config.get(role)) for role in _ROLES},
               special_tokens=[t for t in extra if t], chat_template=config.get("chat_template"))

  def save_pretrained(self, path: str) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, MODEL_FILE), "wb") as f:
      f.write(self.model_proto)
    config = {role: getattr(self, role) for role in _ROLES if getattr(self, role)}
    config["additional_special_tokens"] = list(self.special_tokens)
    config["tokenizer_class"] = "SentencePieceTokenizer"
    if self.chat_template:
      config["chat_template"] = self.chat_template
    with open(os.path.join(path, CONFIG_FILE), "w") as f:
      json.dump(config, f, indent=2, sort_keys=True)

  # ---- vocabulary -------------------------------------------------------------------

  def __len__(self) -> int:
    return self.sp.get_piece_size()

  def _id(self, token: str) -> int | None:
    tid = self.sp.piece_to_id(token)
    if tid == self.sp.unk_id() and token != self.sp.id_to_piece(tid):
      return None
    return int(tid)

  def convert_tokens_to_ids(self, token: str) -> int:
    """The piece's id (the unknown token's id for a string that is no piece)."""
    return int(self.sp.piece_to_id(token))

  def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
    return [self.sp.id_to_piece(int(i)) for i in ids]

  # ---- encoding ---------------------------------------------------------------------

  def _plain(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and UTF-8 byte spans of `text` encoded as plain text."""
    proto = self.sp.encode(text, return_type="proto")
    return [p.id for p in proto.pieces], [(p.begin, p.end) for p in proto.pieces]

  def _encode(self, text: str, split_special_tokens: bool):
    if split_special_tokens or self._special_re is None:
      return self._plain(text)
    ids, spans, pos, byte_pos = [], [], 0, 0
    for m in self._special_re.finditer(text):
      part_ids, part_spans = self._plain(text[pos:m.start()])
      ids += part_ids
      spans += [(b + byte_pos, e + byte_pos) for b, e in part_spans]
      byte_pos += len(text[pos:m.start()].encode("utf-8"))
      size = len(m.group().encode("utf-8"))
      ids.append(self._id(m.group()))
      spans.append((byte_pos, byte_pos + size))
      byte_pos += size
      pos = m.end()
    part_ids, part_spans = self._plain(text[pos:])
    return ids + part_ids, spans + [(b + byte_pos, e + byte_pos) for b, e in part_spans]

  def encode(self, text: str, add_special_tokens: bool = False,
             split_special_tokens: bool = False) -> list[int]:
    """Token ids; special-token names in `text` become special tokens unless
    `split_special_tokens`. No BOS/EOS is added (`add_special_tokens` is accepted for
    the transformers signature; the project always passes False)."""
    del add_special_tokens
    return self._encode(text, split_special_tokens)[0]

  def __call__(self, text: str, add_special_tokens: bool = False,
               return_offsets_mapping: bool = False,
               split_special_tokens: bool = False) -> dict[str, Any]:
    del add_special_tokens
    ids, spans = self._encode(text, split_special_tokens)
    out: dict[str, Any] = {"input_ids": ids}
    if return_offsets_mapping:
      out["offset_mapping"] = [tuple(r) for r in byte_spans_to_chars(spans, text).tolist()]
    return out

  # ---- decoding ---------------------------------------------------------------------

  def decode_with_offsets(self, ids: Sequence[int], skip_special_tokens: bool = False
                          ) -> tuple[str, np.ndarray]:
    """The text of `ids` and each id's [start, end) character range in it. Special
    tokens are written as their names (empty when `skip_special_tokens`)."""
    special = set(self.all_special_ids)
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    byte_pos = 0
    run: list[int] = []

    def flush():
      nonlocal byte_pos
      if not run:
        return
      proto = self.sp.decode_ids_as_proto(run)
      pieces.append(proto.text)
      spans.extend((p.begin + byte_pos, p.end + byte_pos) for p in proto.pieces)
      byte_pos += len(proto.text.encode("utf-8"))
      run.clear()

    for tid in (int(i) for i in ids):
      if tid in special:
        flush()
        name = "" if skip_special_tokens else self.sp.id_to_piece(tid)
        pieces.append(name)
        spans.append((byte_pos, byte_pos + len(name.encode("utf-8"))))
        byte_pos += len(name.encode("utf-8"))
      else:
        run.append(tid)
    flush()
    text = "".join(pieces)
    return text, byte_spans_to_chars(spans, text)

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
             clean_up_tokenization_spaces: bool = False) -> str:
    del clean_up_tokenization_spaces
    return self.decode_with_offsets(ids, skip_special_tokens)[0]

  def token_offsets(self, ids: Sequence[int], text: str) -> np.ndarray:
    """[len(ids), 2] ranges of `ids` in `text`, which must be their decoding."""
    decoded, offsets = self.decode_with_offsets(ids)
    if decoded != text:
      raise ValueError("text is not the decoding of these ids")
    return offsets

  # ---- chat -------------------------------------------------------------------------

  def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False,
                          add_generation_prompt: bool = False) -> Any:
    """The chat template rendered with jinja2 (as transformers renders it)."""
    if not self.chat_template:
      raise ValueError("this SentencePiece tokenizer has no chat_template")
    import jinja2  # pylint: disable=import-outside-toplevel
    from jinja2 import sandbox  # pylint: disable=import-outside-toplevel

    def raise_exception(message):
      raise jinja2.exceptions.TemplateError(message)

    env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    text = env.from_string(self.chat_template).render(
        messages=messages, add_generation_prompt=add_generation_prompt,
        bos_token=self.bos_token or "", eos_token=self.eos_token or "")
    return self.encode(text) if tokenize else text


def train(texts: Sequence[str], vocab_size: int, special_tokens: Sequence[str], *,
          eos_token: str, pad_token: str) -> SentencePieceTokenizer:
  """A BPE SentencePiece model of `texts` that decodes back to its input exactly:
  identity normalisation, no dummy prefix, whitespace kept, byte fallback for
  characters outside the vocabulary; `special_tokens` are control symbols (ids 1..)."""
  import io  # pylint: disable=import-outside-toplevel
  buf = io.BytesIO()
  _sentencepiece().SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_writer=buf, vocab_size=vocab_size,
      model_type="bpe", normalization_rule_name="identity", remove_extra_whitespaces=False,
      add_dummy_prefix=False, byte_fallback=True, allow_whitespace_only_pieces=True,
      split_digits=True, character_coverage=0.9995, max_sentence_length=1 << 24,
      user_defined_symbols=["\n", "\t", "\r"], control_symbols=list(special_tokens),
      unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, num_threads=1, minloglevel=2,
      shuffle_input_sentence=False)
  return SentencePieceTokenizer(buf.getvalue(), eos_token=eos_token, pad_token=pad_token,
                                special_tokens=special_tokens)
