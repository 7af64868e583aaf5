"""RL prompts and `rl.max_prompt_len`: refused or skipped when loaded, never cut.

A cut prompt would give the trainer's log-probs another context than the sampler's.
`rl.long_prompts="refuse"` (default) makes a task set with a longer prompt an invalid
config (every such task listed with its length); `"skip"` leaves those tasks out and
reports how many (the RL rows carry the count as `skipped_long_prompts`).
"""

from __future__ import annotations

from typing import Any, Sequence

from rcca_jax.data import chat
from rcca_jax.train.config_check import ConfigError

_LISTED = 20  # tasks named in the error; the rest are counted


def fit_prompts(tokenizer: Any, tasks: Sequence[Any], max_prompt_len: int,
                long_prompts: str = "refuse") -> tuple[list[Any], int]:
  """The tasks whose prompt fits and how many were skipped; raises `ConfigError`
  naming the long ones when `long_prompts` is "refuse"."""
  kept, long = [], []
  for task in tasks:
    length = len(chat.format_prompt(tokenizer, task.request))
    if length > max_prompt_len:
      long.append((task.id, length))
    else:
      kept.append(task)
  if long and long_prompts == "refuse":
    listed = ", ".join(f"{tid} ({n} tokens)" for tid, n in long[:_LISTED])
    more = f" and {len(long) - _LISTED} more" if len(long) > _LISTED else ""
    raise ConfigError([
        f"rl.max_prompt_len={max_prompt_len}: {len(long)} of {len(tasks)} RL prompts "
        f"are longer: {listed}{more} (raise it, or set rl.long_prompts='skip')"])
  if not kept:
    raise ConfigError([f"rl.max_prompt_len={max_prompt_len}: no RL prompt fits"])
  return kept, len(long)
