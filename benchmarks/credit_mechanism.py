"""How much an arm's update differs from GRPO's on the same RL batches, and why.

  python benchmarks/credit_mechanism.py --config=experiments/ablation_small.py \
      --checkpoint=DIR/seed_0/sft/checkpoints/sft --batches=3 --out=mech.json \
      [--arms=rcca,rcca_focus,rcca_placebo] [--adam-steps=3] [--first-step=0] \
      [--save-batches=B | --batches-from=B] [--config.FIELD=VALUE ...]

Batches: RL steps `first_step .. first_step + N - 1` sampled as the trainer samples
them (`Trainer.sample_rl`: the same prompts and sampling seeds,
from the checkpoint's PRNG key), all with the checkpoint's parameters (so step 0 is
exactly the trainer's first batch; later steps are the trainer's prompts and seeds
without the updates in between), graded once by the evaluator (`rollouts.evaluate`).
`--save-batches` pickles the graded rollouts, `--batches-from` reads them back (the
checkpoint must be the same), so every arm and rerun sees the same responses.
An SFT checkpoint starts RL as the trainer does (`Trainer.rl_state_from`). The
controlled task file is `data.controlled.path`, else the first `controlled_tasks.jsonl`
found in the checkpoint's run directory or the two above it (an ablation's DIR).

Per batch and arm (its overrides from the config's `arms`, GRPO = the `grpo` arm), the
arm's weights are assigned from the graded records with its own `credit` section
(`rollouts.assign_weights`), its batch built by `rollouts.rl_batch` and its gradient
taken with the project's loss (`train_step.make_gradient_fn` of `PolicyObjective`) at
the checkpoint's parameters; reported against GRPO's (cosine, norm ratio arm / GRPO):
  grad:         the gradient;
  clipped_grad: after global-norm clipping at `rl.optimizer.max_grad_norm`;
  adam_fresh:   the first AdamW update (fresh moments) of `rl.optimizer` (name adamw);
  sgd:          the first SGD update (`rl.optimizer`, name sgd, `--sgd-lr`);
  clip_fired:   whether clipping scaled the arm's gradient.
`adam_after_k`: the update AdamW makes at its k-th step (`--adam-steps`) when its
moments have accumulated the arm's gradients of batches 1..k, all taken at the
checkpoint's parameters (no parameter change between them: the moments' effect alone).
`grpo.sgd_lr_matching_adam` = |first AdamW update| / |clipped gradient|: the SGD
learning rate whose first step is as long as AdamW's.
`split`: GRPO's gradient as the sum of the parts that the tokens of negative- and
positive-advantage responses give, each blamed (evaluator's wbar > 1) or not (the
`weighted` policy loss with a 0/1 token indicator; zero-advantage responses give
nothing): each part's norm, its share of the whole's norm, its cosine with the
whole, its token count and its tokens' mean 1 - p (p: the policy's probability of
the sampled token). `split_residual`: |sum of parts - whole| / |whole|.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import tempfile
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app
from absl import flags
from ml_collections import config_flags

from rcca_jax.rl import checkpoint as checkpoint_lib
from rcca_jax.rl import objective as objective_lib
from rcca_jax.rl import optim
from rcca_jax.rl import train_step
from rcca_jax.study import ablation
from rcca_jax.train import sections
from rcca_jax.train import rollouts as rollouts_lib

PARTS = ("neg_unblamed", "neg_blamed", "pos_unblamed", "pos_blamed")


# ---- pure math ---------------------------------------------------------------------

def flat(tree: Any) -> np.ndarray:
  """All leaves of a pytree as one float64 vector."""
  return np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])


def compare(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
  """Cosine of `a` and `b` and the norm ratio |a| / |b| (0 for a zero vector)."""
  na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
  cos = float(a @ b / (na * nb)) if na and nb else 0.0
  return {"cos": cos, "norm_ratio": na / nb if nb else 0.0}


def part_masks(advantages: np.ndarray, wbar: np.ndarray, loss_mask: np.ndarray
               ) -> dict[str, np.ndarray]:
  """0/1 [B, L] indicators of `PARTS`: response tokens of negative / positive advantage
  responses, blamed (wbar > 1) or not. Zero-advantage rows are in none."""
  adv = np.asarray(advantages)[:, None]
  blamed = np.asarray(wbar) > 1.0
  on = np.asarray(loss_mask) > 0
  out = {}
  for sign, rows in (("neg", adv < 0), ("pos", adv > 0)):
    out[f"{sign}_unblamed"] = (rows & on & ~blamed).astype(np.float32)
    out[f"{sign}_blamed"] = (rows & on & blamed).astype(np.float32)
  return out


def optimizer_update(config: optim.OptimizerConfig, grads: Sequence[Any], params: Any
                     ) -> Any:
  """The update `make_optimizer(config)` makes at step len(grads) after being fed
  `grads` in order, every one at `params` (no parameter change between them)."""
  opt = optim.make_optimizer(config)
  state = opt.init(params)
  update = None
  for g in grads:
    update, state = opt.update(g, state, params)
  return update


# ---- batches -----------------------------------------------------------------------

def find_tasks(checkpoint: str) -> str:
  """controlled_tasks.jsonl in the checkpoint's run directory or the two above it."""
  run = os.path.dirname(os.path.dirname(os.path.abspath(checkpoint)))
  for d in (run, os.path.dirname(run), os.path.dirname(os.path.dirname(run))):
    path = os.path.join(d, "controlled_tasks.jsonl")
    if os.path.exists(path):
      return path
  raise FileNotFoundError(f"no controlled_tasks.jsonl near {checkpoint}; set "
                          "--config.data.controlled.path")


def restore(trainer: Any, checkpoint: str) -> train_step.TrainState:
  """The RL state the trainer would train from this checkpoint (an SFT one: its
  parameters with a fresh RL optimizer)."""
  is_rl = os.path.basename(os.path.normpath(checkpoint)) == "rl"
  ckpt = trainer.checkpoints
  stage = dataclasses.replace(ckpt.rl if is_rl else ckpt.sft,
                              checkpointer=checkpoint_lib.Checkpointer(
                                  checkpoint, async_save=False))
  state, _ = ckpt.restore(stage)
  return state if is_rl else trainer.rl_state_from(state)


def sample_batches(trainer: Any, state: Any, steps: Sequence[int]) -> list[list]:
  """The trainer's RL rollouts of `steps` under `state`, graded (evaluator blame)."""
  out = []
  for step in steps:
    rollouts = trainer.sample_rl(state, step)
    rollouts_lib.evaluate(trainer.programs.grader(), rollouts,
                          weights=trainer.credit_weights)
    out.append(rollouts)
  return out


def save_batches(directory: str, steps: Sequence[int], batches: Sequence[list],
                 checkpoint: str) -> None:
  """Pickles `batches` as steps `steps` of `directory`, added to the steps it holds
  (of the same checkpoint, else ValueError)."""
  os.makedirs(directory, exist_ok=True)
  meta_path = os.path.join(directory, "meta.json")
  held: list[int] = []
  if os.path.exists(meta_path):
    with open(meta_path, encoding="utf-8") as f:
      meta = json.load(f)
    if meta["checkpoint"] != os.path.abspath(checkpoint):
      raise ValueError(f"{directory} holds batches of {meta['checkpoint']}, not "
                       f"{os.path.abspath(checkpoint)}")
    held = meta["steps"]
  for step, rollouts in zip(steps, batches):
    with open(os.path.join(directory, f"batch_{step:06d}.pkl"), "wb") as f:
      pickle.dump(rollouts, f)
  with open(meta_path + ".tmp", "w", encoding="utf-8") as f:
    json.dump({"checkpoint": os.path.abspath(checkpoint),
               "steps": sorted(set(held) | set(steps))}, f)
  os.replace(meta_path + ".tmp", meta_path)


def load_batches(directory: str, steps: Sequence[int], checkpoint: str) -> list[list]:
  with open(os.path.join(directory, "meta.json"), encoding="utf-8") as f:
    meta = json.load(f)
  if meta["checkpoint"] != os.path.abspath(checkpoint):
    raise ValueError(f"{directory} holds batches of {meta['checkpoint']}, not "
                     f"{os.path.abspath(checkpoint)}")
  missing = sorted(set(steps) - set(meta["steps"]))
  if missing:
    raise ValueError(f"{directory} has no batches of steps {missing} (has {meta['steps']})")
  out = []
  for step in steps:
    with open(os.path.join(directory, f"batch_{step:06d}.pkl"), "rb") as f:
      out.append(pickle.load(f))
  return out


# ---- gradients ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Arm:
  """What an arm changes in the update: its loss and its credit section."""
  name: str
  loss: objective_lib.LossConfig
  weights: Mapping[str, float]
  blame: str
  placebo_draw: int = 0


def arm(config: Any, name: str) -> Arm:
  c = ablation.arm_config(config, 0, name)
  job = sections.job_config(c)
  credit, loss = job.credit, job.rl.loss
  if loss.kl_beta:
    raise ValueError(f"arm {name}: rl.loss.kl_beta > 0 is not measured here (no reference)")
  return Arm(name, loss, credit.weights(), credit.blame, credit.placebo_draw)


class Gradients:
  """The project's gradient function per loss config (compiled once each)."""

  def __init__(self, trainer: Any, params: Any, model_state: Any):
    self.trainer, self.params, self.model_state = trainer, params, model_state
    self._fns: dict[objective_lib.LossConfig, Any] = {}

  def __call__(self, loss: objective_lib.LossConfig, batch: Mapping[str, np.ndarray]) -> Any:
    objective = train_step.PolicyObjective(loss, self.trainer.config.rl.group_size)
    if loss not in self._fns:
      self._fns[loss] = jax.jit(train_step.make_gradient_fn(
          self.trainer.programs.fmodel, objective, self.trainer.job.micro_batches,
          logits_chunk=self.trainer.job.logits_chunk,
          temperature=self.trainer.job.rl.temperature))
    _, grads, _, _ = self._fns[loss](self.params, self.model_state,
                                     train_step.numpy_batch(batch, objective.keys))
    return grads


def arm_batch(trainer: Any, rollouts: Sequence[Any], a: Arm) -> dict[str, np.ndarray]:
  """The arm's RL batch: its advantages, weights assigned with its credit section, then
  `rl_batch` in the trainer's layout (`rl.length_bucket`, `rl.shared_prefix`)."""
  mine = [dataclasses.replace(r) for r in rollouts]
  r = trainer.config.rl
  advantages = rollouts_lib.group_advantages(mine, r.group_size,
                                             a.loss.scale_advantages_by_std)
  rollouts_lib.assign_weights(mine, weights=a.weights, blame=a.blame,
                              placebo_draw=a.placebo_draw)
  return rollouts_lib.rl_batch(mine, advantages, pad_id=trainer.programs.pad_id,
                               **rollouts_lib.rl_layout(r))


def split(trainer: Any, grads_fn: Gradients, grpo: Arm, batch: Mapping[str, np.ndarray],
          whole: np.ndarray, logp: np.ndarray) -> tuple[dict[str, dict], float]:
  """GRPO's gradient split into `PARTS` (see the module docstring)."""
  masks = part_masks(batch["advantages"], batch["wbar"], batch["loss_mask"])
  weighted = dataclasses.replace(grpo.loss, policy_loss="weighted")
  out, total = {}, np.zeros_like(whole)
  whole_norm = float(np.linalg.norm(whole))
  for name in PARTS:
    g = flat(grads_fn(weighted, {**batch, "wbar": masks[name]}))
    total += g
    on = masks[name] > 0
    norm = float(np.linalg.norm(g))
    out[name] = {"norm": norm, "norm_share": norm / whole_norm if whole_norm else 0.0,
                 "cos": compare(g, whole)["cos"], "tokens": int(on.sum()),
                 "mean_1mp": float(np.mean(1.0 - np.exp(logp[on]))) if on.any() else None}
  residual = float(np.linalg.norm(total - whole) / whole_norm) if whole_norm else 0.0
  return out, residual


def measure(trainer: Any, state: Any, batches: Sequence[list], steps: Sequence[int],
            arm_names: Sequence[str], adam_steps: int, sgd_lr: float) -> dict[str, Any]:
  """The report (see the module docstring) as a JSON-able dict."""
  config = trainer.config
  arms = {name: arm(config, name) for name in ("grpo", *arm_names)}
  base = sections.optimizer_config(config.rl.optimizer, max(config.rl.num_steps, 1))
  adam = dataclasses.replace(base, name="adamw", momentum=0.0)
  sgd = dataclasses.replace(base, name="sgd", momentum=0.0, learning_rate=sgd_lr)
  grads_fn = Gradients(trainer, state.params, state.model_state)
  logprob_fn = trainer.programs.logprob_fn()
  history: dict[str, list] = {name: [] for name in arms}
  report: dict[str, Any] = {"batches": [], "sgd_lr": sgd_lr,
                            "max_grad_norm": base.max_grad_norm}
  for step, rollouts in zip(steps, batches):
    vectors, entry = {}, {}
    for name, a in arms.items():
      batch = arm_batch(trainer, rollouts, a)
      g = grads_fn(a.loss, batch)
      history[name].append(g)
      norm = float(optax.tree.norm(g))
      fired = bool(optim.clip_fired(jnp.asarray(norm), base)) if base.clips else False
      vectors[name] = {
          "grad": flat(g),
          "adam_fresh": flat(optimizer_update(adam, [g], state.params)),
          "sgd": flat(optimizer_update(sgd, [g], state.params))}
      scale = base.max_grad_norm / norm if fired else 1.0
      vectors[name]["clipped_grad"] = vectors[name]["grad"] * scale
      entry[name] = {"grad_norm": norm, "clip_fired": fired}
      if name == "grpo":
        grpo_batch = batch
    g0 = vectors["grpo"]
    grpo_row = dict(entry["grpo"])
    grpo_row.update(
        adam_update_norm=float(np.linalg.norm(g0["adam_fresh"])),
        sgd_update_norm=float(np.linalg.norm(g0["sgd"])),
        sgd_lr_matching_adam=float(np.linalg.norm(g0["adam_fresh"])
                                   / np.linalg.norm(g0["clipped_grad"])))
    per_arm = {}
    for name in arm_names:
      per_arm[name] = {**entry[name], **{what: compare(vectors[name][what], g0[what])
                                         for what in ("grad", "clipped_grad",
                                                      "adam_fresh", "sgd")}}
    logp = np.asarray(jax.device_get(logprob_fn(state.params, state.model_state,
                                                grpo_batch)))
    parts, residual = split(trainer, grads_fn, arms["grpo"], grpo_batch, g0["grad"], logp)
    rewards = [r.reward for r in rollouts]
    report["batches"].append({
        "step": step, "seed": rollouts[0].seed,
        "tasks": sorted({r.task.id for r in rollouts}),
        "reward_mean": float(np.mean([x for x in rewards if x is not None] or [0.0])),
        "distinct_texts": len({r.text for r in rollouts}), "samples": len(rollouts),
        "negative_responses": int(np.sum(grpo_batch["advantages"] < 0)),
        "blamed_token_share": rollouts_lib.weight_shares(rollouts)["blamed_token_share"],
        "grpo": grpo_row, "arms": per_arm, "split": parts, "split_residual": residual})
  k = adam_steps or len(batches)
  if k > len(batches):
    raise ValueError(f"--adam-steps={k} > the {len(batches)} batches")
  after = {name: flat(optimizer_update(adam, history[name][:k], state.params))
           for name in arms}
  report["adam_after_k"] = {"k": k, **{name: compare(after[name], after["grpo"])
                                       for name in arm_names}}
  return report


def table(report: Mapping[str, Any]) -> str:
  lines = []
  for b in report["batches"]:
    g = b["grpo"]
    lines.append(f"step {b['step']}: {b['distinct_texts']}/{b['samples']} distinct texts, "
                 f"{b['negative_responses']} negative, reward {b['reward_mean']:.3f}, "
                 f"blamed tokens {b['blamed_token_share']:.3f}; grpo |g| "
                 f"{g['grad_norm']:.4f} clip {int(g['clip_fired'])}, |adam| "
                 f"{g['adam_update_norm']:.4g}, sgd lr matching adam "
                 f"{g['sgd_lr_matching_adam']:.4g}")
    width = max([16, *(len(name) + 1 for name in b["arms"])])
    lines.append(f"  {'arm':<{width}}{'grad cos':>9}{'ratio':>7}{'clip cos':>9}{'ratio':>7}"
                 f"{'adam cos':>9}{'ratio':>7}{'sgd cos':>9}{'ratio':>7}{'clip':>5}")
    for name, a in b["arms"].items():
      cells = "".join(f"{a[w]['cos']:>9.3f}{a[w]['norm_ratio']:>7.3f}"
                      for w in ("grad", "clipped_grad", "adam_fresh", "sgd"))
      lines.append(f"  {name:<{width}}{cells}{int(a['clip_fired']):>5}")
    lines.append(f"  grpo split (residual {b['split_residual']:.1e}): part, |g_part|, "
                 "share of |g|, cos with g, tokens, mean 1-p")
    for name, p in b["split"].items():
      mean = "-" if p["mean_1mp"] is None else f"{p['mean_1mp']:.4f}"
      lines.append(f"    {name:<14}{p['norm']:>9.4f}{p['norm_share']:>7.3f}"
                   f"{p['cos']:>7.3f}{p['tokens']:>7d}{mean:>9}")
  k = report["adam_after_k"]
  lines.append(f"AdamW update after k={k['k']} steps (moments over the batches): " +
               ", ".join(f"{n} cos {v['cos']:.3f} ratio {v['norm_ratio']:.3f}"
                         for n, v in k.items() if n != "k"))
  return "\n".join(lines)


def default_sgd_lr(config: Any) -> float:
  if "grpo_sgd" in config.get("arms", {}):
    return float(ablation.arm_config(config, 0, "grpo_sgd").rl.optimizer.learning_rate)
  return float(config.rl.optimizer.learning_rate)


def define_flags() -> None:
  """The script's flags (defined only when run as a program, so that importing it, as
  the tests do, never clashes with another module's `--config`)."""
  config_flags.DEFINE_config_file("config", None, "Experiment config file.")
  flags.DEFINE_string("checkpoint", None,
                      "Checkpoint directory (RUN/checkpoints/sft or .../rl).")
  flags.DEFINE_integer("batches", 3, "RL batches (steps) to measure.")
  flags.DEFINE_integer("first-step", 0, "The first RL step's prompts and seed.")
  flags.DEFINE_string("arms", "rcca,rcca_focus,rcca_placebo",
                      "Arms compared with grpo (names in config.arms).")
  flags.DEFINE_integer("adam-steps", 0, "k of adam_after_k (0: all the batches).")
  flags.DEFINE_float("sgd-lr", 0.0, "SGD learning rate (0: that of the grpo_sgd "
                     "arm, else rl.optimizer.learning_rate).")
  flags.DEFINE_string("save-batches", "", "Directory to pickle the graded batches.")
  flags.DEFINE_string("batches-from", "", "Directory of batches saved before.")
  flags.DEFINE_string("out", "", "JSON output file.")
  flags.DEFINE_string("workdir", "", "Scratch directory (default: a temporary one).")
  flags.mark_flags_as_required(["config", "checkpoint"])


def main(argv: Sequence[str]) -> None:
  del argv
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  f = flags.FLAGS
  config = f.config
  checkpoint = f.checkpoint
  if not checkpoint or not os.path.isdir(checkpoint):
    raise app.UsageError(f"--checkpoint={checkpoint!r} is not a checkpoint directory")
  if (sections.value(config, "data.setting") == "controlled"
      and not sections.value(config, "data.controlled.path")):
    config.data.controlled.path = find_tasks(checkpoint)
  names = [n.strip() for n in f.arms.split(",") if n.strip()]
  unknown = [n for n in names if n not in config.arms]
  if unknown or "grpo" not in config.arms:
    raise app.UsageError(f"--arms: unknown {unknown} or no grpo arm "
                         f"(config.arms: {list(config.arms)})")
  steps = list(range(f["first-step"].value, f["first-step"].value + f.batches))
  workdir = f.workdir or tempfile.mkdtemp(prefix="credit_mechanism_")
  trainer = trainer_lib.Trainer(config, workdir)
  with trainer:
    state = restore(trainer, checkpoint)
    if f["batches-from"].value:
      batches = load_batches(f["batches-from"].value, steps, checkpoint)
    else:
      batches = sample_batches(trainer, state, steps)
    if f["save-batches"].value:
      save_batches(f["save-batches"].value, steps, batches, checkpoint)
    report = measure(trainer, state, batches, steps, names, f["adam-steps"].value,
                     f["sgd-lr"].value or default_sgd_lr(config))
  report.update(checkpoint=os.path.abspath(checkpoint), arms=names,
                tasks=config.data.controlled.get("path", "") if "controlled" in config.data
                else "")
  print(table(report))
  if f.out:
    with open(f.out, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  define_flags()
  app.run(main)
