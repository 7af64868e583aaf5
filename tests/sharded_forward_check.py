"""Run by test_model_sharding in a subprocess with 8 fake CPU devices.

    python tests/sharded_forward_check.py MOE_IMPL=LAYOUT[,LAYOUT...] [MOE_IMPL=...]

Prints one JSON line: per MoE kernel and mesh layout, the max |sharded - unsharded|
logits difference and the sharding specs of a few parameters. Several kernels in one
process share JAX's start-up and the model construction.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import json  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from rcca_jax.models import LingConfig, LingForCausalLM  # noqa: E402
from rcca_jax.parallel import mesh as mesh_lib  # noqa: E402
from rcca_jax.parallel import partitioning  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

# name -> (mesh, model): experts spread over an `expert` axis with the batch split 8 ways,
# fsdp x tensor, and all three together; hybrid KDA/MLA stacks, scanned and unrolled.
LAYOUTS = {
  "data2_expert4": ("data:2,expert:4", "hybrid_scanned"),
  "fsdp2_tensor4": ("fsdp:2,tensor:4", "hybrid_unrolled"),
  "data2_fsdp2_tensor2": ("data:2,fsdp:2,tensor:2", "hybrid_scanned"),
}


def tiny(moe_impl: str, kind: str) -> LingConfig:
  # Unrolled stacks compile every layer on its own: 4 layers (KDA and MLA, dense then
  # MoE) cover them. Scanned stacks keep 6; their compile does not grow with depth.
  depth = 4 if kind.endswith("unrolled") else 6
  layers = (("full_attention",) * depth if kind.startswith("mla") else None)
  return LingConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                    moe_intermediate_size=32, num_hidden_layers=depth, num_attention_heads=4,
                    kv_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                    linear_head_dim=16, n_group=4, topk_group=2, num_experts_per_tok=3,
                    num_local_experts=16, first_k_dense_replace=1, layer_group_size=2,
                    layer_types=layers, scan_layers=kind.endswith("scanned"), moe_impl=moe_impl,
                    # "grouped": room for every assignment, so the sharded groups drop
                    # nothing and must equal the single-device result.
                    moe_capacity_factor=16.0)


@nnx.jit
def forward(model, ids, mask):
  return model(ids, attention_mask=mask)


def check(moe_impl: str, layouts: list[str]) -> dict:
  """{layout: {kind, max_diff, specs}} of one MoE kernel."""
  ids = jax.random.randint(jax.random.key(1), (8, 12), 2, 128)
  mask = jnp.ones((8, 12), bool).at[1, :4].set(False)
  out = {}
  for name in layouts:
    spec, kind = LAYOUTS[name]
    model = LingForCausalLM(tiny(moe_impl, kind), rngs=nnx.Rngs(0))
    reference = np.asarray(forward(model, ids, mask))
    graphdef, state = nnx.split(model)
    mesh = mesh_lib.make_mesh(spec)
    with jax.set_mesh(mesh):
      sharded = nnx.merge(graphdef, jax.tree.map(jnp.copy, state))
      partitioning.shard_module(sharded, mesh)
      batch = jax.sharding.NamedSharding(mesh, partitioning.logical_to_spec(
        ("batch", None), mesh.axis_names, dict(mesh.shape)))
      logits = forward(sharded, jax.device_put(ids, batch), jax.device_put(mask, batch))
      specs = {
        "w_gate": str(sharded.layers[1].mlp.w_gate[...].sharding.spec
                      if sharded.groups is None else
                      sharded.groups.layers[0].mlp.w_gate[...].sharding.spec),
        "q_proj": str(sharded.layers[1].self_attn.q_proj.kernel[...].sharding.spec
                      if sharded.groups is None else
                      sharded.groups.layers[0].self_attn.q_proj.kernel[...].sharding.spec),
        "logits": str(logits.sharding.spec),
      }
    out[name] = {"kind": kind, "max_diff": float(np.abs(np.asarray(logits) - reference).max()),
                 "specs": specs}
  return out


def main(requests: list[str]):
  assert jax.device_count() == 8, jax.devices()
  out = {}
  for request in requests:
    moe_impl, layouts = request.split("=")
    out[moe_impl] = check(moe_impl, layouts.split(","))
  print(json.dumps(out))


if __name__ == "__main__":
  main(sys.argv[1:])
