"""The GRPO-vs-RCCA ablation over seeds (docs/ablation.md).

    python -m rcca_jax.ablation --config=experiments/ablation_small.py --workdir=DIR \
        --seeds=3 [--config.FIELD=VALUE ...]

Per seed s, `DIR/seed_s/sft/` trains the SFT stage once (with the post-SFT dev
evaluation); every arm of `config.ablation.arms` then runs its RL stage in
`DIR/seed_s/ARM/`, starting from a copy of that SFT checkpoint. Arms share the prompt
order (from the seed) and the sampling seeds (from the SFT state's PRNG key and the
step): they differ only through `config.arms[ARM]`'s overrides and, from then on, their
own updates. In the controlled setting every run reads one task set,
`DIR/controlled_tasks.jsonl`, built by the first. Every run grades through one on-disk
grading cache, `DIR/grading_cache` (unless `eval.grading_cache` names another), so
the same (task, response) is browser-graded once for all seeds and arms. Every run
compiles the same programs (the SFT and RL steps, the sampler, the log-prob function),
so the command keeps JAX's persistent compilation cache in `DIR/jax_cache` (unless
`JAX_COMPILATION_CACHE_DIR` names one): each is compiled once, later runs load it.

Re-running the command resumes: finished stages are skipped, an interrupted one resumes
from its checkpoint. Outputs: `DIR/summary.json`, `DIR/ablation.png` and
`DIR/ablation.md` (see `rcca_jax.ablation_report`).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import sys
import time
from typing import Any

from absl import app
from absl import flags
from absl import logging
import ml_collections
from ml_collections import config_flags

from rcca_jax.train import sections
from rcca_jax.train.run_log import read_rows


def parse_overrides(text: str) -> list[tuple[str, str]]:
  """`"a.b=1;c=x"` -> [("a.b", "1"), ("c", "x")]."""
  out = []
  for item in filter(None, (part.strip() for part in text.split(";"))):
    if "=" not in item:
      raise ValueError(f"arm override {item!r} is not FIELD=VALUE")
    name, value = item.split("=", 1)
    out.append((name.strip(), value.strip()))
  return out


def set_field(config: ml_collections.ConfigDict, dotted: str, text: str) -> None:
  *parents, leaf = dotted.split(".")
  node = config
  for name in parents:
    if name not in node:
      raise ValueError(f"arm override: no config field {dotted!r}")
    node = node[name]
  if leaf not in node:
    raise ValueError(f"arm override: no config field {dotted!r}")
  old = node[leaf]
  if isinstance(old, bool):
    if text.lower() not in _BOOLS:
      raise ValueError(f"arm override {dotted}={text!r}: expected one of {sorted(_BOOLS)}")
    value: Any = _BOOLS[text.lower()]
  elif isinstance(old, int):
    value = int(text)
  elif isinstance(old, float):
    value = float(text)
  elif old is None:  # an unset field (e.g. max_grad_norm=None): a number, none or text
    value = _untyped(text)
  else:
    value = text
  node[leaf] = value


_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _untyped(text: str) -> Any:
  if text.lower() in ("none", "null"):
    return None
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def arm_names(config: ml_collections.ConfigDict) -> list[str]:
  names = [a.strip() for a in config.ablation.arms.split(",") if a.strip()]
  unknown = [a for a in names if a not in config.arms]
  if unknown or not names:
    raise ValueError(f"ablation.arms: unknown arms {unknown} (defined: {list(config.arms)})")
  return names


def sft_config(config: ml_collections.ConfigDict, seed: int) -> ml_collections.ConfigDict:
  c = copy.deepcopy(config)
  c.seed = config.seed + seed
  c.rl.num_steps = 0
  return c


def arm_config(config: ml_collections.ConfigDict, seed: int, arm: str
               ) -> ml_collections.ConfigDict:
  c = copy.deepcopy(config)
  c.seed = config.seed + seed
  c.eval.after_sft = False  # the SFT run's evaluation is every arm's step 0
  for name, value in parse_overrides(config.arms[arm]):
    set_field(c, name, value)
  return c


def check_configs(config: ml_collections.ConfigDict, seeds: int) -> list[str]:
  """Validates the arms, their overrides, the SFT config and every arm's config before
  any work; returns the arm names (`ConfigError` lists every problem, each prefixed
  with the run it is about)."""
  import jax  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import config_check  # pylint: disable=import-outside-toplevel
  problems, arms = [], []
  try:
    arms = arm_names(config)
  except ValueError as e:
    problems.append(str(e))
  runs = [("sft", lambda: sft_config(config, 0))] + [
      (arm, functools.partial(arm_config, config, 0, arm)) for arm in arms]
  for name, make in runs:
    try:
      problems += [f"[{name}] {p}" for p in config_check.problems(
          make(), num_devices=jax.device_count())]
    except ValueError as e:
      problems.append(f"[{name}] {e}")
  if seeds < 1:
    problems.append(f"--seeds={seeds}: at least one seed")
  if problems:
    raise config_check.ConfigError(problems)
  return arms


def _done(workdir: str, stage: str, step: int) -> bool:
  return any(r.get("stage") == stage and r.get("step") == step
             for r in read_rows(workdir))


def _run(config: ml_collections.ConfigDict, workdir: str) -> float:
  """Trains one run; a policy that diverges (non-finite log-probs or updates, skipped
  `max_nonfinite_in_row` times in a row: train/faults.py) ends its run with
  `ablation_report.DIVERGED` written, so the sweep goes on and a resume does not repeat
  it."""
  from rcca_jax import ablation_report  # pylint: disable=import-outside-toplevel
  from rcca_jax.rl import batching  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import faults  # pylint: disable=import-outside-toplevel
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  t0 = time.time()
  try:
    trainer_lib.Trainer(config, workdir).train()
  except (batching.NonFiniteBatch, faults.NonFiniteStop) as e:
    steps = [int(r["step"]) for r in read_rows(workdir) if r.get("stage") == "rl"]
    with open(os.path.join(workdir, ablation_report.DIVERGED), "w", encoding="utf-8") as f:
      json.dump({"error": str(e), "rl_steps_done": max(steps, default=0)}, f)
    print(f"{workdir}: diverged after RL step {max(steps, default=0)} ({e})", flush=True)
  return time.time() - t0


def run(config: ml_collections.ConfigDict, workdir: str, seeds: int) -> dict[str, Any]:
  """Trains what is missing, then writes and returns the summary."""
  from rcca_jax import ablation_report  # pylint: disable=import-outside-toplevel
  os.makedirs(workdir, exist_ok=True)
  config = copy.deepcopy(config)
  if (sections.value(config, "data.setting") == "controlled"
      and not sections.value(config, "data.controlled.path")):
    config.data.controlled.path = os.path.join(os.path.abspath(workdir),
                                               "controlled_tasks.jsonl")
  if not sections.value(config, "eval.grading_cache"):
    config.eval.grading_cache = os.path.join(os.path.abspath(workdir), "grading_cache")
  arms = check_configs(config, seeds)
  walls = _load_walls(workdir)
  for seed in range(seeds):
    sft_dir = os.path.join(workdir, f"seed_{seed}", "sft")
    if not _done(sft_dir, "sft", config.sft.num_steps) or (
        config.eval.enabled and not _done(sft_dir, "eval", config.sft.num_steps)):
      walls[f"seed_{seed}/sft"] = walls.get(f"seed_{seed}/sft", 0.0) + _run(
          sft_config(config, seed), sft_dir)
      _save_walls(workdir, walls)
    for arm in arms:
      arm_dir = os.path.join(workdir, f"seed_{seed}", arm)
      if _done(arm_dir, "rl", config.rl.num_steps) or os.path.exists(
          os.path.join(arm_dir, ablation_report.DIVERGED)):
        continue
      target = os.path.join(arm_dir, "checkpoints", "sft")
      if not os.path.exists(target):
        shutil.copytree(os.path.join(sft_dir, "checkpoints", "sft"), target)
      key = f"seed_{seed}/{arm}"
      walls[key] = walls.get(key, 0.0) + _run(arm_config(config, seed, arm), arm_dir)
      _save_walls(workdir, walls)
  summary = ablation_report.collect(workdir, arms, seeds, config)
  summary["wall_s"] = walls
  ablation_report.write_all(workdir, summary)
  return summary


def _load_walls(workdir: str) -> dict[str, float]:
  path = os.path.join(workdir, "wall_times.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  return {}


def _save_walls(workdir: str, walls: dict[str, float]) -> None:
  with open(os.path.join(workdir, "wall_times.json"), "w", encoding="utf-8") as f:
    json.dump(walls, f, indent=1)


def define_flags() -> None:
  """The command's flags (defined only when run as a program, so that importing this
  module never clashes with another program's `--config`)."""
  config_flags.DEFINE_config_file("config", None, "Ablation config file.")
  flags.DEFINE_string("workdir", None, "Output directory (resumed when it exists).")
  flags.DEFINE_integer("seeds", 3, "Number of seeds (0 .. N-1 added to config.seed).")
  flags.DEFINE_bool("report_only", False, "Only rebuild summary, plot and table from DIR.")
  flags.mark_flags_as_required(["config", "workdir"])


def use_compile_cache(workdir: str) -> str:
  """JAX's persistent compilation cache in `workdir/jax_cache`, unless the environment
  or the config names one already; the directory in use."""
  import jax  # pylint: disable=import-outside-toplevel
  if not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir",
                      os.path.join(os.path.abspath(workdir), "jax_cache"))
  return jax.config.jax_compilation_cache_dir


def main(argv):
  del argv
  from rcca_jax import ablation_report  # pylint: disable=import-outside-toplevel
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  f = flags.FLAGS
  config, workdir, seeds = f.config, f.workdir, f.seeds
  if not f.report_only:
    use_compile_cache(workdir)
  from rcca_jax import sweep  # pylint: disable=import-outside-toplevel
  if sweep.is_sweep(config):
    _main_sweep(config, workdir, seeds, f.report_only)
    return
  if f.report_only:
    summary = ablation_report.collect(workdir, arm_names(config), seeds, config)
    summary["wall_s"] = _load_walls(workdir)
    ablation_report.write_all(workdir, summary)
  else:
    from rcca_jax.train.config_check import ConfigError  # pylint: disable=import-outside-toplevel
    try:
      summary = run(config, workdir, seeds)
    except ConfigError as e:  # every problem listed, no traceback
      print(str(e), file=sys.stderr)
      sys.exit(2)
  print(ablation_report.markdown(summary))


def _main_sweep(config: ml_collections.ConfigDict, workdir: str, seeds: int,
                report_only: bool) -> None:
  """`main` for a sweep config (`rcca_jax.sweep`): every setting, one after the other."""
  from rcca_jax import ablation_report  # pylint: disable=import-outside-toplevel
  from rcca_jax import sweep  # pylint: disable=import-outside-toplevel
  from rcca_jax import sweep_report  # pylint: disable=import-outside-toplevel
  from rcca_jax.train.config_check import ConfigError  # pylint: disable=import-outside-toplevel
  try:
    if report_only:
      summaries = {}
      for name in sweep.setting_names(config):
        c, d = sweep.setting_config(config, name), os.path.join(workdir, name)
        if not os.path.isdir(d):
          print(f"setting {name}: not started ({d} does not exist)", file=sys.stderr)
          continue
        summaries[name] = ablation_report.collect(d, arm_names(c), seeds, c)
        summaries[name]["wall_s"] = _load_walls(d)
        ablation_report.write_all(d, summaries[name])
    else:
      summaries = sweep.run(config, workdir, seeds)
  except ConfigError as e:  # every problem listed, no traceback
    print(str(e), file=sys.stderr)
    sys.exit(2)
  sweep_report.write_all(workdir, summaries)
  for name, summary in summaries.items():
    print(f"## {name}\n\n{ablation_report.markdown(summary)}")
  print(f"## all settings\n\n{sweep_report.markdown(summaries)}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
