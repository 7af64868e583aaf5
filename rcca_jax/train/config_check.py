"""Checks a job config before any work starts; one error names every bad field.

`problems(config, num_devices=..., mode=...)` returns one line per problem, each
starting with the field it is about; `check(...)` raises `ConfigError` with all of
them. `python -m rcca_jax.main` prints them without a traceback and exits 2.

Checked: unknown fields (at every level, the schema derived from the typed sections of
`train/sections.py`, whose defaults fill a field a config leaves out), missing required
ones, the mesh against the device count, that every batch splits over
micro-batches (and RL mini-batches) and then over the mesh's batch axis, loss /
optimizer / credit / evaluator / model sections that their classes accept (after
`credit.preset` set its fields; a field it sets that the config sets otherwise), the RL
temperature (> 0), token budgets against `model.max_position_embeddings`, a usable KL
reference, the loss ranges (`RANGES`; the credit weights' in `CreditConfig`; `credit.cap` >=
`credit.direct`),
overlap (0 or 1, not with recomputed old log-probs), the grading backend and cache, prompts
that split over the job's processes, and (train mode) the files the job reads and, with a
judge, its worst case per response against the response deadline. Prompts
longer than `rl.max_prompt_len` need the tokenizer and are checked when the tasks are
loaded (`train.prompts`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any, Mapping, Optional, Sequence

import ml_collections

from rcca_jax.credit import presets
from rcca_jax.data.families import FAMILIES
from rcca_jax.data.selection import load_task_file, resolve_path
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.evaluation.grader import BACKENDS
from rcca_jax.models import families
from rcca_jax.models import safetensors_io
from rcca_jax.models.config import LingConfig
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.parallel import partitioning
from rcca_jax.rl import objective
from rcca_jax.sampling.sampler import ROLLOUT_DTYPES
from rcca_jax.train import flat_groups
from rcca_jax.train import sections

MODES = ("train", "eval", "plan")
LONG_PROMPTS = ("refuse", "skip")

# Known fields: a nested dict, a dataclass (its fields), or None (a leaf), from the
# job's typed sections (train/sections.py).
SCHEMA: dict[str, Any] = {**sections.schema_of(sections.JobConfig), **sections.RUNNER_SECTIONS}
SETTINGS = ("natural", "controlled")
# Field -> (low, high, low open, high open) of a number that must lie in range.
RANGES = {
    "rl.loss.eps_low": (0.0, 1.0, True, True),
    "rl.loss.eps_high": (0.0, math.inf, True, True),
    "rl.loss.rcca_c": (0.0, math.inf, True, True),
    "rl.loss.rcca_positive_blamed": (0.0, math.inf, False, True),
    "eval.collapse_margin": (0.0, math.inf, False, True),
    "rl.max_unscorable": (0.0, 1.0, False, False),
    "checkpoint.every_seconds": (0.0, math.inf, False, True),
}


class ConfigError(ValueError):
  """An invalid config; `problems` lists every problem found."""

  def __init__(self, problems: Sequence[str]):
    self.problems = list(problems)
    super().__init__(f"invalid config ({len(self.problems)} problem"
                     f"{'s' if len(self.problems) != 1 else ''}):\n" +
                     "\n".join(f"  - {p}" for p in self.problems))


def _as_dict(value: Any) -> Any:
  return value.to_dict() if isinstance(value, ml_collections.ConfigDict) else value


def unknown_fields(values: Mapping[str, Any], schema: Any, prefix: str = ""
                   ) -> list[str]:
  """Dotted names of `values` entries that `schema` does not know."""
  if dataclasses.is_dataclass(schema):
    schema = {f.name: None for f in dataclasses.fields(schema)}
  out = []
  for name, value in values.items():
    path = f"{prefix}{name}"
    if name not in schema:
      out.append(path)
    elif isinstance(schema[name], dict) or dataclasses.is_dataclass(schema[name]):
      if isinstance(value, Mapping):
        sub = schema[name]
        if dataclasses.is_dataclass(sub):  # dataclass fields take any value
          known = {f.name for f in dataclasses.fields(sub)}
          out += [f"{path}.{k}" for k in value if k not in known]
        else:
          out += unknown_fields(value, sub, f"{path}.")
  return out


def batch_axis(sizes: Mapping[str, int]) -> tuple[int, str]:
  """Ways the batch dimension is split on a mesh of `sizes`, and the axes' names."""
  spec = partitioning.logical_to_spec(("batch",), tuple(sizes), dict(sizes))[0]
  names = (spec,) if isinstance(spec, str) else tuple(spec or ())
  return math.prod(sizes[n] for n in names), "×".join(names) or "none"


class _Collector:
  """Accumulates problems; `get` reads a dotted field (its `sections` default when
  absent, else None)."""

  def __init__(self, config: Mapping[str, Any]):
    self.config = config
    self.problems: list[str] = []

  def get(self, path: str) -> Any:
    return sections.value(self.config, path)

  def has(self, path: str) -> bool:
    node: Any = self.config
    for part in path.split("."):
      if not isinstance(node, Mapping) or part not in node:
        return False
      node = node[part]
    return True

  def add(self, message: str) -> None:
    self.problems.append(message)

  def integer(self, path: str, minimum: int) -> Optional[int]:
    value = self.get(path)
    if isinstance(value, bool) or not isinstance(value, int):
      self.add(f"{path}={value!r} must be an integer >= {minimum}")
      return None
    if value < minimum:
      self.add(f"{path}={value} must be >= {minimum}")
      return None
    return value


def _build(c: _Collector, path: str) -> Any:
  """The nested section `path` as the job builds it (`sections.build`, on the config's
  known keys: unknown ones are reported once, above); None, reported with the field
  name, when its class refuses a value."""
  schema = functools.reduce(lambda node, name: node[name], path.split("."), SCHEMA)
  known = sections.known_keys(schema)
  values = _as_dict(c.get(path)) or {}
  if not isinstance(values, Mapping):
    c.add(f"{path}={values!r}: expected a section (its fields)")
    return None
  try:
    return sections.build(path, {k: v for k, v in dict(values).items() if k in known},
                          c.config)
  except (TypeError, ValueError) as e:
    c.add(f"{path}: {e}")
    return None


def _check_sections(c: _Collector) -> None:
  """Sections that a class builds: what the class refuses, with the field name."""
  # The constructors the job calls (train/sections.py), on the config's values.
  for path in ("rl.loss", "credit", "sft.optimizer", "rl.optimizer", "eval.evaluator"):
    if c.has(path):
      _build(c, path)
  if c.get("rl.policy_loss") is not None:
    try:
      objective.policy_loss_name(c.get("rl.policy_loss"))
    except ValueError as e:
      c.add(f"rl.policy_loss: {e}")
  setting = c.get("data.setting")
  if setting not in SETTINGS:
    c.add(f"data.setting={setting!r}: expected one of {', '.join(SETTINGS)}")
  elif c.get("credit.blame") == "oracle" and setting != "controlled":
    c.add("credit.blame='oracle' needs data.setting='controlled' (the known bug sites)")
  elif setting == "controlled":
    _build(c, "data.controlled")
  _check_fresh(c, setting)
  model = dict(c.get("model") or {})
  try:
    sections.model_from_fields(model)  # the vocabulary is the tokenizer's at run time
  except (TypeError, ValueError) as e:
    c.add(f"model: {e}")
  if c.get("init_from_hf") and c.get("init_from_gguf"):
    c.add("init_from_hf and init_from_gguf are both set; a run starts from one checkpoint")
  if c.get("init_from_gguf") and not str(c.get("init_from_gguf")).endswith(".gguf"):
    c.add(f"init_from_gguf={c.get('init_from_gguf')!r}: expected a .gguf file")
  if c.get("init_from_gguf") and model.get("family", "llama") not in ("llama", "qwen2"):
    c.add(f"model.family={model['family']!r} but init_from_gguf is a Llama-family file")
  init_from = c.get("init_from_hf")
  if init_from and "family" in model and _exists(os.path.join(init_from, "config.json")):
    try:
      found = families.family_of(safetensors_io.read_config(resolve_path(init_from)))
    except ValueError as e:
      c.add(f"init_from_hf={init_from!r}: {e}")
    else:
      if found != model["family"]:
        c.add(f"model.family={model['family']!r} but init_from_hf={init_from!r} is a "
              f"{found!r} checkpoint")


def _check_ranges(c: _Collector) -> None:
  """`RANGES`, and the weight cap at least the direct weight."""
  values = {}
  for path, (low, high, low_open, high_open) in RANGES.items():
    value = c.get(path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      c.add(f"{path}={value!r} must be a number")
      continue
    values[path] = value
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if below or above:
      interval = (f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
                  if high < math.inf else f"{'>' if low_open else '>='} {low:g}")
      c.add(f"{path}={value!r} must be {'in ' if high < math.inf else ''}{interval}")
  cap, direct = c.get("credit.cap"), c.get("credit.direct")
  numbers = (int, float)
  if (isinstance(cap, numbers) and isinstance(direct, numbers) and cap >= 1.0
      and cap < direct):
    c.add(f"credit.cap={cap!r} must be >= credit.direct={direct!r} (the cap bounds the "
          "accumulated weight)")


def _check_fresh(c: _Collector, setting: Any) -> None:
  """`data.fresh`: its spec, and families to draw in the natural setting."""
  spec = _build(c, "data.fresh")
  if spec is None or not spec.enabled:
    return
  families = tuple(c.get("data.families") or ())
  unknown = sorted(set(families) - set(FAMILIES))
  if setting != "natural":
    c.add("data.fresh draws natural-setting tasks: it needs data.setting='natural'")
  elif not families:
    c.add("data.fresh needs data.families (the families whose generators it draws)")
  elif unknown:
    c.add(f"data.families: unknown families for data.fresh: {', '.join(unknown)}")


def _check_batches(c: _Collector, num_devices: int) -> None:
  try:
    sizes = mesh_lib.resolve_sizes(mesh_lib.parse_mesh_spec(dict(c.get("mesh") or {})),
                                   num_devices)
  except ValueError as e:
    c.add(f"mesh: {e}")
    return
  ways, names = batch_axis(sizes)
  micro = c.integer("micro_batches", 1)
  if micro is None:
    return
  per = f"the {ways}-way batch axis ({names})"
  sft = c.integer("sft.batch_size", 1)
  if sft is not None and sft % (micro * ways):
    extra = f"micro_batches={micro} x " if micro > 1 else ""
    c.add(f"sft.batch_size={sft} is not divisible by {extra}{per}"
          + (f" = {micro * ways}" if micro > 1 else ""))
  prompts = c.integer("rl.prompts_per_step", 1)
  group = c.integer("rl.group_size", 1)
  minis = c.integer("rl.mini_batches", 1)
  if None in (prompts, group, minis):
    return
  if prompts % minis:
    c.add(f"rl.prompts_per_step={prompts} is not divisible by rl.mini_batches={minis} "
          "(each mini-batch holds whole groups)")
    return
  if c.get("rl.shared_prefix") and group % micro:
    c.add(f"rl.shared_prefix: rl.group_size={group} is not divisible by "
          f"micro_batches={micro} (each micro-batch holds a share of every group)")
  rows = prompts * group // minis
  if rows % (micro * ways):  # (else a sharding constraint replicates a micro-batch)
    c.add(f"rl.mini_batches={minis}: a mini-batch of rl.prompts_per_step x "
          f"rl.group_size / rl.mini_batches = {rows} rows is not divisible by "
          f"micro_batches={micro} x {per} = {micro * ways}")


def _check_rl(c: _Collector, mode: str) -> None:
  c.integer("rl.num_steps", 0)
  c.integer("sft.num_steps", 0)
  c.integer("rl.num_iterations", 1)
  c.integer("logits_chunk", 0)
  c.integer("rl.unscorable_retries", 0)
  c.integer("rl.length_bucket", 0)
  c.integer("sft.length_bucket", 0)
  c.integer("sft.length_grouped", 0)
  c.integer("max_nonfinite_in_row", 0)
  temperature = c.get("rl.temperature")
  if not (isinstance(temperature, (int, float)) and 0 < temperature < math.inf):
    c.add(f"rl.temperature={temperature} must be a finite number > 0 (RL samples, and "
          "the loss takes log-probs of softmax(logits / temperature))")
  c.integer("eval.samples_per_request", 0)
  c.integer("eval.end_samples_per_request", -1)
  c.integer("eval.every_sft_steps", 0)
  fresh_dev = dict(c.get("data.fresh") or {}).get("dev_per_family")
  if (mode == "train" and c.get("data.setting") == "natural" and c.get("eval.enabled")
      and not c.get("eval.tasks") and not fresh_dev):
    c.add("eval.tasks is empty and data.fresh.dev_per_family is 0: no dev tasks to "
          "evaluate (or set eval.enabled=False)")
  if (c.get("eval.temperature") or 0.0) < 0:
    c.add(f"eval.temperature={c.get('eval.temperature')} must be >= 0 (0: greedy)")
  long_prompts = c.get("rl.long_prompts")
  if long_prompts not in LONG_PROMPTS:
    c.add(f"rl.long_prompts={long_prompts!r} must be one of {LONG_PROMPTS}")
  kl_beta = c.get("rl.loss.kl_beta") or 0.0
  reference = c.get("rl.reference") or ""
  if kl_beta < 0:
    c.add(f"rl.loss.kl_beta={kl_beta} must be >= 0")
  if reference and kl_beta == 0:
    c.add(f"rl.reference={reference!r} is set but rl.loss.kl_beta=0 (no KL term)")
  if reference and kl_beta > 0 and mode == "train" and not _exists(reference):
    c.add(f"rl.reference={reference!r}: no such checkpoint directory")


def _check_scale(c: _Collector, num_processes: int) -> None:
  """Overlap, the grading backend, and the prompts' split over processes."""
  rounds, flat = c.get("rl.resample_flat_rounds"), c.get("rl.flat_groups")
  if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
    c.add(f"rl.resample_flat_rounds={rounds!r} must be an integer >= 0")
  elif rounds and num_processes > 1:
    c.add(f"rl.resample_flat_rounds={rounds} with {num_processes} processes: resampling "
          "is per process (one process only)")
  if flat not in flat_groups.FLAT_GROUPS:
    c.add(f"rl.flat_groups={flat!r} must be one of {flat_groups.FLAT_GROUPS}")
  if c.get("rl.shared_prefix") and num_processes > 1:
    c.add(f"rl.shared_prefix with {num_processes} processes: the step replicates a "
          "batch's prompts, and each process holds its own (one process only)")
  overlap = c.get("rl.overlap_steps")
  if overlap not in (0, 1):
    c.add(f"rl.overlap_steps={overlap!r} must be 0 or 1")
  elif overlap and c.get("rl.recompute_old_logprobs"):
    c.add("rl.overlap_steps=1 with rl.recompute_old_logprobs=True: overlapped rollouts "
          "come from the previous policy, whose log-probs only the sampler has")
  rollout_dtype = c.get("rl.rollout_dtype")
  if rollout_dtype not in ROLLOUT_DTYPES:
    c.add(f"rl.rollout_dtype={rollout_dtype!r} must be one of {ROLLOUT_DTYPES}")
  elif rollout_dtype and not c.get("rl.recompute_old_logprobs"):
    c.add(f"rl.rollout_dtype={rollout_dtype!r} needs rl.recompute_old_logprobs=True: the "
          "sampler's log-probs are the rounded weights', not the policy's")
  backend = c.get("eval.backend")
  if backend not in BACKENDS:
    c.add(f"eval.backend={backend!r} must be one of {BACKENDS}")
  address = c.get("eval.ray_address") or ""
  if not isinstance(address, str) or (address and backend != "ray"):
    c.add(f"eval.ray_address={address!r} needs eval.backend='ray' (and is a string)")
  cache = c.get("eval.grading_cache")
  if not isinstance(cache, str) or (cache and os.path.isfile(resolve_path(cache))):
    c.add(f"eval.grading_cache={cache!r} must be a directory path ('' = no cache)")
  prompts = c.get("rl.prompts_per_step")
  minis = c.get("rl.mini_batches")
  if num_processes > 1 and isinstance(prompts, int) and isinstance(minis, int):
    if prompts % num_processes:
      c.add(f"rl.prompts_per_step={prompts} is not divisible by the {num_processes} "
            "processes (each samples and grades whole prompt groups)")
    elif minis > 0 and (prompts // num_processes) % minis:
      c.add(f"rl.mini_batches={minis} does not divide the {prompts // num_processes} "
            "prompts of each process")


def _check_packing(c: _Collector) -> None:
  if not c.get("sft.pack"):
    return
  family = c.get("model.family") or families.DEFAULT_FAMILY
  if family != "llama":
    c.add(f"sft.pack=True needs model.family='llama' (packed segments are read by the "
          f"dense model's attention only), not {family!r}")
  if c.get("model.attention_block_size"):
    c.add("sft.pack=True needs model.attention_block_size=0 (blocked attention reads "
          "one sequence per row)")


def _check_lengths(c: _Collector) -> None:
  family = c.get("model.family") or families.DEFAULT_FAMILY
  cls = LingConfig if family == "ling" else LlamaConfig
  budget = (c.get("model.max_position_embeddings")
            or cls.__dataclass_fields__["max_position_embeddings"].default)
  if c.get("init_from_hf") or c.get("init_from_gguf"):
    return  # The checkpoint sets max_position_embeddings.
  prompt = c.integer("rl.max_prompt_len", 1)
  new = c.integer("rl.max_new_tokens", 1)
  sft_len = c.integer("sft.max_len", 2)
  if sft_len is not None and sft_len > budget:
    c.add(f"sft.max_len={sft_len} exceeds model.max_position_embeddings={budget}")
  if prompt is not None and new is not None and prompt + new > budget:
    c.add(f"rl.max_prompt_len + rl.max_new_tokens = {prompt + new} exceeds "
          f"model.max_position_embeddings={budget}")
  eval_new = c.get("eval.max_new_tokens")
  if prompt is not None and isinstance(eval_new, int) and prompt + eval_new > budget:
    c.add(f"rl.max_prompt_len + eval.max_new_tokens = {prompt + eval_new} exceeds "
          f"model.max_position_embeddings={budget}")


def _parent_present(c: _Collector, path: str) -> bool:
  parent = path.rpartition(".")[0]
  return not parent or c.has(parent)


def _exists(path: str) -> bool:
  return os.path.exists(resolve_path(path))


def _check_files(c: _Collector) -> None:
  if not c.get("data.tokenizer") and not (c.get("init_from_hf") or c.get("init_from_gguf")):
    c.add("data.tokenizer is empty (and there is no init_from_hf / init_from_gguf "
          "checkpoint to take the tokenizer from)")
  for path in ("data.tokenizer", "init_from_hf", "init_from_gguf", "data.train_tasks") + (
      ("eval.tasks",) if c.get("eval.enabled") else ()):
    value = c.get(path)
    if value and not _exists(value):
      c.add(f"{path}={value!r}: no such file or directory")
  fresh = c.get("data.fresh") or {}
  for i, value in enumerate(fresh.get("exclude", ()) if hasattr(fresh, "get") else ()):
    if isinstance(value, str) and value and not _exists(value):
      c.add(f"data.fresh.exclude[{i}]={value!r}: no such file or directory")


def judge_seconds(evaluator: EvalConfig) -> float:
  """The longest one judged rubric can take: its time budget, or without one every try
  timing out with the back-off between them (`judge.ChatClient`, at most 4 s each)."""
  if evaluator.judge_budget:
    return evaluator.judge_budget
  waits = sum(min(0.5 * 2 ** k, 4.0) for k in range(evaluator.judge_retries))
  return evaluator.judge_timeout * (evaluator.judge_retries + 1) + waits


def _check_judge(c: _Collector) -> None:
  """With a judge: its worst case on the task with the most judged rubrics (those
  without a check, in the files the job reads) must fit the response deadline, or the
  pool would kill the worker and record the response as a grading failure."""
  try:
    evaluator = EvalConfig.from_dict(dict(_as_dict(c.get("eval.evaluator")) or {}))
  except (TypeError, ValueError):
    return  # reported by _check_sections
  if not evaluator.has_judge:
    return
  judged, where = 0, ""
  for path in ("data.train_tasks", "eval.tasks"):
    value = c.get(path)
    if not value or not _exists(value):
      continue
    try:
      most = max((sum(r.steps is None for r in t.rubrics) for t in load_task_file(value)),
                 default=0)
    except ValueError:
      continue  # a task file that does not parse is reported when it is read
    if most > judged:
      judged, where = most, value
  seconds = judge_seconds(evaluator)
  if judged and seconds * judged >= evaluator.response_deadline:
    field = ("eval.evaluator.judge_budget" if evaluator.judge_budget else
             "eval.evaluator.judge_timeout x (judge_retries + 1) + back-off")
    c.add(f"{field} ({seconds:g}s) x {judged} judged rubrics (a task of {where}) = "
          f"{seconds * judged:g}s does not fit eval.evaluator.response_deadline "
          f"({evaluator.response_deadline:g}s): lower the judge budget or raise the deadline")


def problems(config: ml_collections.ConfigDict | Mapping[str, Any], *,
             num_devices: int, mode: str = "train", num_processes: int = 1) -> list[str]:
  """Every problem of `config` for a job on `num_devices` devices (of `num_processes`
  processes) in `mode`."""
  if mode not in MODES:
    raise ValueError(f"mode {mode!r} is not one of {MODES}")
  values = _as_dict(config)
  c = _Collector(values)
  c.problems += [f"{name}: unknown field" for name in unknown_fields(values, SCHEMA)]
  c.problems += [f"{name}: missing (a required field)" for name in sections.required()
                 if _parent_present(c, name) and not c.has(name)]
  preset = c.get("credit.preset")
  if preset in presets.PRESETS:  # an unknown name: the `credit` section reports it
    found = presets.conflicts(preset, c.get, sections.default)
    c.problems += found
    if not found:
      c.config = sections.with_preset(values)
  _check_sections(c)
  _check_ranges(c)
  _check_batches(c, num_devices)
  _check_rl(c, mode)
  _check_scale(c, num_processes)
  _check_lengths(c)
  _check_packing(c)
  if mode != "plan":
    _check_files(c)
    _check_judge(c)
  return c.problems


def check(config: ml_collections.ConfigDict | Mapping[str, Any], *, num_devices: int,
          mode: str = "train", num_processes: int = 1) -> None:
  """Raises `ConfigError` listing every problem (nothing when the config is valid)."""
  found = problems(config, num_devices=num_devices, mode=mode, num_processes=num_processes)
  if found:
    raise ConfigError(found)
