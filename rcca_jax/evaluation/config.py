"""Evaluator settings: deadlines, isolation, recycling, judge and reward configuration."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from rcca_jax.base import mapping

HANG_LOCATORS = ("replay", "debugger", "profiler", "none")
PARTIAL_JUDGE = ("unscorable", "drop")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """Every knob of the evaluator; all times in seconds unless the name says ms."""

  load_timeout: float = 5.0          # page load (incl. inline scripts) of one app
  step_timeout: float = 2.0          # one DSL step / one browser call
  rubric_timeout: float = 15.0       # one rubric, all steps together
  response_deadline: float = 90.0    # wall clock per response, enforced by killing the worker
  settle_ms: float = 50.0            # after load and after each action: one frame + timers
  expect_retry_ms: float = 150.0     # a failing expectation is re-read once after this
  recycle_context_after: int = 25    # new browser context every N apps (bounds memory)
  recycle_worker_after: int = 200    # new worker process (and browser) every N apps
  worker_start_timeout: float = 12.0  # one worker start (process, browser, first context)
  worker_start_retries: int = 1      # failed starts per worker before the pool gives up
  infra_retries: int = 1             # a response whose worker died or overran: graded again
  # RLIMIT_DATA of each worker and its browser processes (0: none). RLIMIT_AS cannot
  # serve: V8 reserves far more address space than it uses, and Chromium dies at start
  # under an 8 GB address-space limit (docs/environment.md#browser).
  worker_memory_mb: int = 4096
  viewport: tuple[int, int] = (1280, 720)
  js_heap_mb: int = 256              # V8 old-space cap: memory bombs crash the tab fast
  prompt_answer: str = ""            # what window.prompt() returns
  accept_confirm: bool = True        # what window.confirm() returns
  share_readonly_loads: bool = True  # initial rubrics made only of expectations share a load
                                     # (the first other rubric's, before it runs)
  gate_on_interaction_errors: bool = True  # exceptions in rubric paths fail the runtime gate
  hang_locator: str = "replay"       # where a hung script loops: see hang_locator.py
  hang_probe_timeout: float = 1.0    # deadline of the replay that locates a hang
  judge_url: str | None = None       # OpenAI-compatible base URL (with or without /v1)
  judge_model: str | None = None
  judge_timeout: float = 20.0        # one judge request
  judge_retries: int = 2
  judge_budget: float = 30.0         # one judged rubric, all tries and waits (0: no limit)
  # A judged rubric the judge could not grade: "unscorable" (the record is no verdict,
  # record.UNSCORABLE) or "drop" (scored on the graded rubrics alone, as before).
  partial_judge: str = "unscorable"
  judge_max_app_chars: int = 24000   # app text sent to the judge is cut to this length
  reward: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # RewardConfig.from_dict

  @property
  def has_judge(self) -> bool:
    return bool(self.judge_url and self.judge_model)

  def reward_config(self):
    """The reward configuration (docs/method.md#2-gated-reward unless `reward` overrides)."""
    from rcca_jax.evaluation import reward  # pylint: disable=import-outside-toplevel
    return reward.RewardConfig.from_dict(dict(self.reward))

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "EvalConfig":
    """Builds a config from a plain mapping; unknown keys are an error naming them."""
    kw = mapping.strict_kwargs(cls, d, "evaluator config keys")
    if "viewport" in kw:
      kw["viewport"] = tuple(int(v) for v in kw["viewport"])
    config = cls(**kw)
    if config.hang_locator not in HANG_LOCATORS:
      raise ValueError(f"hang_locator must be one of {', '.join(HANG_LOCATORS)}, "
                       f"not {config.hang_locator!r}")
    if config.partial_judge not in PARTIAL_JUDGE:
      raise ValueError(f"partial_judge must be one of {', '.join(PARTIAL_JUDGE)}, "
                       f"not {config.partial_judge!r}")
    config.reward_config()  # validates the reward section now, not in a worker later
    return config

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d["viewport"] = list(self.viewport)
    d["reward"] = dict(self.reward)
    return d
