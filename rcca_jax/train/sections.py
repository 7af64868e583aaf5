"""The job config's typed sections: `data`, `sft`, `rl`, `eval`, `checkpoint` and the
top-level fields, each default defined here once.

An experiment config is an `ml_collections.ConfigDict` (command-line overrides,
`--config.rl.num_steps=3`); `job_config(config)` reads it into a frozen `JobConfig`, a
field the config leaves out taking the default below (fields without one are required).
`config_check.SCHEMA` is derived from these classes (`schema_of`) and reads defaults
through `default`, so a check and the code it guards cannot disagree.

Every nested section is a frozen dataclass, built here once by the one function that
both the job and `config_check` call (`build`), from the section's mapping and, where a
value has its name elsewhere, the rest of the config (`_typed`):

  rl.loss         `rl.objective.LossConfig`; its `policy_loss` is `rl.policy_loss` and its
                  `rcca_negative_unblamed` is `credit.negative_unblamed` (one name each)
  sft.optimizer,  `rl.optim.OptimizerConfig`, the schedule as long as the stage unless
  rl.optimizer    `total_steps` is set: `sft.num_steps`, or `rl.num_steps` x
                  `rl.num_iterations` x `rl.mini_batches` (an RL state counts updates);
                  handed to `train.checkpoints.Checkpoints` and the programs as is
  data.fresh      `data.draws.FreshSpec`
  data.controlled `ControlledSection`: `path` and the `credit.controlled.ControlledSpec`
                  (built in the controlled setting only)
  mesh            `MeshSection` (axis -> size)
  credit          `credit.blame.CreditConfig` (`credit.preset` first sets the fields of its
                  named method, `with_preset`)
  eval.evaluator  `evaluation.config.EvalConfig`

`model` alone stays a mapping (see `JobConfig.model`). An unknown key at any level is
an error naming its path. The runners' `arms` / `ablation` / `sweep` / `settings` are
read by `rcca_jax.study` (`RUNNER_SECTIONS`).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from typing import Any, Optional

from rcca_jax.credit import blame
from rcca_jax.credit import controlled
from rcca_jax.credit import presets
from rcca_jax.data import draws
from rcca_jax.data import chat
from rcca_jax.data import sentencepiece_tokenizer
from rcca_jax.data.selection import resolve_path
from rcca_jax.evaluation.config import EvalConfig
from rcca_jax.models import families
from rcca_jax.models.config import LingConfig
from rcca_jax.models.llama_config import LlamaConfig
from rcca_jax.parallel import mesh as mesh_lib
from rcca_jax.rl import objective
from rcca_jax.rl import optim
from rcca_jax.rl import batch_updates

SAMPLES_PER_REQUEST = 8  # eval.samples_per_request's default (sampled pass@1; 0: off)
_MISSING = dataclasses.MISSING
_OWN = object()  # `_typed`'s defaults: the class itself


def _typed(cls: Any, build: Any = None, *, schema: Any = None, defaults: Any = _OWN,
           derived: tuple[str, ...] = ()) -> Any:
  """A nested section held as a `cls` instance, made by `build(values, config)` (default
  `cls.from_mapping(values)`) from the config's mapping at this field (`values`, its
  unknown keys refused first) and the whole plain config (`config`: where a value has
  its name elsewhere). `schema`: the keys it takes (a field dict or a dataclass;
  default `cls`); `defaults`: the class whose field defaults the absent keys take
  (default `cls`; None: `defaults()` lists none); `derived`: keys that, when absent,
  are computed from elsewhere. `cls()` is the default only of a dataclass built
  directly: `job_config` builds every such field, present or not."""
  build = build or (lambda values, _: cls.from_mapping(values))
  return dataclasses.field(default_factory=cls, metadata={
      "schema": cls if schema is None else schema,
      "defaults": cls if defaults is _OWN else defaults, "derived": derived,
      "build": build})


def _count(config: Mapping[str, Any], path: str) -> int:
  """An integer field of a plain config (1 when it is not an integer: the check
  reports it)."""
  found = value(config, path)
  return found if isinstance(found, int) and not isinstance(found, bool) else 1


def _sft_optimizer(values: Mapping[str, Any], config: Mapping[str, Any]
                   ) -> optim.OptimizerConfig:
  return optimizer_config(values, _count(config, "sft.num_steps"))


def _rl_optimizer(values: Mapping[str, Any], config: Mapping[str, Any]
                  ) -> optim.OptimizerConfig:
  """An RL state counts optimizer updates: `rl.num_iterations` x `rl.mini_batches` per
  RL step (`update_config`)."""
  return optimizer_config(values, _count(config, "rl.num_steps")
                          * _count(config, "rl.num_iterations")
                          * _count(config, "rl.mini_batches"))


def _loss(values: Mapping[str, Any], config: Mapping[str, Any]) -> objective.LossConfig:
  """`rl.loss` with `rl.policy_loss` and `credit.negative_unblamed` (each value's one
  name)."""
  return objective.LossConfig.from_mapping({
      **values, "policy_loss": value(config, "rl.policy_loss"),
      "rcca_negative_unblamed": value(config, "credit.negative_unblamed")})


# An optimizer's field that, when absent, is the stage's length.
STAGE_LENGTH = ("total_steps",)
# rl.loss: LossConfig's fields less the two filled from elsewhere (rl.policy_loss and
# credit.negative_unblamed: one name per value).
LOSS_FIELDS = {f.name: None for f in dataclasses.fields(objective.LossConfig)
               if f.name not in ("policy_loss", "rcca_negative_unblamed")}
MODEL_FIELDS = {"family": None, **{f.name: None for cls in (LingConfig, LlamaConfig)
                                   for f in dataclasses.fields(cls)}}
CONTROLLED_FIELDS = {**{f.name: None for f in dataclasses.fields(controlled.ControlledSpec)},
                     "path": None}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlledSection:
  """`data.controlled`: the controlled setting's spec (its fields sit beside `path` in
  the config) and `path` of its task file ("" = WORKDIR/controlled_tasks.jsonl)."""
  path: str = ""
  # Built (and checked) when data.setting is "controlled"; None in the natural
  # setting, which reads none of these fields.
  spec: Optional[controlled.ControlledSpec] = None


def _controlled(values: Mapping[str, Any], config: Mapping[str, Any]) -> ControlledSection:
  spec = None
  if value(config, "data.setting") == "controlled":
    spec = controlled.ControlledSpec.from_mapping(
        {k: v for k, v in values.items() if k != "path"})
  return ControlledSection(path=values.get("path", ""), spec=spec)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeshSection:
  """`mesh`: each axis's size (`parallel/mesh.py`; -1: the remaining devices); an axis
  the config leaves out has size 1."""
  data: int = 1
  fsdp: int = 1
  expert: int = 1
  tensor: int = 1

  @property
  def sizes(self) -> dict[str, int]:
    """Axis -> size, in `mesh_lib.AXES` order (`mesh_lib.make_mesh`'s spec)."""
    return {axis: getattr(self, axis) for axis in mesh_lib.AXES}


assert tuple(f.name for f in dataclasses.fields(MeshSection)) == mesh_lib.AXES


def _mesh(values: Mapping[str, Any], _: Mapping[str, Any]) -> MeshSection:
  return MeshSection(**{axis: int(size) for axis, size in values.items()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSection:
  """Where the tasks and the tokenizer come from, and the data setting."""
  tokenizer: str = ""  # tokenizer directory; "" = the init_from_* checkpoint's
  train_tasks: str     # task file (jsonl) of SFT and RL
  families: tuple[str, ...] = ()  # only these task families (() = all)
  # Fresh draws of the families' generators added to train_tasks and eval.tasks
  # (off by default).
  fresh: draws.FreshSpec = _typed(draws.FreshSpec, lambda values, _: draws.FreshSpec(**values))
  setting: str = "natural"  # "natural" | "controlled" (known bugs planted by SFT)
  # The controlled setting (credit.controlled.ControlledSpec) and `path` of its task file.
  controlled: ControlledSection = _typed(ControlledSection, _controlled,
                                         schema=CONTROLLED_FIELDS,
                                         defaults=controlled.ControlledSpec)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftSection:
  """Supervised fine-tuning on the tasks' references (or the controlled targets)."""
  num_steps: int         # optimizer steps (0: no SFT)
  batch_size: int        # sequences per step
  max_len: int           # longest example in tokens (longer ones are skipped)
  log_every: int = 10    # steps between logged rows
  checkpoint_every: int = 50  # steps between checkpoints
  per_family: int = 0    # at most this many tasks per family (0: all)
  # Several examples per row where they fit (`batching.packed_sft_batch`; dense models):
  # the same examples and loss per step on fewer rows (docs/performance.md).
  pack: bool = False
  # Rows (one example each) padded to the step's longest example rounded up to a
  # multiple of this, at most max_len (0: always max_len); one compiled shape per length.
  length_bucket: int = 0
  # Windows of this many steps' examples sorted by length and cut into steps of similar
  # lengths (`batching.grouped_batch_indices`; 0: off): little padding with
  # `length_bucket`, every example once per epoch, but not the same steps' examples.
  length_grouped: int = 0
  # The LM head and its softmax at the positions the loss reads alone (responses, not
  # prompts or padding: `batching.loss_positions`, bucketed by `length_bucket`); the
  # same loss within float32 rounding. Models with `return_hidden` (Llama, Ling).
  head_on_loss_positions: bool = False
  # `total_steps` when absent: the stage's length, `num_steps` (`optimizer_config`).
  optimizer: optim.OptimizerConfig = _typed(optim.OptimizerConfig, _sft_optimizer,
                                            derived=STAGE_LENGTH)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RlSection:
  """The RL stage: rollouts, grading, credit, updates."""
  num_steps: int                # rollout batches (0: no RL)
  policy_loss: str = "rcca"     # a policy loss (rl.objective): "rcca" | "grpo" | ...
  group_size: int               # samples per prompt (a GRPO group)
  prompts_per_step: int         # prompts per rollout batch
  temperature: float = 1.0      # sampling temperature; the loss uses the same (> 0)
  max_new_tokens: int           # sampled tokens per response
  max_prompt_len: int           # longest prompt in tokens
  # RL batch rows: the step's longest row rounded up to a multiple of this, at most
  # max_prompt_len + max_new_tokens (0: always that); one compiled shape per length.
  length_bucket: int = 64
  # Each group's prompt stored and run once in the update and log-prob passes, its
  # responses over the prompt's decoding cache (`batching.prefix_batch`): the same
  # loss, without group_size - 1 copies of every prompt's work.
  shared_prefix: bool = False
  long_prompts: str = "refuse"  # a longer prompt: "refuse" (error) | "skip"
  checkpoint_every: int = 1     # RL steps between checkpoints
  per_family: int = 0           # at most this many tasks per family (0: all)
  num_iterations: int = 1       # passes over each rollout batch
  mini_batches: int = 1         # optimizer updates per pass (whole groups each)
  recompute_old_logprobs: bool = False  # old log-probs recomputed, not the sampler's
  # The sampler's copy of the matmul weights in this dtype ("": the policy's own;
  # "bfloat16": products in bfloat16, sums and all else in the compute dtype, faster
  # decode on CPUs with bfloat16 dot instructions; needs recompute_old_logprobs).
  rollout_dtype: str = ""
  reference: str = ""           # KL reference (rl.loss.kl_beta > 0): "" = the SFT result
  overlap_steps: int = 0        # 1: sample step n+1 while step n is graded (train/overlap.py)
  # Groups without a reward difference (train/flat_groups.py): up to this many more
  # rounds of prompts sampled while the step has fewer groups with one (DAPO's dynamic
  # sampling), and "drop": flat groups leave the loss, a step without any applies no
  # update ("keep": they stay, with zero advantage).
  resample_flat_rounds: int = 0
  flat_groups: str = "keep"
  # A step whose share of unscorable responses (grading did not finish, or the judge
  # could not grade) exceeds this is not applied: graded again up to
  # `unscorable_retries` times, then the run stops (train/faults.py).
  max_unscorable: float = 0.25
  unscorable_retries: int = 2
  # `total_steps` when absent: the stage's length in optimizer updates, `num_steps` x
  # `num_iterations` x `mini_batches` (`optimizer_config`).
  optimizer: optim.OptimizerConfig = _typed(optim.OptimizerConfig, _rl_optimizer,
                                            derived=STAGE_LENGTH)
  # The policy loss's hyper-parameters; the built `LossConfig` also holds `policy_loss`
  # above and `credit.negative_unblamed`, which are not fields of `rl.loss` (`_loss`).
  loss: objective.LossConfig = _typed(objective.LossConfig, _loss, schema=LOSS_FIELDS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalSection:
  """Dev evaluation (after SFT, every few RL steps, --mode=eval) and the grader."""
  enabled: bool = True
  after_sft: bool = True        # evaluate once after SFT
  every_rl_steps: int = 8       # RL steps between evaluations (and at the end)
  every_sft_steps: int = 0      # SFT steps between evaluations (0: only after SFT)
  tasks: str = ""               # dev task file (jsonl; "" with data.fresh's dev only)
  per_family: int = 0           # at most this many tasks per family (0: all)
  num_tasks: int = 0            # at most this many tasks (0: all)
  samples_per_task: int = 1     # responses per task at `temperature`
  temperature: float = 0.0      # 0: greedy
  max_new_tokens: int           # sampled tokens per response
  workers: int = 2              # grading processes (or Ray actors)
  num_reports: int = 3          # HTML credit reports written per evaluation
  evaluator: EvalConfig = _typed(EvalConfig, lambda values, _: EvalConfig.from_dict(values))
  backend: str = "pool"         # "pool": processes on this host | "ray": Ray actors
  ray_address: str = ""         # "": a local Ray instance; else e.g. "ray://head:10001"
  grading_cache: str = ""       # on-disk grading cache directory ("" = off)
  # Sampled pass@1: samples per request at rl.temperature (0: off).
  samples_per_request: int = SAMPLES_PER_REQUEST
  # Samples per request at the post-SFT and the last RL evaluation (pass@k at the start
  # and the end of RL: up to 16 with 16; -1: samples_per_request).
  end_samples_per_request: int = -1
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
  # The one nested section that stays a mapping: which of its fields apply depends on
  # the family (Ling's and Llama's configs differ) and on whether a checkpoint
  # (`init_from_*`) gives the architecture, when only the runtime fields (dtype, remat,
  # ...) are read; the vocabulary and pad/eos ids come from the tokenizer at run time.
  # `model_config` builds the family's frozen config from it.
  model: Mapping[str, Any] = _typed(dict, lambda values, _: dict(values),
                                    schema=MODEL_FIELDS, defaults=None)
  mesh: MeshSection = _typed(MeshSection, _mesh, schema={a: None for a in mesh_lib.AXES},
                             defaults=None)
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
  """Field name -> the section class it holds (None for a value or a nested section
  built by `_typed`)."""
  out = {}
  for f in dataclasses.fields(cls):
    kind = globals().get(str(f.type))
    out[f.name] = kind if _is_section(kind) and "build" not in f.metadata else None
  return out


def schema_of(cls: type) -> dict[str, Any]:
  """The field tree of a section class for `config_check.unknown_fields`: a nested dict,
  a nested section's schema (a dataclass or a field dict), or None (a value)."""
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
  MISSING for a required field or one derived from elsewhere when absent (an
  optimizer's `total_steps`: the stage's length), KeyError for an unknown one."""
  cls: Any = JobConfig
  derived: tuple[str, ...] = ()
  parts = path.split(".")
  for i, part in enumerate(parts):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if part not in fields:
      raise KeyError(path)
    f = fields[part]
    if i == len(parts) - 1:
      if "build" in f.metadata:
        return {}  # a nested section left out: every field at its default
      return _MISSING if part in derived else _default_of(f)
    derived = f.metadata.get("derived", ())
    cls = _field_types(cls)[part] or f.metadata.get("defaults")
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


def known_keys(schema: Any) -> set[str]:
  """The keys a nested section's schema (a field dict or a dataclass) takes."""
  return (set(schema) if isinstance(schema, dict)
          else {f.name for f in dataclasses.fields(schema)})


def field_at(path: str) -> dataclasses.Field:
  """The field of dotted `path` (`rl.loss`); KeyError for an unknown one."""
  cls: Any = JobConfig
  f = None
  for part in path.split("."):
    fields = {g.name: g for g in dataclasses.fields(cls)} if cls is not None else {}
    if part not in fields:
      raise KeyError(path)
    f = fields[part]
    cls = _field_types(cls)[part]
  assert f is not None
  return f


def build(path: str, values: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
  """The nested section `path` (`rl.loss`, `sft.optimizer`, ...) as the job holds it,
  from its mapping `values` and the whole plain `config` (the values it takes from
  other fields); its class's TypeError or ValueError on a bad value. Unknown keys are
  `job_config`'s (and the check's) to report."""
  return field_at(path).metadata["build"](_plain(values), config)


def _build(cls: type, values: Mapping[str, Any], prefix: str, config: Mapping[str, Any]
           ) -> Any:
  kinds = _field_types(cls)
  unknown = sorted(set(values) - set(kinds))
  if unknown:
    raise ValueError(f"unknown fields: {', '.join(prefix + u for u in unknown)}")
  fields = {f.name: f for f in dataclasses.fields(cls)}
  kw = {}
  # The config's fields in its order, then nested sections it leaves out: built too,
  # from their defaults and the fields they take from elsewhere.
  for name in [*values, *(n for n, f in fields.items()
                          if "build" in f.metadata and n not in values)]:
    f = fields[name]
    if kinds[name] is not None:
      kw[name] = _build(kinds[name], values[name], f"{prefix}{name}.", config)
    elif "build" in f.metadata:
      given = _plain(values.get(name) or {})
      unknown = sorted(set(given) - known_keys(f.metadata["schema"]))
      if unknown:
        raise ValueError(
            f"unknown fields: {', '.join(f'{prefix}{name}.{u}' for u in unknown)}")
      try:
        kw[name] = f.metadata["build"](given, config)
      except (TypeError, ValueError) as e:
        raise ValueError(f"{prefix}{name}: {e}") from e
    else:
      kw[name] = _plain(values[name])
      if str(f.type).startswith("tuple[") and isinstance(kw[name], list):
        kw[name] = tuple(kw[name])  # as JSON reads it back (WORKDIR/job_config.json)
  missing = [f"{prefix}{n}" for n in required(cls) if "." not in n and n not in kw]
  if missing:
    raise ValueError(f"missing required fields: {', '.join(missing)}")
  return cls(**kw)


def defaults(cls: type = JobConfig) -> dict[str, Any]:
  """Every field of `cls` that has a default, nested: a nested section's fields from its
  defaults class (those its schema knows, less the derived ones); required fields and
  `model` and `mesh` (no defaults class) are left out."""
  out: dict[str, Any] = {}
  kinds = _field_types(cls)
  for f in dataclasses.fields(cls):
    if kinds[f.name] is not None:
      out[f.name] = defaults(kinds[f.name])
    elif f.metadata.get("defaults") is not None:
      known = known_keys(f.metadata["schema"]) - set(f.metadata.get("derived", ()))
      out[f.name] = {g.name: _default_of(g) for g in dataclasses.fields(f.metadata["defaults"])
                     if g.name in known and _default_of(g) is not _MISSING}
    elif "schema" not in f.metadata and _default_of(f) is not _MISSING:
      out[f.name] = _default_of(f)
  return out


def _default_of(f: dataclasses.Field) -> Any:
  if f.default is not _MISSING:
    return f.default
  return f.default_factory() if f.default_factory is not _MISSING else _MISSING


def defaults_config() -> Any:
  """A `ml_collections.ConfigDict` of `defaults()`: where an experiment config starts,
  so that it sets only what differs and every defaulted field can still be overridden
  (`--config.rl.overlap_steps=1`, an arm's `rl.loss.kl_beta=0.01`)."""
  import ml_collections  # pylint: disable=import-outside-toplevel
  return ml_collections.ConfigDict(defaults())


# Read by `rcca_jax.study` (`study.ablation`, `study.sweep`) only.
RUNNER_SECTIONS = {"arms": None, "ablation": {"arms": None, "bootstrap": None,
                                              "shared_sft": None, "point_keys": None},
                   "sweep": {"settings": None}, "settings": None}


def job_config(config: Mapping[str, Any]) -> JobConfig:
  """The typed job of an experiment config (`config_check.check` reports its problems
  first; this raises ValueError on unknown or missing fields)."""
  values = with_preset({k: v for k, v in _plain(config).items()
                        if k not in RUNNER_SECTIONS})
  return _build(JobConfig, values, "", values)


def with_preset(values: Mapping[str, Any]) -> dict[str, Any]:
  """A plain config with the fields of its `credit.preset` set (`credit/presets.py`);
  ValueError naming each field the config sets to a third value."""
  name = value(values, "credit.preset") or ""
  chosen = presets.fields(name)
  found = presets.conflicts(name, lambda path: value(values, path), default) if chosen else []
  if found:
    raise ValueError("; ".join(found))
  out = copy.deepcopy(dict(values))
  for path, wanted in chosen.items():
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
      node = node.setdefault(part, {})
    node[leaf] = wanted
  return out


# ---- the run's typed parts that need more than the config -------------------------

def load_tokenizer(path: str) -> Any:
  """A tokenizer directory's (or a checkpoint directory's) tokenizer, or a GGUF file's.

  A directory with a `tokenizer.model` and no `tokenizer.json` is a SentencePiece
  tokenizer (`data.sentencepiece_tokenizer`); otherwise transformers' AutoTokenizer.
  """
  path = resolve_path(path)
  if path.endswith(".gguf"):
    from rcca_jax.models import gguf_checkpoint  # pylint: disable=import-outside-toplevel
    return gguf_checkpoint.load_tokenizer(path)
  if (os.path.isfile(os.path.join(path, sentencepiece_tokenizer.MODEL_FILE))
      and not os.path.isfile(os.path.join(path, "tokenizer.json"))):
    return sentencepiece_tokenizer.SentencePieceTokenizer.from_directory(path)
  from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
  return AutoTokenizer.from_pretrained(path)


def model_config(job: JobConfig, tokenizer: Any) -> families.ModelConfig:
  """The model config of `job.model` (`model_from_fields` with the tokenizer)."""
  return model_from_fields(job.model, tokenizer)


def model_from_fields(model: Mapping[str, Any], tokenizer: Any = None
                      ) -> families.ModelConfig:
  """The model config of `model` fields (`family` picks the class, default Ling):
  `vocab_size` 0 takes the tokenizer's (rounded up to a multiple of 64), pad/eos ids
  come from the tokenizer; without one (the config check) a placeholder vocabulary."""
  fields = dict(model)
  if tokenizer is None:
    fields["vocab_size"] = fields.get("vocab_size") or 64
    return families.config_from_fields(fields)
  if not fields.get("vocab_size"):
    fields["vocab_size"] = -(-len(tokenizer) // 64) * 64
  if fields["vocab_size"] < len(tokenizer):
    raise ValueError(f"model.vocab_size={fields['vocab_size']} is smaller than the "
                     f"tokenizer's {len(tokenizer)} tokens")
  fields["pad_token_id"] = chat.pad_id(tokenizer)
  fields["eos_token_id"] = chat.eos_ids(tokenizer)[0]
  return families.config_from_fields(fields)


def optimizer_config(values: Mapping[str, Any], num_steps: int) -> optim.OptimizerConfig:
  """A stage's optimizer: `values` (a `sft.optimizer` / `rl.optimizer` mapping) with the
  schedule as long as the stage's `num_steps` unless `total_steps` is set, the warm-up
  cut to it."""
  fields = dict(values)
  fields.setdefault("total_steps", max(num_steps, 1))
  fields["total_steps"] = max(fields["total_steps"], 1)
  fields["warmup_steps"] = min(fields.get("warmup_steps", optim.OptimizerConfig.warmup_steps),
                               fields["total_steps"])
  return optim.OptimizerConfig.from_mapping(fields)


def update_config(rl: RlSection) -> batch_updates.UpdateConfig:
  return batch_updates.UpdateConfig(
      num_iterations=rl.num_iterations, mini_batches=rl.mini_batches,
      recompute_old_logprobs=rl.recompute_old_logprobs)
