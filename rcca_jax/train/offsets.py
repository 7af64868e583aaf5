"""Character ranges of sampled tokens in their decoded text, in linear time.

The ranges are the ones the tokenizer's own offset mapping gives when the text is
re-encoded to the same tokens: a token holding part of a multi-byte character gets
that whole character's span (so neighbouring ranges can overlap), and a ByteLevel
post-processor with `trim_offsets` drops the leading/trailing spaces of a token.

SentencePiece tokenizers (`data.sentencepiece_tokenizer`) give each piece's span directly.
Byte-level tokenizers (GPT-2 style, the project's own) are aligned from each token's
bytes with one vectorised pass. Other fast tokenizers re-encode the text and use its
offsets when that gives the sampled tokens; otherwise each token's range comes from
decoding a short window of the tokens before it (as incremental detokenizers do).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
from tokenizers import decoders, processors

_WINDOW = 6  # tokens of left context for the windowed fallback


def token_offsets(tokenizer: Any, ids: Sequence[int], text: str) -> np.ndarray:
  """[len(ids), 2] character ranges of `ids` in `text` (their decoding)."""
  out = np.zeros((len(ids), 2), np.int64)
  if not len(ids):
    return out
  if hasattr(tokenizer, "token_offsets"):  # SentencePiece: exact spans of its pieces
    return tokenizer.token_offsets(ids, text)
  backend = getattr(tokenizer, "backend_tokenizer", None)
  if backend is not None and isinstance(backend.decoder, decoders.ByteLevel):
    byte_offsets = _byte_level(_ByteTable.of(backend), ids, text)
    if byte_offsets is not None:
      return byte_offsets
  if backend is not None:
    enc = backend.encode(text, add_special_tokens=False)
    if enc.ids == list(ids):
      return np.asarray(enc.offsets, np.int64).reshape(-1, 2)
    return _windowed(backend, list(ids), text)
  raise TypeError(f"{type(tokenizer).__name__} is not a fast tokenizer: no offsets")


class _ByteTable:
  """Per-id bytes and trimmable leading/trailing space counts of a byte-level vocab."""

  def __init__(self, backend: Any):
    to_byte = {c: b for b, c in _bytes_to_unicode().items()}
    added = backend.get_added_tokens_decoder()
    size = max([backend.get_vocab_size(with_added_tokens=True)] + [i + 1 for i in added])
    self.bytes: list[bytes] = [b""] * size
    self.lead = np.zeros(size, np.int64)
    self.trail = np.zeros(size, np.int64)
    for i in range(size):
      token = added[i].content if i in added else backend.id_to_token(i)
      if token is None:
        continue
      if i in added:
        self.bytes[i] = token.encode("utf-8")
      else:
        self.bytes[i] = bytes(to_byte.get(c, 0) for c in token)
      self.lead[i] = len(token) - len(token.lstrip("\u0120 \t\n\r\f\v"))
      self.trail[i] = len(token) - len(token.rstrip("\u0120 \t\n\r\f\v"))
    self.lengths = np.asarray([len(b) for b in self.bytes], np.int64)
    post = backend.post_processor
    self.trim = isinstance(post, processors.ByteLevel) and bool(post.trim_offsets)

  @staticmethod
  @functools.lru_cache(maxsize=4)
  def of(backend: Any) -> "_ByteTable":
    return _ByteTable(backend)


def _byte_level(table: _ByteTable, ids: Sequence[int], text: str) -> np.ndarray | None:
  """Offsets from token bytes, or None when the bytes are not the valid UTF-8 of `text`."""
  arr = np.asarray(ids, np.int64)
  known = (arr >= 0) & (arr < len(table.bytes))
  safe = np.where(known, arr, 0)
  lengths = np.where(known, table.lengths[safe], 0)
  data = b"".join([table.bytes[i] for i in safe[known].tolist()])
  try:
    if data.decode("utf-8") != text:
      return None
  except UnicodeDecodeError:
    return None
  raw = np.frombuffer(data, np.uint8)
  is_start = (raw & 0xC0) != 0x80                      # first byte of a character
  char_of = np.cumsum(is_start) - 1                    # character index of each byte
  ends = np.cumsum(lengths)
  starts = ends - lengths
  nonempty = lengths > 0
  last_byte = max(len(raw) - 1, 0)
  first = char_of[np.minimum(starts, last_byte)] if len(raw) else starts
  last = char_of[np.maximum(ends - 1, 0)] + 1 if len(raw) else ends
  at = np.searchsorted(np.flatnonzero(is_start), starts)  # where a byte-less token sits
  out = np.empty((len(ids), 2), np.int64)
  out[:, 0] = np.where(nonempty, first, at)
  out[:, 1] = np.where(nonempty, last, at)
  if table.trim:
    _trim(out, table.lead[safe] * nonempty, table.trail[safe] * nonempty)
  return out


def _trim(out: np.ndarray, lead: np.ndarray, trail: np.ndarray) -> None:
  """The ByteLevel post-processor's `trim_offsets`, in place (the decoded text has no
  added prefix space, so the first token is trimmed like the others)."""
  out[:, 0] = np.where(lead > 0, np.minimum(out[:, 0] + lead, out[:, 1]), out[:, 0])
  cut = (trail > 0) & (out[:, 1] >= trail)
  out[:, 1] = np.where(cut, np.maximum(out[:, 1] - trail, out[:, 0]), out[:, 1])


def _windowed(backend: Any, ids: list[int], text: str) -> np.ndarray:
  """Each token's range from decoding it after a short window of earlier tokens.

  A token whose decoding ends in an incomplete character (U+FFFD) waits for the token
  that completes it; all of them get that character's span."""
  heads = [ids[max(0, i - _WINDOW):i] for i in range(len(ids))]
  before = backend.decode_batch(heads, skip_special_tokens=False)
  after = backend.decode_batch([h + [t] for h, t in zip(heads, ids)], skip_special_tokens=False)
  out = np.zeros((len(ids), 2), np.int64)
  pos, pending = 0, []
  for i, (b, a) in enumerate(zip(before, after)):
    if a.endswith("\ufffd"):
      pending.append(i)
      continue
    end = min(pos + max(len(a) - len(b.rstrip("\ufffd")), 0), len(text))
    for j in pending:
      out[j] = (pos, min(pos + 1, end))
    pending = []
    out[i] = (pos, end)
    pos = end
  for j in pending:
    out[j] = (pos, len(text))
  return out


@functools.lru_cache(maxsize=1)
def _bytes_to_unicode() -> dict[int, str]:
  """GPT-2's reversible byte -> printable character table (the ByteLevel alphabet)."""
  keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
  table, extra = {}, 0
  for b in range(256):
    if b in keep:
      table[b] = chr(b)
    else:
      table[b] = chr(256 + extra)
      extra += 1
  return table
