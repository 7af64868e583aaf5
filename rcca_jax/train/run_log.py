"""Run outputs: `metrics.jsonl` rows, TensorBoard scalars under `tb/`, a progress bar."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Mapping

import numpy as np

METRICS_FILE = "metrics.jsonl"


def _plain(value: Any) -> Any:
  """JSON-safe scalar: numpy/jax scalars to Python numbers, non-finite floats kept."""
  if hasattr(value, "item") and np.ndim(value) == 0:
    value = value.item()
  if isinstance(value, (np.integer,)):
    return int(value)
  if isinstance(value, (float, np.floating)):
    return float(value)
  return value


def read_rows(workdir: str) -> list[dict[str, Any]]:
  """The rows of `DIR/metrics.jsonl` (none when the file does not exist)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


class MetricsLogger:
  """Appends one JSON row per logged step to `DIR/metrics.jsonl` and mirrors the
  numeric fields to TensorBoard as `STAGE/NAME` scalars.

  On resume, `truncate(stage, step)` drops rows of `stage` logged after `step` (work
  that was not checkpointed and will be done again), so no step appears twice.
  """

  def __init__(self, workdir: str, *, tensorboard: bool = True):
    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, METRICS_FILE)
    self._writer = None
    if tensorboard and _is_main_process():
      from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel
      self._writer = SummaryWriter(os.path.join(workdir, "tb"))

  def rows(self) -> list[dict[str, Any]]:
    return read_rows(os.path.dirname(self.path))

  def truncate(self, stage: str, step: int) -> None:
    """Removes rows of `stage` (and eval rows made during it) after `step`."""
    rows = self.rows()
    keep = [r for r in rows
            if not (r.get("stage") == stage and r.get("step", 0) > step)
            and not (r.get("stage") == "eval" and r.get("after") == stage
                     and r.get("step", 0) > step)]
    if len(keep) != len(rows) and _is_main_process():
      tmp = self.path + ".tmp"
      with open(tmp, "w", encoding="utf-8") as f:
        for row in keep:
          f.write(json.dumps(row) + "\n")
      os.replace(tmp, self.path)

  def write(self, stage: str, step: int, values: Mapping[str, Any]) -> dict[str, Any]:
    row = {"step": int(step), "stage": stage, "time": round(time.time(), 3)}
    row.update({k: _plain(v) for k, v in values.items()})
    if _is_main_process():
      with open(self.path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, allow_nan=True) + "\n")
      if self._writer is not None:
        prefix = stage if stage != "eval" else f"eval_{row.get('after', '')}".rstrip("_")
        for name, value in row.items():
          if name in ("step", "stage") or isinstance(value, bool):
            continue
          if isinstance(value, (int, float)) and math.isfinite(value):
            self._writer.add_scalar(f"{prefix}/{name}", value, int(step))
        self._writer.flush()
    return row

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def _is_main_process() -> bool:
  import jax  # pylint: disable=import-outside-toplevel
  return jax.process_index() == 0


class Progress:
  """A tqdm bar (steps done, ETA, a few metrics) for one stage; silent off process 0."""

  def __init__(self, stage: str, total: int, initial: int):
    self._bar = None
    if _is_main_process():
      from tqdm import tqdm  # pylint: disable=import-outside-toplevel
      self._bar = tqdm(total=total, initial=initial, desc=stage, unit="step",
                       file=sys.stderr, dynamic_ncols=True, mininterval=1.0)

  def update(self, **postfix: Any) -> None:
    if self._bar is None:
      return
    self._bar.set_postfix({k: (f"{v:.4g}" if isinstance(v, float) else v)
                           for k, v in postfix.items()}, refresh=False)
    self._bar.update(1)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()


def note(message: str, *args: Any) -> None:
  """A one-line console message (`message % args`) that does not break the bar."""
  if _is_main_process():
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel
    tqdm.write(message % args if args else message, file=sys.stderr)
