"""The training job: `python -m rcca_jax.main --config=experiments/NAME.py --workdir=DIR`.

`--mode=train` (default) runs SFT then RL, resuming from DIR's latest checkpoint;
`--mode=eval` evaluates the latest checkpoint on `--tasks` (default: the config's
eval split) and writes responses, evaluations, a report and a summary under DIR/eval/.
Config fields can be overridden on the command line, e.g. `--config.rl.num_steps=3`.
"""

import os

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Output directory (resumed when it exists).")
_MODE = flags.DEFINE_enum("mode", "train", ["train", "eval"], "Train, or evaluate a checkpoint.")
_TASKS = flags.DEFINE_string("tasks", None, "--mode=eval: task file (default: config.eval.tasks).")
flags.mark_flags_as_required(["config", "workdir"])

# Set by multi-host launchers (jax.distributed.initialize reads them itself).
_MULTI_HOST_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS", "MEGASCALE_COORDINATOR_ADDRESS")


def _multi_host() -> bool:
  if any(os.environ.get(name) for name in _MULTI_HOST_ENV):
    return True
  hosts = os.environ.get("TPU_WORKER_HOSTNAMES", "")
  return "," in hosts or int(os.environ.get("SLURM_NTASKS", "1")) > 1


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax and XLA info logs are noise here
  import jax  # pylint: disable=import-outside-toplevel
  if _multi_host():
    jax.distributed.initialize()
  from rcca_jax.train import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  logging.info("JAX process %d/%d, %d devices", jax.process_index(), jax.process_count(),
               jax.device_count())
  trainer = trainer_lib.Trainer(_CONFIG.value, _WORKDIR.value)
  if _MODE.value == "train":
    trainer.train()
  else:
    trainer.evaluate_checkpoint(_TASKS.value)


if __name__ == "__main__":
  app.run(main)
