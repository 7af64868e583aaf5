"""The GRPO-vs-RCCA ablation over seeds (docs/ablation.md).

    python -m rcca_jax.study --config=experiments/ablation_small.py --workdir=DIR \
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
from its checkpoint. `--only_seeds=2,3` trains just those seeds, so processes (or
machines sharing DIR) can split the seeds, and `--only_arms=grpo,rcca` just those arms,
in that order (for example one arm's seeds before the other arms); a run without them
then skips what they finished and writes the summary. Exit status as `rcca_jax.main`'s, with one line on
stderr saying why: 75 preempted (SIGTERM: the run in flight checkpointed its step;
rerun to resume), 3 a run stopped safely, 2 an invalid config. Outputs:
`DIR/summary.json`, `DIR/ablation.png` and `DIR/ablation.md` (see
`study.ablation_report`). `python -m rcca_jax.ablation`, the command's old name, is an
alias kept for one release.
"""

from __future__ import annotations

import os
import sys

from absl import app
from absl import flags
from absl import logging
import ml_collections
from ml_collections import config_flags

from rcca_jax.base import host_allocator
from rcca_jax.study import ablation
from rcca_jax.study import sweep


def define_flags() -> None:
  """The command's flags (defined only when run as a program, so that importing this
  module never clashes with another program's `--config`)."""
  config_flags.DEFINE_config_file("config", None, "Ablation config file.")
  flags.DEFINE_string("workdir", None, "Output directory (resumed when it exists).")
  flags.DEFINE_integer("seeds", 3, "Number of seeds (0 .. N-1 added to config.seed).")
  flags.DEFINE_bool("report_only", False, "Only rebuild summary, plot and table from DIR.")
  flags.DEFINE_list("only_seeds", [], "Train only these of the seeds (another process "
                    "can train the rest in the same DIR); no summary: rerun without "
                    "the flag for it.")
  flags.DEFINE_list("only_arms", [], "Train only these of the arms, in this order (a "
                    "share of the work, or one arm's seeds first); no summary.")
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
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  f = flags.FLAGS
  config, workdir, seeds = f.config, f.workdir, f.seeds
  if not f.report_only:
    use_compile_cache(workdir)
  from rcca_jax.train.faults import RunStopped  # pylint: disable=import-outside-toplevel
  try:
    if sweep.is_sweep(config):
      _main_sweep(config, workdir, seeds, f.report_only)
    else:
      _main_ablation(config, workdir, seeds, f.report_only,
                     [int(s) for s in f.only_seeds], list(f.only_arms))
  except RunStopped as e:  # preempted (75) or stopped safely (3): one line, work kept
    print(str(e), file=sys.stderr)
    sys.exit(e.exit_code)


def _main_ablation(config: ml_collections.ConfigDict, workdir: str, seeds: int,
                   report_only: bool, only_seeds: list[int], only_arms: list[str]
                   ) -> None:
  """`main` for one ablation: trains what is missing (or only reports), prints the table."""
  from rcca_jax.study import ablation_report  # pylint: disable=import-outside-toplevel
  if report_only:
    summary = ablation_report.collect(workdir, ablation.arm_names(config), seeds, config)
    summary["wall_s"] = ablation.load_walls(workdir)
    ablation_report.write_all(workdir, summary)
  else:
    from rcca_jax.train.config_check import ConfigError  # pylint: disable=import-outside-toplevel
    try:
      summary = ablation.run(config, workdir, seeds, only_seeds=only_seeds,
                             only_arms=only_arms)
    except (ConfigError, ValueError) as e:  # every problem listed, no traceback
      print(str(e), file=sys.stderr)
      sys.exit(2)
    if not summary:
      print(f"trained seeds {', '.join(map(str, only_seeds or range(seeds)))} of arms "
            f"{', '.join(only_arms or ablation.arm_names(config))}; rerun without "
            "--only_seeds and --only_arms for the summary")
      return
  print(ablation_report.markdown(summary))


def _main_sweep(config: ml_collections.ConfigDict, workdir: str, seeds: int,
                report_only: bool) -> None:
  """`main` for a sweep config (`study.sweep`): every setting, one after the other."""
  from rcca_jax.study import ablation_report  # pylint: disable=import-outside-toplevel
  from rcca_jax.study import sweep_report  # pylint: disable=import-outside-toplevel
  from rcca_jax.train.config_check import ConfigError  # pylint: disable=import-outside-toplevel
  try:
    if report_only:
      summaries = {}
      for name in sweep.setting_names(config):
        c, d = sweep.setting_config(config, name), os.path.join(workdir, name)
        if not os.path.isdir(d):
          print(f"setting {name}: not started ({d} does not exist)", file=sys.stderr)
          continue
        summaries[name] = ablation_report.collect(d, ablation.arm_names(c), seeds, c)
        summaries[name]["wall_s"] = ablation.load_walls(d)
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
  host_allocator.preload_tcmalloc()
  define_flags()
  app.run(main)
