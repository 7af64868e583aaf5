"""One RL step's data: prompts -> G samples -> evaluation -> advantages and weights ->
packed batch, and its metrics row.

The sampler's tokens are decoded to the response text; each token's character range
in that text (the tokenizer's offset mapping, computed in linear time) lets the
evaluator's issue spans become per-token diagnostic weights
(`credit.diagnostic_weights`). Evaluation runs in a host-side `Grader`, by default the
`EvalPool` (spawned workers with browsers and a per-response deadline, so a hung or
crashing app costs at most its deadline). `credit.blame` picks what is blamed
(`credit/blame.py`: the evaluator's issues, a placebo of them, the known sites, or the
tokens that differ from a better response of the same group).
The RCCA effective weights are computed inside the loss from `wbar` and the advantages.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rcca_jax import credit
from rcca_jax.base.schema import GATES
from rcca_jax.credit import blame as blame_lib
from rcca_jax.credit import controlled
from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import batching
from rcca_jax.data import chat
from rcca_jax.evaluation.grader import Grader
from rcca_jax.evaluation.pool import GRADING_FAILED, Job
from rcca_jax.evaluation.record import UNSCORABLE
from rcca_jax.parallel import multihost
from rcca_jax.rl import objective
from rcca_jax.train import copy_metrics
from rcca_jax.train import faults
from rcca_jax.train.offsets import token_offsets
from rcca_jax.train.run_log import note

PLACEBO_SALT = 0x9A1CEB0  # keeps placebo draws apart from other uses of the seed
DEFAULT_DIRECT = blame_lib.CreditConfig.direct  # sibling-diff weight without `weights`


@dataclasses.dataclass
class Rollout:
  """One sampled response with its evaluation."""
  task: Any
  sample_id: int
  prompt: list[int]
  tokens: list[int]         # response tokens, the end token included when emitted
  logprobs: np.ndarray      # [len(tokens)] sampler log-probabilities
  text: str                 # the response text (end token excluded)
  offsets: np.ndarray       # [len(tokens), 2] character ranges in `text`
  record: dict[str, Any] | None = None
  wbar: np.ndarray | None = None  # [len(tokens)] diagnostic weights
  seed: int = 0             # the sampler's seed of its batch (seeds the placebo)
  blame: str = "evaluator"  # where `wbar`'s blame came from (`assign_weights`)

  @property
  def reward(self) -> float | None:
    """The record's reward; None when every rubric was ungraded or the record is
    unscorable (docs/method.md#2-gated-reward)."""
    if not self.record:
      return 0.0
    reward = self.record["reward"]
    return None if reward is None or self.record.get(UNSCORABLE) else float(reward)


def decode_with_offsets(tokenizer: Any, tokens: Sequence[int],
                        end_ids: Sequence[int]) -> tuple[str, np.ndarray]:
  """Response text and each token's [start, end) in it, in linear time.

  The ranges are the tokenizer's offset mapping of the text re-encoded to these tokens
  (`train.offsets`): a token holding part of a multi-byte character gets the whole
  character's span. Trailing end tokens get the empty range at the end of the text.
  """
  body = list(tokens)
  while body and body[-1] in end_ids:
    body.pop()
  text = tokenizer.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False)
  offsets = np.full((len(tokens), 2), len(text), np.int64)
  offsets[:len(body)] = token_offsets(tokenizer, body, text)
  return text, offsets


def sample(sampler: Any, tokenizer: Any, tasks: Sequence[Any], *, n: int,
           max_new_tokens: int, temperature: float, seed: int) -> list[Rollout]:
  """`n` responses per task (prompt-major), decoded, not yet evaluated."""
  prompts = [chat.format_prompt(tokenizer, t.request) for t in tasks]
  end_ids = chat.eos_ids(tokenizer)
  out = sampler.sample(prompts, n=n, max_new_tokens=max_new_tokens,
                       temperature=temperature, seed=seed, eos_ids=end_ids)
  rollouts = []
  for row in range(len(prompts) * n):
    task_index, sample_id = divmod(row, n)
    length = int(out.lengths[row])
    tokens = [int(t) for t in out.tokens[row, :length]]
    text, offsets = decode_with_offsets(tokenizer, tokens, end_ids)
    rollouts.append(Rollout(task=tasks[task_index], sample_id=sample_id,
                            prompt=prompts[task_index], tokens=tokens,
                            logprobs=np.asarray(out.logprobs[row, :length], np.float32),
                            text=text, offsets=offsets, seed=seed))
  return rollouts


def grade(pool: Grader, rollouts: Sequence[Rollout],
          only: Sequence[int] | None = None) -> None:
  """Fills each rollout's `record` from the pool (localized there when the pool has
  the post-process); with `only`, of those rows alone (e.g. the unscorable ones graded
  again)."""
  rows = range(len(rollouts)) if only is None else list(only)
  jobs = [Job(task=rollouts[i].task, response=rollouts[i].text,
              sample_id=rollouts[i].sample_id) for i in rows]
  for i, record in zip(rows, pool.run(jobs, progress=False)):
    rollouts[i].record = record


def evaluate(pool: Grader, rollouts: Sequence[Rollout], *,
             weights: Mapping[str, float] | None = None, blame: str = "evaluator"
             ) -> None:
  """`grade`, then every `wbar` (`assign_weights`)."""
  grade(pool, rollouts)
  assign_weights(rollouts, weights=weights, blame=blame)


def unscorable_rows(rollouts: Sequence[Rollout]) -> list[int]:
  """Rows whose record is no verdict (`record.UNSCORABLE`: grading did not finish, or
  the judge could not grade)."""
  return [i for i, r in enumerate(rollouts) if (r.record or {}).get(UNSCORABLE)]


def settle_unscorable(pool: Grader, rollouts: Sequence[Rollout], *, step: int,
                      max_share: float, retries: int,
                      last_checkpoint: Callable[[], str]) -> int:
  """Grades the unscorable rollouts again while their share of the step (over every
  process) exceeds `max_share` (`rl.max_unscorable`), at most `retries` times; how
  many times. Still over: `faults.RunStopped` (the step is not applied; its message
  names `last_checkpoint()`)."""
  for attempt in range(retries + 1):
    rows = unscorable_rows(rollouts)
    counts = [(len(rows), len(rollouts))]
    if multihost.is_multi_process():
      counts = multihost.allgather_json(counts[0])
    bad, total = (sum(c[i] for c in counts) for i in (0, 1))
    if bad <= max_share * total:
      return attempt
    if attempt < retries:
      note("RL step %d: %d of %d responses unscorable (rl.max_unscorable=%g): grading "
           "them again", step, bad, total, max_share)
      grade(pool, rollouts, only=rows)
  first = rollouts[rows[0]].record[UNSCORABLE] if rows else "in another process"
  raise faults.RunStopped(
      f"RL step {step}: {bad} of {total} responses unscorable after {retries} more "
      f"gradings (rl.max_unscorable={max_share:g}; first: {first}); the step was not "
      f"applied, last checkpoint: {last_checkpoint()}")


def step_row(rollouts: Sequence[Rollout], blame: str, controlled: bool,
             update: Mapping[str, float], started: float, **entries: float
             ) -> dict[str, float]:
  """An RL step's row (this process's): its records, token weights, blame and
  (`controlled`) known-bug statistics, its `update`'s metrics, the surprisal at the
  copying families' id slots (`copy_metrics.slot_surprisal`), the mean response
  length, then `entries` (the step's counts and seconds, in order) and `step_s`, the
  seconds since `started`."""
  row = record_stats([x.record for x in rollouts])
  row.update(weight_shares(rollouts))
  row.update(blame_stats(rollouts, blame))
  if controlled:
    row.update(bug_stats(rollouts))
  row.update(update)
  row.update(copy_metrics.slot_surprisal(
      [(x.task.request, x.text, x.offsets, x.logprobs[:len(x.offsets)]) for x in rollouts]))
  row["response_len"] = float(np.mean([len(x.tokens) for x in rollouts]))
  row.update(entries)
  row["step_s"] = time.time() - started
  return row


def assign_weights(rollouts: Sequence[Rollout], *,
                   weights: Mapping[str, float] | None = None,
                   blame: str = "evaluator", placebo_draw: int = 0) -> None:
  """Each graded rollout's `wbar` (diagnostic weights `weights`) under `blame`
  (`credit.blame`): the evaluator's issues; "placebo": those weights laid out at
  random (seeded by the rollout's sampler seed and its row in `rollouts`, and by
  `placebo_draw` when it is not 0: independent layouts of one batch); "oracle":
  the known bug sites it carries, or the evaluator's issues when it is not a
  combination of its task's sites; "sibling_diff": `weights["direct"]` on its tokens
  that differ from its group's best response when its reward is below that best
  (`sibling_diff`). `rollout.blame` says which."""
  if blame not in blame_lib.BLAME_MODES:
    raise ValueError(f"blame={blame!r}: expected one of {blame_lib.BLAME_MODES}")
  if blame == "sibling_diff":
    sibling_diff(rollouts, dict(weights or {}).get("direct", DEFAULT_DIRECT))
    return
  for row, rollout in enumerate(rollouts):
    issues, rollout.blame = (rollout.record or {}).get("issues") or [], "evaluator"
    if blame == "oracle":
      known = blame_lib.oracle_issues(rollout.task, rollout.text)
      if known is not None:
        issues, rollout.blame = known, "oracle"
    wbar = credit.diagnostic_weights(rollout.offsets, issues, **dict(weights or {}))
    if blame == "placebo":
      seed = (PLACEBO_SALT, rollout.seed, row) + ((placebo_draw,) if placebo_draw else ())
      wbar, rollout.blame = blame_lib.placebo_weights(wbar, seed), "placebo"
    rollout.wbar = wbar


def sample_groups(rollouts: Sequence[Rollout]) -> list[range]:
  """The GRPO groups of prompt-major `rollouts`: maximal runs of consecutive rows whose
  sample ids count up by one (`sample` numbers each prompt's samples 0, 1, ...)."""
  starts = [row for row, r in enumerate(rollouts)
            if row == 0 or r.sample_id != rollouts[row - 1].sample_id + 1]
  return [range(a, b) for a, b in zip(starts, starts[1:] + [len(rollouts)])]


def sibling_diff(rollouts: Sequence[Rollout], direct: float) -> None:
  """Model-free blame (docs/method.md#9-blame-sources): in each group, a rollout
  rewarded below the group's best gets `direct` on its tokens that differ from the
  first best-rewarded one (`blame.sibling_diff_weights`, blame "sibling_diff"); the
  others get weight 1 everywhere (blame "uniform")."""
  for group in sample_groups(rollouts):
    references = blame_lib.sibling_references([rollouts[i].reward for i in group])
    for row, ref in zip(group, references):
      rollout = rollouts[row]
      if ref is None:
        rollout.wbar, rollout.blame = np.ones(len(rollout.tokens), np.float32), "uniform"
      else:
        rollout.wbar = blame_lib.sibling_diff_weights(
            rollout.tokens, rollouts[group[ref]].tokens, direct)
        rollout.blame = "sibling_diff"


def blame_stats(rollouts: Sequence[Rollout], blame: str) -> dict[str, float]:
  """With oracle blame, the share of rollouts that kept the evaluator's blame (not a
  combination of their task's sites); with sibling-diff blame, the share diffed against
  a better sibling; nothing for the other modes."""
  shares = {"oracle": ("oracle_fallback_rate", lambda r: r.blame != "oracle"),
            "sibling_diff": ("sibling_diff_rate", lambda r: r.blame == "sibling_diff")}
  if blame not in shares:
    return {}
  name, counts = shares[blame]
  return {name: float(np.mean([counts(r) for r in rollouts])) if rollouts else 0.0}


def passed_all(record: Mapping[str, Any]) -> bool:
  """All gates pass and every rubric of the task passes."""
  gates = record.get("gates") or {}
  rubrics = record.get("rubrics") or []
  return (all(gates.get(g) is True for g in GATES) and bool(rubrics)
          and all(r.get("passed") is True for r in rubrics))


def record_stats(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
  """Over the scorable records: mean reward (of those that have one), how many have
  none (all rubrics ungraded), each gate's pass rate, all-gates rate and pass rate.
  Counted over all: `unscorable` records (no verdict), of them `grading_failed`, and
  `ungraded_rubrics` (rubrics without a verdict, scorable records' included)."""
  unscorable = [r for r in records if r.get(UNSCORABLE)]
  ungraded = sum(rub.get("passed") is None and str(rub.get("detail", "")).startswith("ungraded")
                 for r in records for rub in r.get("rubrics") or [])
  records = [r for r in records if not r.get(UNSCORABLE)]
  n = max(len(records), 1)
  rewards = [float(r["reward"]) for r in records if r.get("reward") is not None]
  stats = {"reward_mean": sum(rewards) / max(len(rewards), 1),
           "no_reward": float(len(records) - len(rewards)),
           "unscorable": float(len(unscorable)),
           "grading_failed": float(sum(GRADING_FAILED in r for r in unscorable)),
           "ungraded_rubrics": float(ungraded)}
  for gate in GATES:
    stats[f"gate_{gate}"] = sum((r.get("gates") or {}).get(gate) is True
                                for r in records) / n
  stats["gates_pass"] = sum(all((r.get("gates") or {}).get(g) is True for g in GATES)
                            for r in records) / n
  stats["pass_rate"] = sum(passed_all(r) for r in records) / n
  return stats


def group_advantages(rollouts: Sequence[Rollout], group_size: int,
                     scale_by_std: bool = True) -> np.ndarray:
  """Each rollout's GRPO advantage in its group of `group_size` consecutive rows
  (`objective.group_advantages`, docs/method.md#7-objective), float32 [B]. A response
  without a reward (all rubrics ungraded, or unscorable) gets 0, and its group's
  advantages come from its graded members only."""
  graded = np.asarray([r.reward is not None for r in rollouts])
  rewards = np.asarray([r.reward or 0.0 for r in rollouts], np.float32)
  if graded.all():
    return np.asarray(objective.group_advantages(rewards, group_size,
                                                 scale_by_std=scale_by_std))
  advantages = np.zeros_like(rewards)
  for start in range(0, len(rollouts), group_size):
    rows = start + np.flatnonzero(graded[start:start + group_size])
    if len(rows):
      advantages[rows] = np.asarray(objective.group_advantages(
          rewards[rows], len(rows), scale_by_std=scale_by_std))
  return advantages


def rl_layout(rl: Any) -> dict[str, Any]:
  """`rl_batch`'s layout keywords of an `rl` section: rows of at most
  `max_prompt_len + max_new_tokens`, `length_bucket`, and `shared_prefix` when set."""
  return {"max_len": rl.max_prompt_len + rl.max_new_tokens,
          "length_bucket": rl.length_bucket,
          "shared_prefix": ((rl.group_size, rl.max_prompt_len) if rl.shared_prefix
                            else None)}


def rl_batch(rollouts: Sequence[Rollout], advantages: np.ndarray, *, max_len: int,
             pad_id: int, in_loss: np.ndarray | None = None,
             length_bucket: int = 0, shared_prefix: tuple[int, int] | None = None
             ) -> dict[str, np.ndarray]:
  """The train step's batch (docs/contracts.md#rl-batch-layout) with the rollouts'
  `advantages` (`group_advantages`).

  Rows are `max_len` long, or with `length_bucket` (`rl.length_bucket`) the longest
  row of the step (over every process: a collective then) rounded up to a multiple of
  it (`batching.bucket_length`): the train step compiles once per length used. With
  `shared_prefix` = (group_size, max_prompt_len) (`rl.shared_prefix`), each group's
  prompt is stored once (`batching.prefix_batch`), prompts and responses each bucketed
  so (responses at most `max_len - max_prompt_len`).

  A row leaves the loss (zero loss mask; it keeps its place, the batch shape is fixed)
  when its response has no reward (all rubrics ungraded, or unscorable) or `in_loss`
  marks it False (a flat group dropped, `flat_groups.dynamic_sampling`).
  """
  kept = np.asarray([r.reward is not None for r in rollouts])
  if in_loss is not None:
    kept &= in_loss
  layout = dict(pad_id=pad_id,
                per_token={"old_logp": [r.logprobs for r in rollouts],
                           "wbar": [r.wbar for r in rollouts]},
                per_sequence={"advantages": advantages}, token_fill={"wbar": 1.0})
  prompts, responses = [r.prompt for r in rollouts], [r.tokens for r in rollouts]
  if shared_prefix:
    group_size, max_prompt = shared_prefix
    prompt_len, response_len = (
        _width([len(p) for p in prompts], max_prompt, length_bucket),
        _width([len(t) for t in responses], max_len - max_prompt, length_bucket))
    batch = batching.prefix_batch(prompts, responses, group_size=group_size,
                                  prompt_len=prompt_len, response_len=response_len,
                                  **layout)
  else:
    width = _width([len(p) + len(t) for p, t in zip(prompts, responses)], max_len,
                   length_bucket)
    batch = batching.pack_batch(prompts, responses, max_len=width, **layout)
  batch["loss_mask"][~kept] = 0.0
  return batch


def _width(lengths: Sequence[int], max_len: int, bucket: int) -> int:
  """`max_len`, or with `bucket` the longest of `lengths` (over every process: a
  collective then) rounded up to a multiple of it (`batching.bucket_length`)."""
  if not bucket:
    return max_len
  longest = max(lengths, default=0)
  if multihost.is_multi_process():
    longest = max(multihost.allgather_json(longest))
  return batching.bucket_length(longest, max_len, bucket)


def weight_shares(rollouts: Sequence[Rollout]) -> dict[str, float]:
  """Share of response tokens with a diagnostic weight > 1 (blamed) and mean wbar."""
  w = np.concatenate([r.wbar for r in rollouts if r.wbar is not None and len(r.wbar)]
                     or [np.ones(1, np.float32)])
  return {"blamed_token_share": float(np.mean(w > 1.0)), "wbar_mean": float(np.mean(w))}


def bug_stats(rollouts: Sequence[Rollout]) -> dict[str, float]:
  """Controlled setting, over (rollout, bug site) pairs (`controlled.site_outcome`).

  - `bug_rate`: share of (rollout, bug site) pairs whose rollout carries that bug, over
    all rollouts (one that is no combination of its task's sites carries none); for
    single-bug tasks the share of rollouts that are the known mutant;
  - `bug_rate_decomposable`: the same over the rollouts that are combinations of sites;
  - `neutral_rate`: share of (decomposable rollout, neutral site) pairs carrying the
    rewrite (tasks with neutral sites only);
  - `reference_rate`: share of rollouts that are exactly the reference;
    `decomposable_rate`: share that are a combination of the task's sites;
  - `bug_direct_recall` / `bug_any_recall`: over the bugs present, the share with a
    direct / a direct or context span on them (single-bug tasks: over mutant rollouts).
  """
  n = max(len(rollouts), 1)
  bug_pairs = dec_bug_pairs = carried = neutral_pairs = neutral_carried = 0
  decomposable = references = direct = any_hit = 0
  for r in rollouts:
    o = controlled.site_outcome(r.task, r.text, (r.record or {}).get("issues") or [])
    kinds = {s.name: s.kind for s in sites_lib.sites_of(r.task)}
    n_bugs = sum(k == "bug" for k in kinds.values())
    bug_pairs += n_bugs
    references += o["reference"]
    if o["sites"] is None:
      continue
    decomposable += 1
    dec_bug_pairs += n_bugs
    carried += len(o["hits"])
    neutral_pairs += len(kinds) - n_bugs
    neutral_carried += sum(v for name, v in o["sites"].items() if kinds[name] == "neutral")
    direct += sum(h["direct"] for h in o["hits"].values())
    any_hit += sum(h["any"] for h in o["hits"].values())
  stats = {"bug_rate": carried / max(bug_pairs, 1), "reference_rate": references / n,
           "decomposable_rate": decomposable / n}
  if dec_bug_pairs:
    stats["bug_rate_decomposable"] = carried / dec_bug_pairs
  if neutral_pairs:
    stats["neutral_rate"] = neutral_carried / neutral_pairs
  if carried:
    stats["bug_direct_recall"] = direct / carried
    stats["bug_any_recall"] = any_hit / carried
  return stats
