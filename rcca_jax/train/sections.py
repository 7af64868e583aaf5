"""The job config's typed sections: `data`, `sft`, `rl`, `eval`, `checkpoint` and the
top-level fields, each default defined here once.

An experiment config is an `ml_collections.ConfigDict` (command-line overrides,
`--config.rl.num_steps=3`); `job_config(config)` reads it into a frozen `JobConfig`, a
field the config leaves out taking the default below (fields without one are required).
`config_check.SCHEMA` is derived from these classes (`schema_of`) and reads defaults
through `default`, so a check and the code it guards cannot disagree.

`credit` is built here (`credit.blame.CreditConfig`). Sub-sections that need more
than the config to build stay mappings, typed by their classes: `model` (its family's
config, with the tokenizer's vocabulary), `*.optimizer` (`rl.optim.OptimizerConfig`,
with the stage's length), `rl.loss` (`rl.losses.LossConfig`), `eval.evaluator`
(`evaluation.config.EvalConfig`), `data.controlled` (`credit.controlled.ControlledSpec`,
plus `path`). The runners' `arms` / `ablation` / `sweep` / `settings` are read by
`rcca_jax.ablation` and `rcca_jax.sweep` (`RUNNER_SECTIONS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rcca_jax.credit import blame
from rcca_jax.credit import controlled
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.models.config import LingConfig
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.rl import losses
from rcca_jax.rl import optim

SAMPLES_PER_REQUEST = 8  # eval.samples_per_request's default (sampled pass@1; 0: off)
_MISSING = dataclasses.MISSING


def _sub(schema: Any, defaults: Any = None) -> Any:
  """A field holding a mapping that `schema` (a dataclass or a field dict) types, its
  fields' defaults those of the dataclass `defaults` (default: `schema` itself)."""
  if defaults is None and dataclasses.is_dataclass(schema):
    defaults = schema
  return dataclasses.field(default_factory=dict,
                           metadata={"schema": schema, "defaults": defaults})


def _typed(cls: Any) -> Any:
  """A field holding a `cls` instance built by `cls.from_mapping` (defaults: `cls()`)."""
  return dataclasses.field(default_factory=cls, metadata={
      "schema": cls, "defaults": cls, "build": cls.from_mapping})


# rl.loss: LossConfig's fields less the two filled from elsewhere (rl.policy_loss and
# credit.negative_unblamed: one name per value).
LOSS_FIELDS = {f.name: None for f in dataclasses.fields(losses.LossConfig)
               if f.name not in ("policy_loss", "rcca_negative_unblamed")}
MODEL_FIELDS = {"family": None, **{f.name: None for cls in (LingConfig, LlamaConfig)
                                   for f in dataclasses.fields(cls)}}
CONTROLLED_FIELDS = {**{f.name: None for f in dataclasses.fields(controlled.ControlledSpec)},
                     "path": None}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSection:
  """Where the tasks and the tokenizer come from, and the data setting."""
  tokenizer: str = ""  # tokenizer directory; "" = the init_from_* checkpoint's
  train_tasks: str     # task file (jsonl) of SFT and RL
  families: tuple[str, ...] = ()  # only these task families (() = all)
  setting: str = "natural"  # "natural" | "controlled" (known bugs planted by SFT)
  # The controlled setting (credit.controlled.ControlledSpec) and `path` of its task
  # file ("" = WORKDIR/controlled_tasks.jsonl).
  controlled: Mapping[str, Any] = _sub(CONTROLLED_FIELDS, defaults=controlled.ControlledSpec)

  @property
  def controlled_spec(self) -> controlled.ControlledSpec:
    return controlled.ControlledSpec.from_mapping(self.controlled)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftSection:
  """Supervised fine-tuning on the tasks' references (or the controlled targets)."""
  num_steps: int         # optimizer steps (0: no SFT)
  batch_size: int        # sequences per step
  max_len: int           # longest example in tokens (longer ones are skipped)
  log_every: int = 10    # steps between logged rows
  checkpoint_every: int = 50  # steps between checkpoints
  per_family: int = 0    # at most this many tasks per family (0: all)
  optimizer: Mapping[str, Any] = _sub(optim.OptimizerConfig)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RlSection:
  """The RL stage: rollouts, grading, credit, updates."""
  num_steps: int                # rollout batches (0: no RL)
  policy_loss: str = "rcca"     # a registered policy loss: "rcca" | "grpo" | ...
  group_size: int               # samples per prompt (a GRPO group)
  prompts_per_step: int         # prompts per rollout batch
  temperature: float = 1.0      # sampling temperature; the loss needs 1.0
  max_new_tokens: int           # sampled tokens per response
  max_prompt_len: int           # longest prompt in tokens
  long_prompts: str = "refuse"  # a longer prompt: "refuse" (error) | "skip"
  checkpoint_every: int = 1     # RL steps between checkpoints
  per_family: int = 0           # at most this many tasks per family (0: all)
  num_iterations: int = 1       # passes over each rollout batch
  mini_batches: int = 1         # optimizer updates per pass (whole groups each)
  recompute_old_logprobs: bool = False  # old log-probs recomputed, not the sampler's
  reference: str = ""           # KL reference (rl.loss.kl_beta > 0): "" = the SFT result
  overlap_steps: int = 0        # 1: sample step n+1 while step n is graded (train/overlap.py)
  # A step whose share of unscorable responses (grading did not finish, or the judge
  # could not grade) exceeds this is not applied: graded again up to
  # `unscorable_retries` times, then the run stops (train/faults.py).
  max_unscorable: float = 0.25
  unscorable_retries: int = 2
  optimizer: Mapping[str, Any] = _sub(optim.OptimizerConfig)
  loss: Mapping[str, Any] = _sub(LOSS_FIELDS, defaults=losses.LossConfig)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalSection:
  """Dev evaluation (after SFT, every few RL steps, --mode=eval) and the grader."""
  enabled: bool = True
  after_sft: bool = True        # evaluate once after SFT
  every_rl_steps: int = 8       # RL steps between evaluations (and at the end)
  tasks: str = ""               # dev task file (jsonl)
  per_family: int = 0           # at most this many tasks per family (0: all)
  num_tasks: int = 0            # at most this many tasks (0: all)
  samples_per_task: int = 1     # responses per task at `temperature`
  temperature: float = 0.0      # 0: greedy
  max_new_tokens: int           # sampled tokens per response
  workers: int = 2              # grading processes (or Ray actors)
  num_reports: int = 3          # HTML credit reports written per evaluation
  evaluator: Mapping[str, Any] = _sub(EvalConfig)
  backend: str = "pool"         # "pool": processes on this host | "ray": Ray actors
  ray_address: str = ""         # "": a local Ray instance; else e.g. "ray://head:10001"
  grading_cache: str = ""       # on-disk grading cache directory ("" = off)
  # Sampled pass@1: samples per request at rl.temperature (0: off).
  samples_per_request: int = SAMPLES_PER_REQUEST
  collapse_margin: float = 0.1  # a dev reward or gate rate this far below post-SFT warns


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointSection:
  """Orbax checkpoints under WORKDIR/checkpoints/{sft,rl,best}."""
  max_to_keep: int = 2
  async_save: bool = False
  keep_best: bool = True        # WORKDIR/checkpoints/best: the RL state of the best dev reward
  every_seconds: float = 0.0    # SFT also saves when this long passed since its last save (0: off)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobConfig:
  """The typed job: top-level fields and the sections above."""
  seed: int = 0
  micro_batches: int = 1        # gradient accumulation: micro-batches per update
  logits_chunk: int = 0         # log-probs over sequence chunks of this length (0: whole)
  # Updates skipped in a row for a non-finite loss or gradient norm before the run
  # stops (train/faults.py; 0: never stops).
  max_nonfinite_in_row: int = 3
  init_from_hf: str = ""        # a Hugging Face checkpoint directory to start from
  init_from_gguf: str = ""      # or a GGUF file (Llama family)
  # The model's fields (`family` picks Ling or Llama; models/families.py builds it).
  model: Mapping[str, Any] = _sub(MODEL_FIELDS)
  mesh: Mapping[str, Any] = _sub({a: None for a in mesh_lib.AXES})  # axis -> size (-1: rest)
  data: DataSection
  sft: SftSection
  rl: RlSection
  eval: EvalSection
  checkpoint: CheckpointSection = dataclasses.field(default_factory=CheckpointSection)
  credit: blame.CreditConfig = _typed(blame.CreditConfig)  # RL blame and its weights

  @property
  def pretrained_source(self) -> str:
    """The checkpoint the run starts from ("" for none)."""
    return self.init_from_hf or self.init_from_gguf


def _is_section(cls: Any) -> bool:
  return isinstance(cls, type) and cls.__module__ == __name__ and dataclasses.is_dataclass(cls)


def _field_types(cls: type) -> dict[str, Any]:
  """Field name -> the section class it holds (None for a value)."""
  out = {}
  for f in dataclasses.fields(cls):
    kind = globals().get(str(f.type))
    out[f.name] = kind if _is_section(kind) else None
  return out


def schema_of(cls: type) -> dict[str, Any]:
  """The field tree of a section class for `config_check.unknown_fields`: a nested dict,
  a sub-section's owning class, or None (a value)."""
  out: dict[str, Any] = {}
  kinds = _field_types(cls)
  for f in dataclasses.fields(cls):
    section = kinds[f.name]
    if section is not None:
      out[f.name] = schema_of(section)
    elif "schema" in f.metadata:
      out[f.name] = f.metadata["schema"]
    else:
      out[f.name] = None
  return out


def default(path: str) -> Any:
  """The default of a dotted field (`rl.overlap_steps`), `rl.loss.*` included;
  MISSING for a required field, KeyError for an unknown one."""
  cls: Any = JobConfig
  parts = path.split(".")
  for i, part in enumerate(parts):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if part not in fields:
      raise KeyError(path)
    f = fields[part]
    section = _field_types(cls)[part]
    if i == len(parts) - 1:
      if f.default is not _MISSING:
        return f.default
      return f.default_factory() if f.default_factory is not _MISSING else _MISSING
    cls = section or f.metadata.get("defaults")
    if cls is None:
      raise KeyError(path)
  raise KeyError(path)


def value(config: Mapping[str, Any], path: str) -> Any:
  """The dotted field `path` of a (possibly partial) config, else its default (None
  for a required or unknown field)."""
  node: Any = config
  for part in path.split("."):
    if not hasattr(node, "keys") or part not in node:  # a dict or a ConfigDict
      try:
        found = default(path)
      except KeyError:
        return None
      return None if found is _MISSING else found
    node = node[part]
  return node


def required(cls: type = JobConfig, prefix: str = "") -> list[str]:
  """Dotted names of the fields without a default."""
  out = []
  kinds = _field_types(cls)
  for f in dataclasses.fields(cls):
    section = kinds[f.name]
    if f.default is _MISSING and f.default_factory is _MISSING:
      out.append(f"{prefix}{f.name}")
    if section is not None:
      out += required(section, f"{prefix}{f.name}.")
  return out


def _plain(value: Any) -> Any:
  """ConfigDicts as dicts (a frozen section holds no ConfigDict)."""
  if hasattr(value, "to_dict"):
    value = value.to_dict()
  if isinstance(value, Mapping):
    return {k: _plain(v) for k, v in value.items()}
  return value


def _build(cls: type, values: Mapping[str, Any], prefix: str) -> Any:
  kinds = _field_types(cls)
  known = set(kinds)
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f"unknown fields: {', '.join(prefix + u for u in unknown)}")
  builds = {f.name: f.metadata["build"] for f in dataclasses.fields(cls)
            if "build" in f.metadata}
  kw = {}
  for name, value in values.items():
    if kinds[name] is not None:
      kw[name] = _build(kinds[name], value, f"{prefix}{name}.")
    elif name in builds:
      kw[name] = builds[name](_plain(value))
    else:
      kw[name] = _plain(value)
  missing = [f"{prefix}{n}" for n in required(cls) if "." not in n and n not in kw]
  if missing:
    raise ValueError(f"missing required fields: {', '.join(missing)}")
  return cls(**kw)


# Read by `rcca_jax.ablation` / `rcca_jax.sweep` only.
RUNNER_SECTIONS = {"arms": None, "ablation": {"arms": None, "bootstrap": None},
                   "sweep": {"settings": None}, "settings": None}


def job_config(config: Mapping[str, Any]) -> JobConfig:
  """The typed job of an experiment config (`config_check.check` reports its problems
  first; this raises ValueError on unknown or missing fields)."""
  values = {k: v for k, v in _plain(config).items() if k not in RUNNER_SECTIONS}
  return _build(JobConfig, values, "")
