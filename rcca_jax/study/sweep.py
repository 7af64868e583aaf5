"""A sweep of ablation settings: one resumable command over settings x seeds x arms.

    python -m rcca_jax.study --config=experiments/credit_sweep.py --workdir=DIR \
        --seeds=5

A sweep config is an ablation config with `sweep.settings` (names, comma-separated,
run in that order) and `settings` (name -> "FIELD=VALUE;..." overrides, the syntax of
the arms). Setting S runs as a whole ablation in `DIR/S/` (its own controlled task set,
SFT per seed and arms; see `study.ablation`), so a finished setting's results are
complete and can be committed while the next one runs; re-running the command resumes
where it stopped. Every setting's configs (and each of its arms') are checked before
any work.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import ml_collections

from rcca_jax.study import ablation
from rcca_jax.study.overrides import parse_overrides, set_field


def is_sweep(config: ml_collections.ConfigDict) -> bool:
  return "sweep" in config and bool(config.sweep.get("settings"))


def setting_names(config: ml_collections.ConfigDict) -> list[str]:
  names = [s.strip() for s in config.sweep.settings.split(",") if s.strip()]
  unknown = [s for s in names if s not in config.get("settings", {})]
  if unknown or not names:
    raise ValueError(f"sweep.settings: unknown settings {unknown} (defined: "
                     f"{list(config.get('settings', {}))})")
  return names


def setting_config(config: ml_collections.ConfigDict, name: str
                   ) -> ml_collections.ConfigDict:
  """The ablation config of setting `name`: the sweep config with its overrides."""
  c = copy.deepcopy(config)
  for field, value in parse_overrides(config.settings[name]):
    set_field(c, field, value)
  return c


def check(config: ml_collections.ConfigDict, seeds: int) -> list[str]:
  """Checks every setting (and its arms) before any work; returns the setting names."""
  from rcca_jax.train import config_check  # pylint: disable=import-outside-toplevel
  problems, names = [], []
  try:
    names = setting_names(config)
  except ValueError as e:
    problems.append(str(e))
  for name in names:
    try:
      ablation.check_configs(setting_config(config, name), seeds)
    except config_check.ConfigError as e:
      problems += [f"[{name}] {p}" for p in e.problems]
    except ValueError as e:
      problems.append(f"[{name}] {e}")
  if problems:
    raise config_check.ConfigError(problems)
  return names


def run(config: ml_collections.ConfigDict, workdir: str, seeds: int
        ) -> dict[str, Any]:
  """Runs (or resumes) every setting in order; returns {setting: its summary}."""
  names = check(config, seeds)
  os.makedirs(workdir, exist_ok=True)
  return {name: ablation.run(setting_config(config, name), os.path.join(workdir, name),
                             seeds)
          for name in names}
