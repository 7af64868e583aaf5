"""Where a job's requests come from: the controlled setting's task set, the natural
train tasks, the dev tasks, the SFT examples and each RL step's prompts."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import jax

from rcca_jax.credit import controlled as controlled_lib
from rcca_jax.data import chat
from rcca_jax.data import draws
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.data.batching import batch_indices
from rcca_jax.data.selection import cap_tasks, load_task_file
from rcca_jax.parallel import multihost
from rcca_jax.train import prompts as prompts_lib
from rcca_jax.train import run_log
from rcca_jax.train import sections


class TaskSources:
  """The job's tasks, each set built once. `grade_pairs` grades (task, response)
  pairs (the controlled set's builder checks its mutants with it)."""

  def __init__(self, job: sections.JobConfig, tokenizer: Any, workdir: str,
               grade_pairs: Callable[[list], list[dict]]):
    self.job, self.tokenizer, self.workdir = job, tokenizer, workdir
    self._grade_pairs = grade_pairs
    self._controlled: Optional[list] = None
    self._dev: Optional[list] = None
    self._rl: Optional[list] = None
    self.skipped_prompts = 0

  @property
  def is_controlled(self) -> bool:
    return self.job.data.setting == "controlled"

  def controlled(self) -> list:
    """The controlled setting's task set (credit/controlled.py), built once into
    `data.controlled.path` (default DIR/controlled_tasks.jsonl), by process 0, and read
    back after."""
    if self._controlled is None:
      data = self.job.data
      path = (data.controlled.path
              or os.path.join(self.workdir, "controlled_tasks.jsonl"))
      if jax.process_index() == 0 and not os.path.exists(path):
        built = controlled_lib.build(load_task_file(data.train_tasks),
                                     data.controlled.spec, self._grade_pairs)
        tmp = path + ".tmp"
        tasks_lib.write_tasks(tmp, built)
        os.replace(tmp, path)
        run_log.note("controlled setting: %d tasks written to %s", len(built), path)
      multihost.barrier("controlled tasks")
      self._controlled = tasks_lib.load_tasks(path)
    return self._controlled

  def fresh(self) -> dict[str, tuple[tasks_lib.Task, ...]]:
    """`data.fresh`'s train and dev tasks (empty when off), requests disjoint from
    those of the train and dev files and of `data.fresh.exclude`."""
    d, spec = self.job.data, self.job.data.fresh
    if not spec.enabled:
      return {"train": (), "dev": ()}
    files = (d.train_tasks, self.job.eval.tasks, *spec.exclude)
    taken = frozenset(t.request for path in files if path for t in load_task_file(path))
    return draws.fresh_splits(tuple(d.families), spec.train_per_family,
                              spec.dev_per_family, spec.seed, taken,
                              spec.novel_dev_per_family, spec.drafting)

  def train(self, per_family: int = 0, need_reference: bool = False) -> list:
    """The natural setting's train tasks: `data.train_tasks`' (if any) then `data.fresh`'s, of
    `data.families`, at most `per_family` of each."""
    d = self.job.data
    listed = load_task_file(d.train_tasks) if d.train_tasks else ()
    where = " + ".join([d.train_tasks] * bool(d.train_tasks)
                       + ["data.fresh"] * bool(d.fresh.train_per_family))
    return cap_tasks((*listed, *self.fresh()["train"]), where=where or "data.train_tasks",
                     families=tuple(d.families), per_family=per_family,
                     need_reference=need_reference)

  def dev(self) -> list:
    """The dev evaluation's tasks: the controlled requests (greedy), else `eval.tasks`'
    then `data.fresh`'s (also written to DIR/fresh_dev_tasks.jsonl, for `--mode=eval`)."""
    if self._dev is None and self.is_controlled:
      self._dev = self.controlled()
    if self._dev is None:
      e, fresh = self.job.eval, self.fresh()["dev"]
      if fresh and jax.process_index() == 0:
        path = os.path.join(self.workdir, "fresh_dev_tasks.jsonl")
        tasks_lib.write_tasks(path + ".tmp", fresh)
        os.replace(path + ".tmp", path)
      listed = load_task_file(e.tasks) if e.tasks else ()
      where = (e.tasks or "eval.tasks") + (" + data.fresh" if fresh else "")
      self._dev = cap_tasks((*listed, *fresh), where=where,
                            families=tuple(self.job.data.families),
                            per_family=e.per_family, limit=e.num_tasks)
    return self._dev

  def rl(self) -> list:
    """The RL tasks whose prompts fit `rl.max_prompt_len` (`train.prompts`)."""
    if self._rl is None:
      r = self.job.rl
      tasks = self.controlled() if self.is_controlled else self.train(r.per_family)
      self._rl, self.skipped_prompts = prompts_lib.fit_prompts(
          self.tokenizer, tasks, r.max_prompt_len, r.long_prompts)
      if self.skipped_prompts:
        run_log.note("RL: %d tasks with prompts over %d tokens skipped",
                     self.skipped_prompts, r.max_prompt_len)
    return self._rl

  def rl_prompts(self, step: int, round_: int = 0) -> list:
    """RL step `step`'s prompts (all processes' share), in the run's seeded order;
    `round_` > 0: the step's further prompts for flat groups (`train.flat_groups`),
    from another seeded order."""
    tasks, r = self.rl(), self.job.rl
    return [tasks[i] for i in batch_indices(len(tasks), r.prompts_per_step, step,
                                            self.job.seed + 1 + 7919 * round_)]

  def sft_examples(self) -> list[tuple[list[int], list[int]]]:
    """(token ids, loss mask) of every SFT example that fits `sft.max_len`."""
    d, s = self.job.data, self.job.sft
    if self.is_controlled:
      pairs = controlled_lib.sft_targets(self.controlled(), d.controlled.spec.draws)
    else:
      tasks = self.train(s.per_family, need_reference=True)
      pairs = [(task, chat.format_response(task.reference)) for task in tasks]
    examples, skipped = [], 0
    for task, answer in pairs:
      ids, mask = chat.format_sft_example(self.tokenizer, task.request, answer)
      if len(ids) > s.max_len:
        skipped += 1
        continue
      examples.append((ids, mask))
    if not examples:
      raise ValueError(f"no SFT example fits sft.max_len={s.max_len}")
    run_log.note("SFT: %d examples (%d longer than %d skipped)", len(examples),
                 skipped, s.max_len)
    return examples
