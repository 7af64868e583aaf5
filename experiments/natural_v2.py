"""The natural setting, second attempt (issue 54): families that force copying, a small
dense Llama trained from scratch, base -> SFT -> RL on the policy's own mistakes.

    python -m rcca_jax.main --config=experiments/natural_v2.py:pilot --workdir=/tmp/nv2_pilot

Families (`rcca_jax/data/families/copying.py`): counter_copy, char_counter_copy and
dark_mode_copy are trained; reveal_copy and greeting_copy are held-out test families.
Every id is `ROLE-W1-W2` with two of 918 single-token pool words, labels are pool words,
numbers and colours come from wide ranges, so memorizing cannot lower the loss: the SFT
loss has a floor of 0.24-0.32 nats per response token (by family) for a policy that does
not copy (`copying.no_copy_floor`). Dev requests: per family `data.fresh.dev_per_family`
whose ids are new compounds of train words, and `novel_dev_per_family` whose ids are
made of words no train request has. Every dev evaluation reports, besides greedy pass,
the teacher-forced copy metrics (`train.copy_metrics`: `copy/dev/copied_w1`, ...).

Pilot (`:pilot`, SFT only): its copy curve is in experiments/results/natural_v2/.

The study (`:rl`), per arm and seed:
    python -m rcca_jax.study --config=experiments/natural_v2.py:rl --workdir=DIR --seeds=3
Runtime: 17-37 min per run of 200 steps on 2 CPU cores (about 6 s per step alone).
Result (3 seeds per arm; greedy pass on 60 dev requests never trained on, 0.183 after
SFT): GRPO +0.144 [+0.133, +0.167], grpo_neg_const, rcca and rcca_focus +0.139,
rcca_focus_placebo +0.117; no credit arm differs from GRPO paired by seed
(experiments/results/natural_v2/README.md, "The study, complete").
"""

import ml_collections

from experiments import ablation_small
from experiments import natural_small
from rcca_jax.train import sections

FAMILIES = ("counter_copy", "char_counter_copy", "dark_mode_copy")
TEST_FAMILIES = ("reveal_copy", "greeting_copy")
PRESETS = ("pilot", "pilot_echo", "drill", "curriculum", "labels", "teacher", "teacher_last",
           "rl", "demo")
# The copy curriculum's first stage (`python -m experiments.copy_pretrain --out=...`):
# `curriculum` starts from it (`--config.init_from_hf=DIR` for another place).
COPY_POLICY = "/tmp/nv2/copy_policy"
# The five families' copy drill (`copy_pretrain --framed_families=...`, the fourth
# session's `mix1`): `teacher` starts from it.
APPS_POLICY = "/tmp/nv2/apps_policy"
# The imperfect teacher of "teacher" and "rl" (families/copying.Teacher): half the
# requests insist on their ids; a train reference of one that does not ignores them 70%
# of the time, so the SFT policy honors such ids on some samples and not others.
TEACHER = dict(insist_share=0.5, loose_ignore=0.7)
# The same with every request's ids in one closing list ("teacher_last", "rl"): the SFT
# policies copy an id by its distance back from the answer, which the list keeps short
# and steady (families/copying.Drafting).
TEACHER_LAST = dict(TEACHER, ids_last=True)
# The chosen SFT checkpoint's parameters (experiments/natural_v2_select.py --pack).
SFT_POLICY = "experiments/results/natural_v2/sft_policy"
ARMS = "grpo,grpo_neg_const,rcca,rcca_focus,rcca_focus_placebo"
# What the study's summary keeps of each evaluation (`ablation_report.point_keys`): pass
# and gates per split (dev: ids of train words, where the gain target holds) and family,
# pass@k and distinct passing apps (post-SFT and the end), copy rates and entropies.
POINT_KEYS = ("split/*", "*_copy/pass_rate", "*_copy/gates_pass", "gates_pass",
              "pass_at_*", "pass_at_1_tasks", "samples_per_request",
              "distinct_passing_mean", "sampled_*", "copy/*/copied_*", "copy/*/entropy_*")


def get_config(preset: str = "pilot") -> ml_collections.ConfigDict:
  """Presets: "pilot" (SFT from scratch alone, a dev evaluation with the copy metrics
  every 250 steps), "pilot_echo" (the same with the copying drill `echo_copy`, empty
  divs of the request's ids, as a fourth SFT family), "drill" (SFT on the drill alone,
  short examples: can this policy learn to copy pool-word ids at all?), "curriculum"
  (stage 2: the apps and `echo_short_copy` from the copy-pretrained policy), "labels"
  (stage 2 continued with the label drill `echo_label_copy`), "teacher" (SFT of the
  five families from `APPS_POLICY` on an imperfect teacher's references, `TEACHER`),
  "teacher_last" (the same with the ids closing each request, `TEACHER_LAST`), "rl"
  (the study: RL from the packed SFT policy, `SFT_POLICY`, with dynamic sampling and
  flat groups dropped; `python -m rcca_jax.study` runs `ARMS`, one shared start, the
  seeds differing in RL prompts and sampling) and "demo" (`make demo-natural`: one
  arm of "rl", 50 steps, evaluated every 25)."""
  if preset not in PRESETS:
    raise ValueError(f"preset {preset!r}: expected one of {PRESETS}")
  config = sections.defaults_config()
  config.model = natural_small.model_config()
  config.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, expert=1, tensor=1))
  config.data.update(tokenizer="data/tokenizer", train_tasks="", families=FAMILIES)
  config.data.fresh.update(train_per_family=20000, dev_per_family=12,
                           novel_dev_per_family=6, exclude=())
  config.sft.update(num_steps=6000, batch_size=8, max_len=448, checkpoint_every=250)
  config.checkpoint.max_to_keep = 40  # every SFT checkpoint: the RL start is chosen by measurement
  config.sft.optimizer.update(learning_rate=3e-3, warmup_steps=100, end_lr_ratio=0.05,
                              weight_decay=0.0)
  config.rl.update(num_steps=0, group_size=8, prompts_per_step=2, max_new_tokens=320,
                   max_prompt_len=160)
  config.rl.optimizer.update(learning_rate=2e-5, end_lr_ratio=1.0, weight_decay=0.0)
  config.eval.update(every_sft_steps=250, every_rl_steps=10,
                     max_new_tokens=320, samples_per_request=0)
  config.eval.evaluator.update(response_deadline=30.0, rubric_timeout=10.0)
  config.arms = ablation_small.get_config().arms
  if preset == "pilot_echo":
    config.data.families = FAMILIES + ("echo_copy",)
  if preset == "drill":
    config.data.families = ("echo_copy",)
    config.sft.max_len = 288
    config.rl.update(max_new_tokens=160, max_prompt_len=144)
    config.eval.max_new_tokens = 160
  if preset == "curriculum":
    config.init_from_hf = COPY_POLICY
    config.data.families = FAMILIES + ("echo_short_copy",)
  if preset == "labels":
    # Stage 2 continued from its packed policy (`--config.init_from_hf=DIR`, required)
    # with the label drill: labels have no role before them, so the apps' induction
    # does not copy them (teacher-forced 0.00 after 2,000 stage-2 steps).
    config.data.families = FAMILIES + ("echo_short_copy", "echo_label_copy")
    config.sft.num_steps = 3000
    config.sft.optimizer.update(learning_rate=1e-3, warmup_steps=50)
  if preset in ("teacher", "teacher_last"):
    config.init_from_hf = APPS_POLICY
    config.data.families = FAMILIES + ("echo_short_copy", "echo_label_copy")
    config.data.fresh.update(TEACHER if preset == "teacher" else TEACHER_LAST)
    # The insisting sentence: 6 more tokens; the closing list of ids: up to 20 more.
    config.rl.max_prompt_len = 176 if preset == "teacher" else 208
    config.sft.max_len = 448 if preset == "teacher" else 480
    config.sft.num_steps = 2000
    config.sft.optimizer.update(learning_rate=1e-3, warmup_steps=50)
    config.eval.every_sft_steps = 500
  if preset in ("rl", "demo"):
    config.init_from_hf = SFT_POLICY
    # The curriculum's SFT families (the apps and its two drills), the requests of the
    # teacher_last SFT (ids last; half insist on them).
    config.data.families = FAMILIES + ("echo_short_copy", "echo_label_copy")
    config.data.fresh.update(TEACHER_LAST)
    config.rl.max_prompt_len = 208
    config.sft.num_steps = 0
    # RL prompts need no SFT-sized pool; dev is the select's (the RL start's conditions
    # and the RL curve on the same 60 train-word and 30 novel-word requests), evaluated
    # every 25 steps.
    config.data.fresh.update(train_per_family=2000, dev_per_family=12,
                             novel_dev_per_family=6)
    config.eval.every_rl_steps = 25
    if preset == "rl":  # pass@1/4/8/16 from 16 samples per dev request at RL's start and end
      config.eval.end_samples_per_request = 16
    config.rl.update(num_steps=200, flat_groups="drop", resample_flat_rounds=3)
    # The pilot from the packed policy (GRPO, one seed): at 1e-4 greedy dev pass on
    # train-word ids rose 0.18 -> 0.33 in 60 steps (README, seventh session); 1e-3
    # eroded an earlier start.
    config.rl.optimizer.learning_rate = 1e-4
    # The first attempt's erosion (greedy gates 0.97 -> 0.82-0.84) against a reference
    # KL: GRPO with a k3 penalty toward the start (the packed policy: `fresh_state`).
    config.arms.grpo_kl = "rl.policy_loss=grpo;rl.loss.kl_beta=0.02"
    config.ablation = ml_collections.ConfigDict(dict(arms=ARMS, bootstrap=2000,
                                                     shared_sft=True,
                                                     point_keys=POINT_KEYS))
  if preset == "demo":
    # The study's GRPO arm, seed 0, for 50 steps: greedy dev pass and the splits at
    # RL steps 0, 25 and 50 (no sampled pass@k: minutes the demo does without).
    config.rl.policy_loss = "grpo"
    config.rl.num_steps = 50
  return config
