"""Prompt formatting: the project's own tokenizer, Ling tokenizers, and any checkpoint
tokenizer with a chat template (Llama, Qwen2, SmolLM2, ...).

Own format (special tokens of `data/tokenizer/`):
    <|user|>{system}\n\n{request}<|assistant|>{response}<|end|>
Ling chat template (detected by its `<role>` and `<|role_end|>` tokens):
    <role>SYSTEM</role>{system}\ndetailed thinking off<|role_end|>
    <role>HUMAN</role>{request}<|role_end|><role>ASSISTANT</role>{response}<|role_end|>
Checkpoint chat template (a tokenizer with neither of those special-token sets and a
`chat_template`): the template is rendered with placeholder texts; its own text between
them is encoded with special tokens recognised, the system prompt and request as plain
text. The turn end is the first special token the template puts after an assistant
message (ChatML: `<|im_end|>`).
Special-token ids are always looked up by name in the tokenizer; texts are encoded
separately, so text that merely looks like a special token stays plain text.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import TemplateError

SYSTEM_PROMPT = ("You build small web apps. Answer with one complete, self-contained HTML "
                 "file (inline CSS and JavaScript, no external resources) in a single "
                 "```html code block.")
USER, ASSISTANT, END, PAD = "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"
ROLE_OPEN, ROLE_CLOSE, ROLE_END = "<role>", "</role>", "<|role_end|>"
LING_THINKING_OFF = "\ndetailed thinking off"


_PLACEHOLDER = "\u27e6rcca-{}\u27e7"  # Rendered into the template, then cut out.
_PLACEHOLDERS = re.compile("(\u27e6rcca-(?:system|request|answer)\u27e7)")


class ChatFormatError(ValueError):
  """The tokenizer lacks the special tokens of either supported chat format."""


def _token_id(tokenizer: Any, token: str) -> int | None:
  """Id of `token` when the tokenizer has it as a single token, else None.

  One look-up (`get_vocab()` would copy the whole vocabulary on every call); a token
  the tokenizer lacks comes back as the unknown token's id (or None).
  """
  tid = tokenizer.convert_tokens_to_ids(token)
  if tid is None or (tid == tokenizer.unk_token_id and token != tokenizer.unk_token):
    return None
  return tid


def is_ling(tokenizer: Any) -> bool:
  """True for a tokenizer with the Ling role tokens (`<role>`, `</role>`, `<|role_end|>`)."""
  return all(_token_id(tokenizer, t) is not None for t in (ROLE_OPEN, ROLE_CLOSE, ROLE_END))


def has_own_format(tokenizer: Any) -> bool:
  return all(_token_id(tokenizer, t) is not None for t in (USER, ASSISTANT, END))


def uses_template(tokenizer: Any) -> bool:
  """True when prompts come from the tokenizer's chat template (see the docstring)."""
  return (not is_ling(tokenizer) and not has_own_format(tokenizer)
          and bool(getattr(tokenizer, "chat_template", None)))


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> str:
  return tokenizer.apply_chat_template(messages, tokenize=False,
                                       add_generation_prompt=generation_prompt)


def _template_ids(tokenizer: Any, rendered: str, texts: dict[str, str]) -> list[int]:
  """Ids of a rendered template: placeholders become their plain-text `texts`, the
  template's own text is encoded with its special tokens."""
  ids: list[int] = []
  for piece in _PLACEHOLDERS.split(rendered):
    match = _PLACEHOLDERS.fullmatch(piece)
    if match:
      ids += _encode(tokenizer, texts[piece[len("\u27e6rcca-"):-1]])
    elif piece:
      ids += list(tokenizer.encode(piece, add_special_tokens=False))
  return ids


def _template_prompt(tokenizer: Any, request: str, system: str | None) -> list[int]:
  user = {"role": "user", "content": _PLACEHOLDER.format("request")}
  texts = {"request": request, "system": system or ""}
  if system is None:
    return _template_ids(tokenizer, _render(tokenizer, [user], True), texts)
  try:
    rendered = _render(tokenizer, [{"role": "system", "content": _PLACEHOLDER.format(
        "system")}, user], True)
  except TemplateError:  # a template without a system role: it goes into the request
    texts["request"] = f"{system}\n\n{request}"
    rendered = _render(tokenizer, [user], True)
  return _template_ids(tokenizer, rendered, texts)


def template_turn_end(tokenizer: Any) -> int:
  """The first special token the chat template writes after an assistant message."""
  rendered = _render(tokenizer, [{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": _PLACEHOLDER.format(
                                     "answer")}], False)
  after = rendered.split(_PLACEHOLDER.format("answer"), 1)[-1]
  special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder",
                                                         {}))
  for tid in tokenizer.encode(after, add_special_tokens=False):
    if tid in special:
      return int(tid)
  eos = getattr(tokenizer, "eos_token_id", None)
  if eos is None:
    raise ChatFormatError("the chat template writes no special token after an assistant "
                          "message and the tokenizer has no EOS token")
  return int(eos)


def _special(tokenizer: Any, token: str) -> int:
  tid = _token_id(tokenizer, token)
  if tid is None:
    raise ChatFormatError(
        f"tokenizer has no {token!r} token: expected the project's tokenizer (with "
        f"{USER}, {ASSISTANT}, {END}) or a Ling tokenizer (with {ROLE_OPEN}, {ROLE_END})")
  return tid


def _encode(tokenizer: Any, text: str) -> list[int]:
  return list(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))


def _ling_turn(tokenizer: Any, role: str, text: str | None) -> list[int]:
  ids = [_special(tokenizer, ROLE_OPEN)] + _encode(tokenizer, role) + [
      _special(tokenizer, ROLE_CLOSE)]
  if text is not None:
    ids += _encode(tokenizer, text) + [_special(tokenizer, ROLE_END)]
  return ids


def format_prompt(tokenizer: Any, request: str, system: str | None = SYSTEM_PROMPT) -> list[int]:
  """Token ids of the prompt, ending where the assistant's answer starts."""
  if is_ling(tokenizer):
    ids: list[int] = []
    if system is not None:
      ids += _ling_turn(tokenizer, "SYSTEM", system + LING_THINKING_OFF)
    return ids + _ling_turn(tokenizer, "HUMAN", request) + _ling_turn(tokenizer, "ASSISTANT", None)
  if uses_template(tokenizer):
    return _template_prompt(tokenizer, request, system)
  user = request if system is None else f"{system}\n\n{request}"
  return ([_special(tokenizer, USER)] + _encode(tokenizer, user)
          + [_special(tokenizer, ASSISTANT)])


def eos_ids(tokenizer: Any) -> tuple[int, ...]:
  """Ids that end the assistant's turn (the turn terminator first, then the tokenizer EOS)."""
  if uses_template(tokenizer):
    first = template_turn_end(tokenizer)
  else:
    first = _special(tokenizer, ROLE_END if is_ling(tokenizer) else END)
  eos = getattr(tokenizer, "eos_token_id", None)
  return (first,) if eos is None or eos == first else (first, int(eos))


def pad_id(tokenizer: Any) -> int:
  """The padding id: `<|pad|>` when present, else the tokenizer's pad or EOS token."""
  tid = _token_id(tokenizer, PAD)
  if tid is not None:
    return tid
  pad = getattr(tokenizer, "pad_token_id", None)
  return int(pad) if pad is not None else eos_ids(tokenizer)[0]


def format_response(html: str) -> str:
  """The answer text for a reference app: one fenced html block."""
  return f"```html\n{html.rstrip()}\n```"


def format_sft_example(tokenizer: Any, request: str, response: str,
                       system: str | None = SYSTEM_PROMPT) -> tuple[list[int], list[int]]:
  """(ids, loss_mask): prompt (mask 0), then response tokens and the turn end (mask 1)."""
  prompt = format_prompt(tokenizer, request, system)
  answer = _encode(tokenizer, response) + [eos_ids(tokenizer)[0]]
  return prompt + answer, [0] * len(prompt) + [1] * len(answer)
