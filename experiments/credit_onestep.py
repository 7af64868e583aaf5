"""The one-step paired instrument: where does one update of each arm move the bug sites?

    python -m experiments.credit_onestep --config=experiments/credit_study2.py \
        --setting=s1_0 --checkpoint=DIR/s1_0/seed_0/sft/checkpoints/sft \
        --batches=N --out=OUT [--arms=grpo,grpo_neg_const,rcca,rcca_focus,rcca_focus_placebo] \
        [--batches_dir=OUT/batches] [--first_step=0] [--workdir=SCRATCH] [--merge=OUT2,...] \
        [--config.eval.grading_cache=DIR/s1_0/grading_cache] [--config.FIELD=VALUE ...]

Credit study 2 compared arms by whole 36-step runs, 5 seeds each, and could not resolve
focus against its placebo (Δ AUC p_bug −0.006 [−0.035, 0.028] in s1_0). This
instrument removes the run-to-run noise: every arm makes ONE optimizer update on the
same graded RL batch, from the same checkpoint state, and the effect is read where the
controlled setting knows the bugs are.

Batches: the trainer's RL batches of steps `first_step .. first_step + N - 1`, sampled
at the checkpoint's parameters and graded once (`benchmarks/credit_mechanism.py`:
`sample_batches`, pickled in its format in `--batches_dir`; batches already there are
read back, the missing ones sampled and added). Per batch and arm: the arm's batch
(its advantages and credit weights, `credit_mechanism.arm_batch`) and one update of the
trainer's compiled RL step (`Programs.rl_programs`, `batch_updates.update_batch`) from
the checkpoint's parameters with a fresh optimizer of the arm's `rl.optimizer`, as the
trainer's first RL step makes it. The batch has the trainer's layout
(`rl.length_bucket`; each group's prompt once with `rl.shared_prefix`, which credit
study 3's config sets: the same loss within float32 rounding, 1.3x faster updates).

Margin at a bug site: `logp(bug variant) − logp(reference)`, each the teacher-forced
answer log-probability of the site metrics (`train/site_metrics.py`, the same compiled
program: `Programs.site_metrics`, bug sites only, batches as long as their sequences),
so `sigmoid(margin)` is that site's p_bug. Measured before (at the checkpoint) and after
each arm's update, at every bug site of the batch's requests, both in the same batches
of sequences; `Δmargin = after − before`, and `Δp_bug` the change of its sigmoid.
A site is blamed in a batch when some failed response (negative advantage) of its
request carries the bug and the evaluator's blame covers it (`wbar > 1` on a token
overlapping the bug's span in that response, the evaluator's diagnostic weights of
the config's `credit`); otherwise unblamed (the bug absent from the failed responses,
or present but not blamed). A response's bugs are read whole when it is exactly a
combination of the task's sites, else site by site in each site's neighbourhood
(`carried_bugs`, `sites.find_sites`: sampled noise elsewhere in a response no longer
hides its bugs; sites with noise in their neighbourhood count for neither). Outputs
measured before this locator are rewritten by `--relabel` (margins untouched).

Statistics and resolution (`credit_onestep_stats`): pooled means over (batch, site)
pairs, paired differences between arms on the same pairs, 95% bootstrap intervals that
resample batches; focus − placebo's half-width is the resolution.

`--setting` names a setting of any config with `settings` (credit study 2's s1_0 / s3_4,
credit study 3's low_overlap / long / multi_bug, ...); `--arms=setting` measures the
setting's `ablation.arms`. Each batch's shape is recorded beside its pairs
(`batch_properties`; the summary's `properties`): response length, the blamed and the
bug-site token shares of failed responses, and how much the positive responses of a
group overlap its failed ones (hold the failed response's bug fixed, at the same place;
share of matching tokens).

Placebo layouts: arms `rcca_focus_placebo_dK` (`credit.placebo_draw` K) are further
random layouts of the same batch; with them the comparisons add focus − their mean with
the placebo's (`PLACEBO_MEAN`). On low_overlap (44 batches) four layouts narrowed
focus − placebo's interval by 1.2x only (the batch's own update, not the placebo's
draw, carries the noise), so more batches buy more resolution than more layouts.
`--merge` joins other outputs of the same checkpoint (other arms measured on the same
batches, `--batches_dir`) into this one's statistics; `--join` adds other outputs' batches
(other steps) on the arms all of them measure; a committed `summary.json` joins as
well, so a study goes on where its `pairs.jsonl` is gone (another machine). Batches
are sampled, saved and measured `--chunk` at a time, so a stopped run loses at most one
chunk's sampling.

Outputs in `--out`: `pairs.jsonl` (one line per measured batch; a rerun with the same
checkpoint and arms measures only the batches missing), `summary.json` (every pair's
raw before/after values, so `credit_onestep_stats.recompute` rebuilds every number)
and the printed table; how outputs join: `credit_onestep_lines`.

What one update is: AdamW's first step from fresh moments moves every parameter by
about the learning rate along the sign of its (clipped) gradient, so the instrument sees
each arm's sign pattern, not its gradient's size; later steps of a run weigh sizes
through the moments. The instrument measures the first step only.

Pilot (s1_0, seed 0's SFT rebuilt with the study's command: post-SFT p_bug 0.5486573,
study 2's to 5e-8 relative; 55 batches of 4 groups x 6, 220 (batch, site) pairs, 102
blamed; 36 s per batch for the five arms on 2 shared CPU cores; commands and times in
/root/cs3/PILOT.md of that session). focus − placebo at blamed sites: Δmargin +0.045
[+0.003, +0.086] nats, Δp_bug +0.011 [+0.001, +0.020] per update: the placebo lowers
the bug more than focus, on each of the four requests. Smallest resolvable effect (the
half-width): 0.041 nats of margin and 0.0096 in p_bug per update at blamed sites,
0.0056 in p_bug at all sites. Against study 2's half-width of 0.0315 in AUC p_bug: x 18
it is 0.10, coarser, but linear accumulation overstates (focus − grpo is −0.015 per
update here, x 18 = −0.28, against −0.095 in study 2); unit free, as a share of
|focus − grpo|, it is 0.37 here and 0.33 in study 2: 55 batches resolve about as finely
as study 2's five seeds, at the first update, and the half-width falls as
1/sqrt(batches).
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import json
import os
import tempfile
import time
from typing import Any, Iterable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from absl import app
from absl import flags
from ml_collections import config_flags

from benchmarks import credit_mechanism
from experiments import credit_onestep_lines as onestep_lines
from experiments import credit_onestep_stats as onestep_stats
from rcca_jax.base import host_allocator
from rcca_jax.credit import blame as blame_lib
from rcca_jax.credit import sites as sites_lib
from rcca_jax.rl import batch_updates
from rcca_jax.rl import optim
from rcca_jax.study import ablation
from rcca_jax.study import sweep
from rcca_jax.train import rollouts as rollouts_lib
from rcca_jax.train import sections

ARMS = "grpo,grpo_neg_const,rcca,rcca_focus,rcca_focus_placebo"
SiteKey = tuple[str, str]  # (task id, site name)


# ---- arms and updates ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class OneStepArm:
  """An arm's loss and credit (`credit_mechanism.Arm`) and its RL optimizer."""
  name: str
  credit: credit_mechanism.Arm
  optimizer: optim.OptimizerConfig


def arms_of(config: Any, names: Sequence[str]) -> list[OneStepArm]:
  """The arms `names` of `config.arms`, each with its own `rl.optimizer` schedule."""
  out = []
  for name in names:
    job = sections.job_config(ablation.arm_config(config, 0, name))
    out.append(OneStepArm(name, credit_mechanism.arm(config, name), job.rl.optimizer))
  return out


def check_one_update(trainer: Any) -> None:
  """The instrument applies one update to a batch as sampled: no μ or mini-batches,
  no dynamic sampling."""
  r = trainer.job.rl
  if trainer.update_config.updates_per_batch != 1:
    raise ValueError("rl.num_iterations and rl.mini_batches must be 1 (one update per batch)")
  if r.resample_flat_rounds or r.flat_groups != "keep":
    raise ValueError("dynamic sampling (rl.resample_flat_rounds, rl.flat_groups) is not "
                     "measured here")


def start_state(state: Any, fresh: Any) -> Any:
  """Copies of `state`'s parameters, model state and key with `fresh`'s optimizer
  state and step (the trainer's RL step 0; copies, because the compiled step donates
  its state)."""
  return jax.tree.map(jnp.copy, fresh.replace(
      params=state.params, model_state=state.model_state, rng=state.rng))


class Updates:
  """The trainer's compiled RL update per (loss, optimizer), compiled once each, and a
  fresh optimizer state per optimizer."""

  def __init__(self, trainer: Any):
    self.trainer = trainer
    self._programs: dict[tuple, Any] = {}
    self._fresh: dict[optim.OptimizerConfig, Any] = {}

  def __call__(self, arm: OneStepArm, state: Any, batch: Mapping[str, np.ndarray]
               ) -> tuple[Any, dict[str, float]]:
    """The state after the arm's one update of `batch` from `start_state`, and the
    update's metrics."""
    key = (arm.credit.loss, arm.optimizer)
    if key not in self._programs:
      self._programs[key] = self.trainer.programs.rl_programs(
          arm.credit.loss, arm.optimizer, self.trainer.checkpoints.reference_state)
    if arm.optimizer not in self._fresh:
      self._fresh[arm.optimizer] = self.trainer.programs.fresh_state(arm.optimizer)
    p = self._programs[key]
    new, per_update, _, skipped = batch_updates.update_batch(
        p.update, start_state(state, self._fresh[arm.optimizer]), batch,
        self.trainer.update_config, keys=p.objective.keys, reference=p.reference,
        policy_logprobs=p.old_logprobs)
    if skipped:
      raise ValueError(f"arm {arm.name}: update skipped ({skipped})")
    return new, per_update[0]


# ---- sites ---------------------------------------------------------------------------

def bug_margins(trainer: Any, state: Any, tasks: Sequence[Any]) -> dict[SiteKey, float]:
  """`logp(bug variant) − logp(reference)` of every bug site of `tasks` under `state`
  (the site metrics' records, bug sites only, each batch as long and with as many rows
  as its sequences need: `rl.length_bucket`, `fit_rows`; sites too long to score are
  left out)."""
  records = trainer.programs.site_metrics(
      state, list(tasks), kinds=("bug",), length_bucket=trainer.job.rl.length_bucket,
      fit_rows=True).get("sites", [])
  return {(r["task_id"], r["site"]): r["logp"]["bug"] - r["logp"]["reference"]
          for r in records if r["kind"] == "bug"}


LOCATOR = "exact, else window"  # how `site_blame` finds a failed response's bugs


def carried_bugs(task: Any, text: str) -> tuple[dict[str, tuple[int, int]], bool]:
  """The bug sites `text` carries, each with its span in `text` (a deletion: the
  character after it), and whether `text` is exactly a combination of the task's sites.
  A combination is read whole (`blame.oracle_issues`); any other response site by site
  in its neighbourhood (`sites.find_sites`), so sampled noise elsewhere (most of the
  long setting's 1,650-token responses hold some) does not hide its bugs."""
  issues = blame_lib.oracle_issues(task, text)
  if issues is not None:
    return {i["site"]: tuple(i["direct"][0]) for i in issues}, True
  sites = sites_lib.sites_of(task)
  found = sites_lib.find_sites(sites_lib.reference_answer(task), sites, text)
  kinds = {s.name: s.kind for s in sites}
  return {name: (a, max(b, a + 1)) for name, (carries, (a, b)) in found.items()
          if carries and kinds[name] == "bug"}, False


def site_blame(rollouts: Sequence[Any], group_size: int, weights: Mapping[str, float]
               ) -> dict[SiteKey, dict[str, int]]:
  """Per bug site of the batch's requests: how many failed responses (negative
  advantage) carry its bug (`carried_bugs`) and how many of those the evaluator's blame
  covers (`wbar > 1` on a token of the bug's span, weights `weights`); the same two
  counts over the responses that are exact combinations of the sites alone (`_exact`,
  the only ones counted before the window locator)."""
  copies = [dataclasses.replace(r) for r in rollouts]
  rollouts_lib.assign_weights(copies, weights=weights, blame="evaluator")
  advantages = rollouts_lib.group_advantages(copies, group_size)
  out: dict[SiteKey, dict[str, int]] = {}
  for r, advantage in zip(copies, advantages):
    for site in sites_lib.sites_of(r.task):
      if site.kind == "bug":
        out.setdefault((r.task.id, site.name), dict.fromkeys(
            ("failed_with_bug", "failed_blamed", "failed_with_bug_exact",
             "failed_blamed_exact"), 0))
    if advantage >= 0:
      continue
    bugs, exact = carried_bugs(r.task, r.text)
    for name, (start, end) in bugs.items():
      on = (r.offsets[:, 0] < end) & (start < r.offsets[:, 1])
      blamed = int(np.any(r.wbar[on] > 1.0))
      counts = out[(r.task.id, name)]
      counts["failed_with_bug"] += 1
      counts["failed_blamed"] += blamed
      if exact:
        counts["failed_with_bug_exact"] += 1
        counts["failed_blamed_exact"] += blamed
  return out


def relabel(config: Any, out: str, batches_dir: str, checkpoint: str) -> list[dict]:
  """Rewrites `out`'s pairs with `site_blame`'s counts (the window locator) from its
  saved batches, the margins untouched; the old file is kept as
  `pairs.before_relabel.jsonl`. The exact locator's counts must equal the old ones
  (the same batches, the same blame), else ValueError. Returns the new lines."""
  path = os.path.join(out, "pairs.jsonl")
  lines = onestep_lines.read_lines(path)
  steps = sorted(lines)
  batches = credit_mechanism.load_batches(batches_dir, steps, checkpoint)
  job = sections.job_config(config)
  for step, rollouts in zip(steps, batches):
    blame = site_blame(rollouts, job.rl.group_size, job.credit.weights())
    for pair in lines[step]["pairs"]:
      counts = blame[(pair["task_id"], pair["site"])]
      old = (pair.get("failed_with_bug_exact", pair["failed_with_bug"]),
             pair.get("failed_blamed_exact", pair["failed_blamed"]))
      if old != (counts["failed_with_bug_exact"], counts["failed_blamed_exact"]):
        raise ValueError(f"{path}: step {step}, site {pair['task_id']}/{pair['site']}: "
                         f"the saved batch gives exact counts {counts}, the line {old}")
      pair.update(counts, blamed=counts["failed_blamed"] > 0)
  os.replace(path, os.path.join(out, "pairs.before_relabel.jsonl"))
  with open(path, "w", encoding="utf-8") as f:
    for step in steps:
      f.write(json.dumps(lines[step]) + "\n")
  meta = onestep_lines.read_meta(out)
  meta.setdefault("layout", {})["locator"] = LOCATOR
  with open(os.path.join(out, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1)
  return [lines[s] for s in steps]


def unique_tasks(rollouts: Iterable[Any]) -> list[Any]:
  """The rollouts' tasks, each once, in order."""
  seen: dict[str, Any] = {}
  for r in rollouts:
    seen.setdefault(r.task.id, r.task)
  return list(seen.values())


def batch_properties(rollouts: Sequence[Any], group_size: int,
                     weights: Mapping[str, float]) -> dict[str, float]:
  """Additive counts of a graded batch's shape (`property_shares` makes the shares):
  response lengths; in failed responses (negative advantage) the tokens the evaluator
  blames (`wbar > 1`, weights `weights`) and, in those that carry a located bug, the
  tokens on a bug site; and the overlap between a group's failed and positive-advantage
  responses: per (failed response, bug it carries) the share of the group's located
  positive responses (combinations of the task's sites; `located`: the share of all
  responses that are) that hold that bug's fix (`fix`), and that hold it at the same
  place (every site before it as in the failed response, so the text up to it is the
  same: `fix_same_place`); per (failed, positive) pair the share of the failed
  response's tokens that the positive one matches (`difflib` matching blocks:
  `token_overlap`). `positive_clean`: the share of positive responses that are located
  and carry no bug; `groups_without_clean`: of the groups with a positive response, the
  share without a located bug-free response."""
  copies = [dataclasses.replace(r) for r in rollouts]
  rollouts_lib.assign_weights(copies, weights=weights, blame="evaluator")
  advantages = rollouts_lib.group_advantages(copies, group_size)
  c: collections.Counter = collections.Counter()
  choices = []
  for r in copies:
    sites = sites_lib.sites_of(r.task)
    choices.append(sites_lib.decompose(sites_lib.reference_answer(r.task), sites, r.text)
                   if sites else None)
  for start in range(0, len(copies), group_size):
    group = range(start, min(start + group_size, len(copies)))
    positive = [i for i in group if advantages[i] > 0]
    clean = {i for i in group if choices[i] is not None and not any(
        choices[i][s.name] for s in sites_lib.sites_of(copies[i].task) if s.kind == "bug")}
    c["positive"] += len(positive)
    c["positive_clean"] += len(clean & set(positive))
    if positive:
      c["groups_with_signal"] += 1
      c["groups_without_clean"] += not clean
    for i in group:
      r, n = copies[i], len(copies[i].tokens)
      c["responses"] += 1
      c["tokens"] += n
      c["located"] += choices[i] is not None
      if advantages[i] >= 0:
        continue
      c["failed"] += 1
      c["failed_tokens"] += n
      c["failed_blamed_tokens"] += int(np.sum(r.wbar > 1.0))
      for p in positive:
        matched = difflib.SequenceMatcher(None, r.tokens, copies[p].tokens, autojunk=False)
        c["overlap_pairs"] += 1
        c["token_overlap"] += sum(b.size for b in matched.get_matching_blocks()) / max(n, 1)
      if choices[i] is None:
        continue
      sites = sites_lib.sites_of(r.task)
      on = np.zeros(n, bool)
      for issue in blame_lib.oracle_issues(r.task, r.text) or []:
        (s, e), = issue["direct"]
        on |= (r.offsets[:, 0] < e) & (s < r.offsets[:, 1])
      if on.any():
        c["failed_with_bug"] += 1
        c["failed_with_bug_tokens"] += n
        c["bug_tokens"] += int(on.sum())
      located = [p for p in positive if choices[p] is not None]
      for k, site in enumerate(sites):
        if site.kind != "bug" or not choices[i][site.name] or not located:
          continue
        holds = [p for p in located if not choices[p][site.name]]
        same = [p for p in holds if all(choices[p][x.name] == choices[i][x.name]
                                        for x in sites[:k])]
        c["fix_pairs"] += 1
        c["fix"] += len(holds) / len(located)
        c["fix_same_place"] += len(same) / len(located)
  return dict(c)


# ---- measurement ---------------------------------------------------------------------

def measure_batch(trainer: Any, state: Any, rollouts: Sequence[Any], step: int,
                  arms: Sequence[OneStepArm], updates: Updates) -> dict[str, Any]:
  """One batch's line of `pairs.jsonl`: its (site) pairs with the margin before and
  after each arm's update, and each update's gradient norm and clipping. Before and
  after are scored in the same batches of sequences, so that an update that changes
  nothing changes no margin by a rounding."""
  t0 = time.time()
  tasks = unique_tasks(rollouts)
  before = bug_margins(trainer, state, tasks)
  after, metrics = {}, {}
  for arm in arms:
    new, m = updates(arm, state, credit_mechanism.arm_batch(trainer, rollouts, arm.credit))
    after[arm.name] = bug_margins(trainer, new, tasks)
    metrics[arm.name] = {"grad_norm": m["grad_norm"], "clipped": m["clipped"],
                         "learning_rate": m["learning_rate"]}
  blame = site_blame(rollouts, trainer.config.rl.group_size, trainer.credit_weights)
  properties = batch_properties(rollouts, trainer.config.rl.group_size,
                                trainer.credit_weights)
  pairs = []
  for key, counts in blame.items():
    if key not in before:
      continue
    pairs.append({"step": step, "task_id": key[0], "site": key[1],
                  "blamed": counts["failed_blamed"] > 0, **counts,
                  "before": before[key],
                  "after": {name: a[key] for name, a in after.items()}})
  return {"step": step, "pairs": pairs, "updates": metrics, "properties": properties,
          "measure_s": time.time() - t0}


def measure(trainer: Any, state: Any, batches: Sequence[Sequence[Any]],
            steps: Sequence[int], arms: Sequence[OneStepArm],
            done: Optional[Mapping[int, dict]] = None,
            on_batch: Any = None, updates: Optional[Updates] = None) -> list[dict[str, Any]]:
  """`measure_batch` of every batch not in `done` (step -> its line), in step order;
  `on_batch(line)` after each (appending it to `pairs.jsonl`). Returns every line.
  `updates`: compiled updates to reuse (one per call otherwise)."""
  check_one_update(trainer)
  done = dict(done or {})
  updates = updates or Updates(trainer)
  todo = [(s, b) for s, b in zip(steps, batches) if s not in done]
  for step, rollouts in todo:
    done[step] = measure_batch(trainer, state, rollouts, step, arms, updates)
    if on_batch is not None:
      on_batch(done[step])
  return [done[s] for s in steps]


def auc_steps_mean(config: Any) -> float:
  """The mean RL step of a run's dev evaluations (post-SFT as step 0, then every
  `eval.every_rl_steps` to `rl.num_steps`): what a constant per-step change is
  multiplied by in an AUC."""
  every = max(int(config.eval.every_rl_steps), 1)
  return float(np.mean(np.arange(0, config.rl.num_steps + 1, every)))

# ---- graded batches ------------------------------------------------------------------

def graded_batches(trainer: Any, state: Any, steps: Sequence[int], directory: str,
                   checkpoint: str) -> list[list]:
  """The graded batches of `steps`: those saved in `directory` read back, the others
  sampled and graded (`credit_mechanism.sample_batches`) and added to it."""
  meta = os.path.join(directory, "meta.json")
  saved = set()
  if os.path.exists(meta):
    with open(meta, encoding="utf-8") as f:
      saved = set(json.load(f)["steps"])
  have = [s for s in steps if s in saved]
  by_step = (dict(zip(have, credit_mechanism.load_batches(directory, have, checkpoint)))
             if have else {})
  missing = [s for s in steps if s not in saved]
  if missing:
    new = credit_mechanism.sample_batches(trainer, state, missing)
    credit_mechanism.save_batches(directory, missing, new, checkpoint)
    by_step.update(zip(missing, new))
  return [by_step[s] for s in steps]


# ---- command -------------------------------------------------------------------------

def run_chunks(config: Any, workdir: str, checkpoint: str, steps: Sequence[int],
               arms: Sequence[OneStepArm], out: str, batches_dir: str, chunk: int
               ) -> tuple[list[dict], float]:
  """Samples, grades, saves and measures `steps` `chunk` batches at a time, each line
  appended to `out/pairs.jsonl` as it is measured (a stopped run loses one chunk's
  sampling at most; a rerun measures only the missing steps). Returns the lines of
  `steps` and the seconds spent sampling and grading."""
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  path = os.path.join(out, "pairs.jsonl")
  done = onestep_lines.read_lines(path)

  def append(line: Mapping[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
      f.write(json.dumps(line) + "\n")

  sampling_s = 0.0
  with trainer_lib.Trainer(config, workdir or tempfile.mkdtemp(prefix="onestep_")) as trainer:
    state = credit_mechanism.restore(trainer, checkpoint)
    updates = Updates(trainer)
    todo = [s for s in steps if s not in done]
    for at in range(0, len(todo), chunk):
      part = todo[at:at + chunk]
      t = time.time()
      batches = graded_batches(trainer, state, part, batches_dir, checkpoint)
      sampling_s += time.time() - t
      for line in measure(trainer, state, batches, part, arms, on_batch=append,
                          updates=updates):
        done[line["step"]] = line
  return [done[s] for s in steps], sampling_s


def define_flags() -> None:
  config_flags.DEFINE_config_file("config", None, "Experiment config file.")
  flags.DEFINE_string("setting", "", "A sweep config's setting (its overrides applied).")
  flags.DEFINE_string("checkpoint", None, "SFT checkpoint directory (RUN/checkpoints/sft).")
  flags.DEFINE_integer("batches", 20, "RL batches (steps) to measure.")
  flags.DEFINE_integer("first_step", 0, "The first RL step's prompts and seed.")
  flags.DEFINE_string("arms", ARMS, "Arms (names in config.arms); 'setting': the "
                      "config's ablation.arms (a setting's, with --setting).")
  flags.DEFINE_string("out", None, "Output directory (pairs.jsonl, summary.json).")
  flags.DEFINE_string("batches_dir", "", "Graded batches (default OUT/batches).")
  flags.DEFINE_string("workdir", "", "Scratch directory (default: a temporary one).")
  flags.DEFINE_integer("bootstrap", 2000, "Bootstrap resamples.")
  flags.DEFINE_integer("chunk", 10, "Batches sampled (and saved) before they are measured.")
  flags.DEFINE_bool("relabel", False, "Rewrite OUT's pairs with the current locator "
                    "(`relabel`: the saved batches' blame, margins untouched) and "
                    "summarize; nothing is measured.")
  flags.DEFINE_list("merge", [], "Other outputs of this checkpoint (other arms) joined "
                    "to this one's on the batches measured in all (`merge_lines`).")
  flags.DEFINE_list("join", [], "Other outputs of this checkpoint (other batches) whose "
                    "lines join this one's in the statistics, on the arms all measure "
                    "(`join_lines`): directories, or a committed result's summary.json "
                    "(its meta beside it; `joined_output`).")
  flags.mark_flags_as_required(["config", "checkpoint", "out"])


def main(argv: Sequence[str]) -> None:
  del argv
  f = flags.FLAGS
  config = sweep.setting_config(f.config, f.setting) if f.setting else f.config
  checkpoint = os.path.abspath(f.checkpoint)
  if not sections.value(config, "data.controlled.path"):
    config.data.controlled.path = credit_mechanism.find_tasks(checkpoint)
  arm_list = config.ablation.arms if f.arms == "setting" else f.arms
  names = [n.strip() for n in arm_list.split(",") if n.strip()]
  unknown = [n for n in names if n not in config.arms]
  if unknown:
    raise app.UsageError(f"--arms: unknown {unknown} (config.arms: {list(config.arms)})")
  arms = arms_of(config, names)
  batches_dir = f.batches_dir or os.path.join(f.out, "batches")
  steps = list(range(f.first_step, f.first_step + f.batches))
  t0 = time.time()
  if f.relabel:
    relabelled = {line["step"]: line for line in relabel(config, f.out, batches_dir,
                                                          checkpoint)}
    names = onestep_lines.read_meta(f.out)["arms"]
    lines = [relabelled[s] for s in steps if s in relabelled]
    sampling_s = 0.0
  else:
    rl = config.rl
    onestep_lines.claim_out(f.out, {
        "checkpoint": checkpoint, "setting": f.setting, "arms": names,
        "optimizers": {a.name: dataclasses.asdict(a.optimizer) for a in arms},
        "layout": {"shared_prefix": bool(rl.shared_prefix),
                   "length_bucket": int(rl.length_bucket),
                   "scored_sites": "bug", "before": "per batch", "locator": LOCATOR}})
    lines, sampling_s = run_chunks(config, f.workdir, checkpoint, steps, arms, f.out,
                                   batches_dir, f.chunk)
  if f.merge:
    metas = [onestep_lines.read_meta(d) for d in f.merge]
    if any(m["checkpoint"] != checkpoint for m in metas):
      raise app.UsageError(f"--merge: {f.merge} do not all measure {checkpoint}")
    names += [a for m in metas for a in m["arms"] if a not in names]
    joined = onestep_lines.merge_lines(
        {line["step"]: line for line in lines},
        [onestep_lines.read_lines(os.path.join(d, "pairs.jsonl")) for d in f.merge])
    lines = [joined[s] for s in steps if s in joined]
  if f.join:
    metas, others = zip(*[onestep_lines.joined_output(d) for d in f.join])
    mine = onestep_lines.read_meta(f.out)
    if any((m["checkpoint"], m.get("layout")) != (checkpoint, mine.get("layout"))
           for m in metas):
      raise app.UsageError(f"--join: {f.join} do not all measure {checkpoint} with "
                           f"this output's layout {mine.get('layout')}")
    names = [a for a in names if all(a in m["arms"] for m in metas)]
    lines = list(onestep_lines.join_lines({line["step"]: line for line in lines},
                                          others).values())
  summary = onestep_stats.summarize(
      lines, names, reps=f.bootstrap, seed=0, auc_steps=auc_steps_mean(config),
      setting=f.setting,
      info={"checkpoint": checkpoint, "tasks": config.data.controlled.path,
            "invocation_wall_s": {"batches": sampling_s, "total": time.time() - t0}})
  with open(os.path.join(f.out, "summary.json"), "w", encoding="utf-8") as out:
    json.dump(summary, out, indent=1)
  print(onestep_stats.table(summary))


if __name__ == "__main__":
  host_allocator.preload_tcmalloc()
  define_flags()
  app.run(main)
