"""The training job: `python -m rcca_jax.main --config=experiments/NAME.py --workdir=DIR`.

`--mode=train` (default) runs SFT then RL, resuming from DIR's latest checkpoint;
`--mode=eval` evaluates the latest checkpoint (or `--checkpoint=sft|rl|best|base`, or
`sft:STEP` / `rl:STEP` for a kept one; best:
the best dev reward's, base: the untrained, `init_from_hf` or `init_from_gguf` weights) on
`--tasks` (default: the config's eval split) and writes responses, evaluations, a report
and a summary (per family, category and difficulty) under DIR/eval/;
`--mode=plan` compiles the config's steps for its mesh on fake CPU devices and prints
the per-device memory, the last line one JSON object (`rcca_jax.train.plan`).
Config fields can be overridden on the command line, e.g. `--config.rl.num_steps=3`.
Several processes (hosts) run one job with `--coordinator_address=HOST:PORT
--num_processes=N --process_id=I` on each (`rcca_jax.parallel.multihost`; absent,
JAX detects TPU/GPU/Slurm clusters itself).
A run that stops safely prints one line and exits with status 75 when preempted
(SIGTERM: the step in flight is finished and checkpointed; rerun to resume) or 3 when
it cannot go on (`train.faults`: non-finite updates in a row, unscorable steps, no SFT
checkpoint that restores).
The config is checked before any work: an invalid one exits with status 2 and one
message naming every bad field, and so does a work directory in use by a live job
(`DIR/.lock`), or a resume whose config differs from `DIR/job_config.json` outside
`--allow_config_change`; so does an override of a field the config does not have
(one line with the closest known name).
"""

import json
import math
import os
import re
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from rcca_jax.base import host_allocator
from rcca_jax.base import mapping

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Output directory (resumed when it exists).")
_MODE = flags.DEFINE_enum("mode", "train", ["train", "eval", "plan"],
                          "Train, evaluate a checkpoint, or plan memory without devices.")
_TASKS = flags.DEFINE_string("tasks", None, "--mode=eval: task file (default: config.eval.tasks).")
_CHECKPOINT = flags.DEFINE_string(
    "checkpoint", "latest",
    "--mode=eval: what to evaluate: latest, sft, rl, best, base, or sft:STEP / rl:STEP "
    "(a kept checkpoint of that stage); best = the RL state of the best dev reward "
    "(checkpoint.keep_best); base = no checkpoint (initial, init_from_hf or "
    "init_from_gguf weights).")
flags.register_validator(
    "checkpoint",
    lambda v: re.fullmatch(r"latest|sft|rl|best|base|(sft|rl):\d+", v) is not None,
    "--checkpoint must be latest, sft, rl, best, base, sft:STEP or rl:STEP")
_PLAN_DEVICES = flags.DEFINE_integer(
    "plan_devices", 0, "--mode=plan: fake devices (default: the product of config.mesh).")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "Multi-process: HOST:PORT of process 0's coordinator "
    "(absent: JAX's automatic detection on TPU/GPU clusters, else one process).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Multi-process: processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "Multi-process: this one's index.")
_ALLOW_CHANGE = flags.DEFINE_list(
    "allow_config_change", [], "--mode=train: config fields (dotted names, wildcards) "
    "that may differ from the config the work directory was started with "
    "(DIR/job_config.json; larger sft/rl num_steps are always allowed).")
flags.mark_flags_as_required(["config"])


def _fake_devices(config) -> None:
  """--mode=plan: fake CPU devices, set before JAX starts its backends (a config file
  may import JAX; nothing may use a device before this)."""
  devices = _PLAN_DEVICES.value or math.prod(
      int(s) for s in dict(config.mesh).values() if int(s) > 0)
  os.environ["XLA_FLAGS"] = " ".join((
      os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={devices}",
      "--xla_cpu_enable_concurrency_optimized_scheduler=false"))  # see train/plan.py
  os.environ["JAX_PLATFORMS"] = "cpu"
  if "jax" in sys.modules:  # imported (by the config file), read its settings already
    import jax  # pylint: disable=import-outside-toplevel
    from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
    if xla_bridge.backends_are_initialized():
      raise RuntimeError("--mode=plan must configure JAX's devices before they start")
    jax.config.update("jax_platforms", "cpu")


def _run(config) -> None:
  if _MODE.value == "plan":
    from rcca_jax.train import plan as plan_lib  # pylint: disable=import-outside-toplevel
    print(json.dumps(plan_lib.plan(config)))
    return
  if not _WORKDIR.value:
    raise app.UsageError(f"--workdir is required with --mode={_MODE.value}")
  import jax  # pylint: disable=import-outside-toplevel
  from rcca_jax.parallel import multihost  # pylint: disable=import-outside-toplevel
  multihost.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  logging.info("JAX process %d/%d, %d devices", jax.process_index(), jax.process_count(),
               jax.device_count())
  trainer = trainer_lib.Trainer(config, _WORKDIR.value, mode=_MODE.value,  # checks config
                                allow_changes=_ALLOW_CHANGE.value)
  if _MODE.value == "train":
    trainer.train()
  else:
    trainer.evaluate_checkpoint(_TASKS.value, checkpoint=_CHECKPOINT.value)


def _config_path(argv: list[str]) -> str | None:
  for i, arg in enumerate(argv):
    if arg.startswith(("--config=", "-config=")):
      return arg.split("=", 1)[1]
    if arg in ("--config", "-config") and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing; an override of an unknown config field (ml_collections raises
  KeyError or AttributeError with a traceback) prints one line and exits 2."""
  try:
    return app.parse_flags_with_usage(argv)
  except (KeyError, AttributeError) as e:
    found, path = None, _config_path(argv)
    if path:  # the file alone, without the overrides that failed
      values = flags.FLAGS["config"].parser.parse(path).to_dict()
      for arg in argv[1:]:
        if arg.startswith("--config."):
          found = mapping.unknown_path(values, arg[len("--config."):].split("=", 1)[0])
          if found:
            break
    print(f"invalid config override: {found or e}", file=sys.stderr)
    sys.exit(2)


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax and XLA info logs are noise here
  if _MODE.value == "plan":
    _fake_devices(_CONFIG.value)
  from rcca_jax.train.config_check import ConfigError  # pylint: disable=import-outside-toplevel
  from rcca_jax.train.faults import RunStopped  # pylint: disable=import-outside-toplevel
  from rcca_jax.train.run_log import MetricsFileError  # pylint: disable=import-outside-toplevel
  from rcca_jax.train.workdir_guard import ConfigChanged, WorkdirLocked  # pylint: disable=import-outside-toplevel
  try:
    _run(_CONFIG.value)
  except (ConfigError, ConfigChanged, WorkdirLocked, MetricsFileError) as e:
    print(str(e), file=sys.stderr)  # before any work, nothing changed
    sys.exit(2)
  except RunStopped as e:  # preempted (75) or stopped safely (3): one line, work kept
    print(str(e), file=sys.stderr)
    sys.exit(e.exit_code)


if __name__ == "__main__":
  host_allocator.preload_tcmalloc()
  app.run(main, flags_parser=_parse_flags)
