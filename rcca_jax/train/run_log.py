"""Run outputs: `metrics.jsonl` rows, TensorBoard scalars under `tb/`, a progress bar.

A kill or a full disk during a row's append can leave a torn last line: readers drop it
with a note, and `MetricsLogger` repairs the file (rewritten atomically without it)
when it opens it and before any append, so rows are never appended after a line without
its newline. A bad line anywhere else is no crash artifact: `MetricsFileError`.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Mapping

import numpy as np

from rcca_jax.data import jsonl

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


class MetricsFileError(ValueError):
  """A bad line of `metrics.jsonl` that is not its last (not an interrupted append)."""


def _load(path: str) -> tuple[list[dict[str, Any]], str | None]:
  """The rows of a metrics file and the error of its torn last line (None if whole)."""
  if not os.path.exists(path):
    return [], None
  lines = list(jsonl.read_lines(path))
  torn = lines.pop().error if lines and lines[-1].error else None
  for line in lines:
    if line.error:
      raise MetricsFileError(f"{line.error} (only a torn last line is repaired: this "
                             "one is followed by other rows)")
  return [line.obj for line in lines], torn


def read_rows(workdir: str) -> list[dict[str, Any]]:
  """The rows of `DIR/metrics.jsonl` (none when the file does not exist); a torn last
  line is dropped with a note; another bad line raises MetricsFileError (FILE:LINE)."""
  rows, torn = _load(os.path.join(workdir, METRICS_FILE))
  if torn:
    note("%s (a torn last line, left by an interrupted write): dropped", torn)
  return rows


def _ends_with_newline(path: str) -> bool:
  """Whether the file is empty, absent or ends with a newline."""
  try:
    with open(path, "rb") as f:
      if f.seek(0, os.SEEK_END) == 0:
        return True
      f.seek(-1, os.SEEK_END)
      return f.read(1) == b"\n"
  except FileNotFoundError:
    return True


def _rewrite(path: str, rows: list[dict[str, Any]]) -> None:
  with jsonl.atomic_writer(path) as f:
    for row in rows:
      f.write(json.dumps(row, allow_nan=True) + "\n")


class MetricsLogger:
  """Appends one JSON row per logged step to `DIR/metrics.jsonl` and mirrors the
  numeric fields to TensorBoard as `STAGE/NAME` scalars.

  On resume, `truncate(stage, step)` drops rows of `stage` logged after `step` (work
  that was not checkpointed and will be done again), so no step appears twice. Opening
  repairs a torn last line (`repair`).
  """

  def __init__(self, workdir: str, *, tensorboard: bool = True):
    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, METRICS_FILE)
    self._tensorboard = tensorboard
    self._writer = None
    self.open()

  def open(self) -> None:
    """Repairs the file and starts the TensorBoard writer (again after `close`)."""
    if _is_main_process() and self._writer is None:
      self.repair()
      if self._tensorboard:
        from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel
        self._writer = SummaryWriter(os.path.join(os.path.dirname(self.path), "tb"))

  def rows(self) -> list[dict[str, Any]]:
    return read_rows(os.path.dirname(self.path))

  def repair(self) -> bool:
    """Rewrites the file atomically without a torn last line (and with the newline an
    interrupted append left out); whether it had to. MetricsFileError for a bad line
    that is not the last."""
    rows, torn = _load(self.path)
    if torn is None and _ends_with_newline(self.path):
      return False
    _rewrite(self.path, rows)
    note("%s: repaired (%s)", self.path, f"dropped a torn last line: {torn}" if torn
         else "the last row's newline was missing")
    return True

  def truncate(self, stage: str, step: int) -> None:
    """Removes rows of `stage` (and eval rows made during it) after `step`."""
    rows = self.rows()
    keep = [r for r in rows
            if not (r.get("stage") == stage and r.get("step", 0) > step)
            and not (r.get("stage") == "eval" and r.get("after") == stage
                     and r.get("step", 0) > step)]
    if len(keep) != len(rows) and _is_main_process():
      _rewrite(self.path, keep)

  def write(self, stage: str, step: int, values: Mapping[str, Any]) -> dict[str, Any]:
    row = {"step": int(step), "stage": stage, "time": round(time.time(), 3)}
    row.update({k: _plain(v) for k, v in values.items()})
    if _is_main_process():
      if not _ends_with_newline(self.path):
        self.repair()
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
