"""Configuration of the Ling-3 hybrid model (the `bailing_hybrid` architecture).

`LingConfig` holds every architecture field of transformers' `BailingHybridConfig` that
changes the computation, plus a few JAX-side options (dtypes, remat, MoE kernel). It reads
and writes `config.json` dictionaries in either spelling that checkpoints use.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"
DENSE = "dense"
SPARSE = "sparse"

# config.json keys written by transformers' attribute_map -> canonical field names.
_HF_ALIASES = {
  "model_max_length": "max_position_embeddings",
  "moe_renormalize": "norm_topk_prob",
  "num_expert_group": "n_group",
  "num_experts": "num_local_experts",
  "num_experts_per_token": "num_experts_per_tok",
  "num_shared_experts": "n_shared_experts",
  "num_nextn_predict_layers": "num_mtp_layers",
  "linear_conv_kernel_dim": "short_conv_kernel_size",
}

# Fields that only select how JAX computes; never written to config.json.
RUNTIME_FIELDS = ("dtype", "param_dtype", "remat", "scan_layers", "moe_impl",
                   "moe_capacity_factor",
                   "kda_chunk_size", "kda_chunks_per_step", "attention_block_size",
                   "moe_token_chunk")


@dataclasses.dataclass(frozen=True)
class LingConfig:
  """Architecture of a Ling-3 style hybrid KDA/MLA mixture-of-experts LM."""

  vocab_size: int = 157184
  hidden_size: int = 2560
  intermediate_size: int = 6144
  moe_intermediate_size: int = 768
  num_hidden_layers: int = 42
  num_attention_heads: int = 32
  # MLA.
  q_lora_rank: int | None = None
  kv_lora_rank: int = 512
  qk_nope_head_dim: int = 128
  qk_rope_head_dim: int = 64
  v_head_dim: int = 128
  attention_bias: bool = False
  rope_theta: float = 6_000_000.0
  rope_parameters: dict[str, Any] | None = None  # None: default RoPE, no scaling.
  max_position_embeddings: int = 262144
  # KDA.
  linear_head_dim: int = 128
  short_conv_kernel_size: int = 4
  kda_safe_gate: bool = True
  kda_lower_bound: float = -5.0
  # MoE.
  num_local_experts: int = 512
  num_experts_per_tok: int = 8
  n_shared_experts: int = 1
  n_group: int = 8
  topk_group: int = 4
  norm_topk_prob: bool = True
  routed_scaling_factor: float = 2.5
  first_k_dense_replace: int = 2
  # Schedule.
  layer_group_size: int = 6
  layer_types: tuple[str, ...] | None = None
  mlp_layer_types: tuple[str, ...] | None = None
  # Misc.
  rms_norm_eps: float = 1e-6
  hidden_act: str = "silu"
  tie_word_embeddings: bool = False
  num_mtp_layers: int = 1
  pad_token_id: int | None = 156892
  bos_token_id: int | None = None
  eos_token_id: int | list[int] | None = 156895
  # JAX-side options.
  dtype: str = "float32"  # Compute dtype ("float32" or "bfloat16").
  param_dtype: str = "float32"  # Router and KDA gate parameters stay float32.
  remat: bool = False  # Rematerialise each decoder layer in the backward pass.
  scan_layers: bool = True  # Scan over repeated layer groups.
  moe_impl: str = "ragged"  # "ragged" (ragged_dot), "grouped" (capacity) or "dense".
  moe_capacity_factor: float = 1.25  # "grouped": expert slots per even share of tokens.
  kda_chunk_size: int = 64
  kda_chunks_per_step: int = 0  # KDA chunks prepared at a time (0: all; bounds memory).
  # MLA over longer sequences runs blockwise (flash_attention.py); 0 = always dense.
  attention_block_size: int = 512
  # Routed experts run this many positions of each row at a time (0: all at once).
  moe_token_chunk: int = 0

  def __post_init__(self):
    if self.layer_types is None:
      object.__setattr__(self, "layer_types", tuple(
        FULL_ATTENTION if (i + 1) % self.layer_group_size == 0 else LINEAR_ATTENTION
        for i in range(self.num_hidden_layers)))
    if self.mlp_layer_types is None:
      object.__setattr__(self, "mlp_layer_types", tuple(
        DENSE if i < self.first_k_dense_replace else SPARSE
        for i in range(self.num_hidden_layers)))
    object.__setattr__(self, "layer_types", tuple(self.layer_types))
    object.__setattr__(self, "mlp_layer_types", tuple(self.mlp_layer_types))
    self.validate()

  def validate(self) -> None:
    """Raises ValueError when the fields are inconsistent."""
    problems = []
    for name, types, allowed in (
        ("layer_types", self.layer_types, (FULL_ATTENTION, LINEAR_ATTENTION)),
        ("mlp_layer_types", self.mlp_layer_types, (DENSE, SPARSE))):
      if len(types) != self.num_hidden_layers:
        problems.append(f"{name} has {len(types)} entries, expected "
                        f"num_hidden_layers={self.num_hidden_layers}")
      bad = sorted(set(types) - set(allowed))
      if bad:
        problems.append(f"{name} has unknown entries {bad}; allowed {allowed}")
    if self.hidden_act != "silu":
      problems.append(f"hidden_act={self.hidden_act!r}; only 'silu' is supported")
    if SPARSE in self.mlp_layer_types:
      if self.num_local_experts % self.n_group:
        problems.append(f"num_local_experts={self.num_local_experts} is not divisible "
                        f"by n_group={self.n_group}")
      elif self.topk_group * self.num_local_experts // self.n_group < self.num_experts_per_tok:
        problems.append("topk_group groups hold fewer experts than num_experts_per_tok")
    if self.moe_impl not in ("ragged", "grouped", "dense"):
      problems.append(f"moe_impl={self.moe_impl!r}; use 'ragged', 'grouped' or 'dense'")
    if self.moe_capacity_factor <= 0:
      problems.append(f"moe_capacity_factor={self.moe_capacity_factor} must be positive")
    if self.dtype not in ("float32", "bfloat16") or self.param_dtype not in (
        "float32", "bfloat16"):
      problems.append("dtype and param_dtype must be 'float32' or 'bfloat16'")
    if self.qk_rope_head_dim % 2:
      problems.append("qk_rope_head_dim must be even")
    if self.rope_type not in ("default", "yarn"):
      problems.append(f"rope_type={self.rope_type!r}; only 'default' and 'yarn' supported")
    if problems:
      raise ValueError("Invalid LingConfig: " + "; ".join(problems))

  # ---- derived quantities -------------------------------------------------

  @property
  def qk_head_dim(self) -> int:
    return self.qk_nope_head_dim + self.qk_rope_head_dim

  @property
  def rope_type(self) -> str:
    params = self.rope_parameters or {}
    return params.get("rope_type", params.get("type", "default"))

  @property
  def moe_intermediate_shared(self) -> int:
    return self.moe_intermediate_size * self.n_shared_experts

  def layer_kind(self, idx: int) -> tuple[str, str]:
    """(attention type, mlp type) of decoder layer `idx`."""
    return self.layer_types[idx], self.mlp_layer_types[idx]

  def layer_schedule(self) -> tuple[int, int, int]:
    """Splits the stack into unrolled leading layers and repeated groups.

    Returns (num_prefix, period, num_groups): layers [0, num_prefix) are unrolled, and
    layers num_prefix + g * period + j for g < num_groups all share the kind of
    layer num_prefix + j, so their parameters can be stacked and scanned. When no
    periodic tail with at least two repeats exists, everything is unrolled
    (num_groups = 0).
    """
    kinds = [self.layer_kind(i) for i in range(self.num_hidden_layers)]
    n = len(kinds)
    best = (n, 0, 0)
    if not self.scan_layers:
      return best
    for period in range(1, n // 2 + 1):
      start = n % period  # The tail must be a whole number of periods.
      while start + 2 * period <= n:
        block = kinds[start:start + period]
        if all(kinds[i] == block[(i - start) % period] for i in range(start, n)):
          break
        start += period
      else:
        continue
      if start < best[0]:
        best = (start, period, (n - start) // period)
    return best

  @property
  def attention_scale(self) -> float:
    """Softmax scale of MLA: qk_head_dim^-1/2, times YaRN mscale^2 when scaled."""
    scale = self.qk_head_dim ** -0.5
    params = self.rope_parameters or {}
    if self.rope_type != "default" and params.get("mscale_all_dim"):
      m = yarn_mscale(params["factor"], params["mscale_all_dim"])
      scale *= m * m
    return scale

  # ---- config.json --------------------------------------------------------

  @classmethod
  def from_hf_config(cls, hf: dict[str, Any], **overrides) -> "LingConfig":
    """Builds a config from a `bailing_hybrid` config.json dictionary."""
    if hf.get("model_type", "bailing_hybrid") != "bailing_hybrid":
      raise ValueError(f"model_type={hf.get('model_type')!r}; expected 'bailing_hybrid'")
    d = {_HF_ALIASES.get(k, k): v for k, v in hf.items()}
    # transformers writes head_dim = qk_rope_head_dim and keeps the KDA head dim in
    # linear_head_dim; original checkpoints only have head_dim (the KDA head dim).
    if "linear_head_dim" not in d and "head_dim" in d:
      d["linear_head_dim"] = d["head_dim"]
    rope = d.get("rope_parameters") or d.get("rope_scaling")
    if rope is not None:
      rope = dict(rope)
      if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
      if "rope_theta" in rope:
        d["rope_theta"] = rope["rope_theta"]
    d["rope_parameters"] = rope if rope and rope.get("rope_type", "default") != "default" else None
    kv_heads = d.get("num_key_value_heads")
    if kv_heads is not None and kv_heads != d.get("num_attention_heads", kv_heads):
      raise ValueError(f"num_key_value_heads={kv_heads} differs from num_attention_heads; "
                       "MLA here expands the latent to every head")
    names = {f.name for f in dataclasses.fields(cls)} - set(RUNTIME_FIELDS)
    kwargs = {k: v for k, v in d.items() if k in names}
    kwargs.update(overrides)
    return cls(**kwargs)

  def to_hf_config(self) -> dict[str, Any]:
    """A config.json dictionary that transformers' BailingHybridConfig loads."""
    out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
           if f.name not in RUNTIME_FIELDS and f.name != "linear_head_dim"}
    out["layer_types"] = list(self.layer_types)
    out["mlp_layer_types"] = list(self.mlp_layer_types)
    out["head_dim"] = self.linear_head_dim
    out["num_key_value_heads"] = self.num_attention_heads
    rope = dict(self.rope_parameters or {"rope_type": "default"})
    rope["rope_theta"] = self.rope_theta
    out["rope_parameters"] = rope
    out.update(model_type="bailing_hybrid", architectures=["BailingHybridForCausalLM"],
               dtype=self.param_dtype)
    return out

  def replace(self, **changes) -> "LingConfig":
    return dataclasses.replace(self, **changes)


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
  """YaRN attention magnitude correction (DeepSeek form)."""
  if scale <= 1:
    return 1.0
  return 0.1 * mscale * math.log(scale) + 1.0
