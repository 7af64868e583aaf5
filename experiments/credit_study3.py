"""Is there a setting where the blame's location matters, beyond the balance of negative
and positive updates? (credit study 3, issue 51)

Whole runs (credit study 2's design: one SFT per seed, every arm from it):

    mkdir -p DIR/multi_bug
    cp experiments/results/credit_sweep/s3_0/controlled_tasks.jsonl DIR/multi_bug/
    python -m rcca_jax.study --config=experiments/credit_study3.py --workdir=DIR --seeds=5

The one-step paired instrument on one setting (experiments/credit_onestep.py; SFT first,
`sft_config` of the setting, as /root/cs3/PILOT.md did for s1_0):

    python -m experiments.credit_onestep --config=experiments/credit_study3.py \
        --setting=low_overlap --checkpoint=DIR/low_overlap/seed_0/sft/checkpoints/sft \
        --arms=setting --batches=N --out=OUT

Credit study 2 found magnitude, not location, in s1_0 and s3_4: focus with its blame
moved to random places did as well as focus, and a constant negative weight did best. In
both settings GRPO localizes by itself: a failed response and the passing responses of
its group are the same text but for the bug (s1_0) or a few sites, so the update of the
tokens they share cancels and what is left is at the bug. The settings below are built
to take that away (all controlled: the exact site metrics apply):

  low_overlap  every response fails, with different rubric scores: s3_4's request set
               (3 bug sites and 4 neutral rewrites per request, the same search and
               seed) with every bug site at SFT rate 0.8, so that a sample is free of
               bugs with probability 0.2^3 = 0.008; a group's positive-advantage
               responses carry bugs too, and hold a failed response's bug fixed at the
               same place (the same text up to it) only by chance, where the 4 neutral
               sites (rate 0.5) before the bugs agree;
  long         long responses with a small blamed share: s1_0's kind (one bug per
               request, the same requests) with every reference padded by 100 unused
               CSS rules (`data.controlled.padding`, credit/controlled.py: ~1,230
               tokens, in the <style> block, before every bug). Measured on the built
               set (the mutants): responses of 1,566-1,636 tokens; the bug site's own
               tokens 0.06-0.86% of them (oracle blame: rcca_focus_oracle); the
               evaluator's blame (direct and context spans) 4.3-12% (71-196 tokens),
               its direct spans alone (`credit.context=1.0`) 0.8-1.3% on three
               requests and 6.8% on password_strength (a whole function is its span);
  multi_bug    several bugs per response at different importance levels: credit
               sweep's s3_0 (3 bug sites per request, SFT rates 0.25-0.9; each bug alone
               takes the reward from 1.0 to 0.5-0.85, one or two rubrics each); the
               existing `bug_sites` > 1 setting covers it, its committed task file is
               reused;
  s1_0, s3_4   credit study 2's settings, as references, with this study's arms.

Arms (`GRID`; `config.arms`, docs/ablation.md#arms for the ones defined before):
  balance   a constant weight on every token of a failed response, no blame
            (`rl.loss.negative_scale` with grpo): grpo_neg0 (0: positive updates only),
            grpo_neg003 (0.03), grpo_neg_const (0.1), grpo_neg03 (0.3), grpo (1);
  location  focus against its placebo (blamed runs moved to random places of the same
            response) at `credit.negative_unblamed` 0 (rcca_focus, rcca_focus_placebo),
            0.3 (rcca_nu03, rcca_nu03_placebo) and 1 (rcca, rcca_placebo);
            rcca_focus_oracle (focus on the known bug sites);
  mass      focus and its placebo with each failed response's gradient mass
            sum_t w_t (1 - p_t) set to 0.1 x GRPO's (`rl.loss.negative_mass`,
            rl/objective.py): rcca_focus_mass01, rcca_focus_mass01_placebo; with
            grpo_neg_const (the same mass spread uniformly) the three differ only in
            where a failed response's mass lies;
  sign      W-REINFORCE (positive updates x 0.1, `rl.loss.positive_scale`; on GRPO's
            group-normalised advantages), negative samples only (grpo_neg_only:
            positive_scale 0) and focus / placebo on negative samples only
            (rcca_focus_neg_only, rcca_focus_neg_only_placebo: no positive update to
            cancel against);
  presets   dapo and dr_grpo: `objective.PRESETS`' loss fields as overrides
            (`preset_arm`; the loss only: DAPO's dynamic sampling and overlong
            shaping are not part of the preset).

Measured shapes (credit_onestep's `batch_properties`, RL batches of 4 x 6 sampled at
seed 0's SFT checkpoint): s1_0 (55 batches) 381 tokens per response, 53% of responses
a combination of the sites ("located"), a located positive response holds a failed
response's bug fixed in 100% of cases and at the same place in 100%, 51% of positive
responses clean; low_overlap (10 batches) 391 tokens, 49% located, fix 45%, same place
5%, 1.9% of positive responses clean, 95% of groups without a clean response. Blamed
share of failed responses' tokens (evaluator): 17% (s1_0), 23% (low_overlap).

Runtime and results: not run as whole runs. The one-step instrument from each
setting's seed-0 SFT (5-13 min each on 2 cores; commands, machine and wall times in
experiments/results/credit_study3/README.md and LOG.md): low_overlap 100 batches x 5
arms (52 min) then 320 x 3, multi_bug 100 x 5 (53 min, shared) then 315 x 3 (~11 s a
batch each, both running), long 750 batches (50 x 4 arms, then 700 x 3; SFT 10-13 min,
~60 s a batch with glibc's malloc, 36-45 s with tcmalloc, 24 s with the blockwise
update and fitted site rows). Failed responses' bugs located site by site
(`credit_onestep.carried_bugs`). Focus − placebo at blamed sites, nats per update (95%
bootstrap over batches): low_overlap +0.005 [+0.002, +0.008] (1,558 batches), multi_bug
+0.007 [+0.004, +0.009] (2,151), long −0.099 [−0.118, −0.078] at 825 blamed sites and
−0.035 [−0.043, −0.027] at all 3,000 (s1_0, 55 batches: +0.045 [+0.003, +0.086]); with
negative updates only, low_overlap −0.016 [−0.028, −0.004] and multi_bug −0.003
[−0.017, +0.012] (100 batches each). No location benefit at the first update in the
short settings, the placebo slightly ahead (but for
negative-only updates in low_overlap); in long responses the placebo loses 31% of
focus's effect. The pilot's negative-only −0.051 (10 batches) shrank to −0.017 at 100.
The whole `GRID` on low_overlap's 100 batches (15 more arms, 49 min;
experiments/results/credit_study3/low_overlap_grid_100/): the bug's margin falls with
the failed responses' weight, −0.025 (1) to −0.111 (0) nats, while focus − placebo stays
within −0.005 at every `negative_unblamed` and with the mass matched. On long (50
batches, 5 arms, 33 min; long_grid_50/) location matters at every level: rcca − placebo
−0.057, mass-matched −0.084, and rcca_focus − grpo_neg_const −0.171 nats at blamed
sites. multi_bug's grid (60 batches, 8 more arms, 38 min; multi_bug_grid_60/) reads as
low_overlap's: −0.035 (1) to −0.115 (0) nats, location contrasts within −0.008.
"""

import ml_collections

from experiments import credit_study2
from rcca_jax.rl import objective

NEG_GRID = {"grpo_neg0": 0.0, "grpo_neg003": 0.03, "grpo_neg_const": 0.1,
            "grpo_neg03": 0.3}
MASS = 0.1
# Independent placebo layouts of one batch (`credit.placebo_draw`), besides draw 0.
PLACEBO_DRAWS = 3
GRID = ("grpo,grpo_neg0,grpo_neg003,grpo_neg_const,grpo_neg03,"
        "rcca_focus,rcca_focus_placebo,rcca_nu03,rcca_nu03_placebo,rcca,rcca_placebo,"
        "rcca_focus_oracle,rcca_focus_mass01,rcca_focus_mass01_placebo,"
        "w_reinforce,grpo_neg_only,rcca_focus_neg_only,rcca_focus_neg_only_placebo,"
        "dapo,dr_grpo")
# The instrument's pilot: the location contrasts and their baselines.
PILOT_ARMS = ("grpo,grpo_neg_const,rcca_focus,rcca_focus_placebo,rcca_focus_mass01,"
              "rcca_focus_mass01_placebo,rcca_focus_neg_only,rcca_focus_neg_only_placebo")
# long: responses up to 1,636 tokens (the longest padded target), prompts up to 192.
LONG_TOKENS = 1792
LONG = (f"sft.max_len={LONG_TOKENS};rl.max_new_tokens={LONG_TOKENS};"
        f"eval.max_new_tokens={LONG_TOKENS};"
        f"model.max_position_embeddings={LONG_TOKENS + 256}")


def preset_arm(name: str) -> str:
  """The overrides of loss preset `name` (`objective.PRESETS`): its policy loss as
  `rl.policy_loss`, its other fields as `rl.loss.FIELD`."""
  parts = []
  for field, value in objective.PRESETS[name].items():
    path = "rl.policy_loss" if field == "policy_loss" else f"rl.loss.{field}"
    parts.append(f"{path}={str(value).lower() if isinstance(value, bool) else value}")
  return ";".join(parts)


def get_config() -> ml_collections.ConfigDict:
  config = credit_study2.get_config()
  focus = "rl.policy_loss=rcca;credit.negative_unblamed=0.0"
  arms = {name: f"rl.policy_loss=grpo;rl.loss.negative_scale={scale}"
          for name, scale in NEG_GRID.items() if name != "grpo_neg_const"}
  arms.update(
      rcca_nu03="rl.policy_loss=rcca;credit.negative_unblamed=0.3",
      rcca_nu03_placebo="rl.policy_loss=rcca;credit.blame=placebo;"
                        "credit.negative_unblamed=0.3",
      rcca_focus_mass01=f"{focus};rl.loss.negative_mass={MASS}",
      rcca_focus_mass01_placebo=f"{focus};credit.blame=placebo;rl.loss.negative_mass={MASS}",
      w_reinforce="rl.policy_loss=grpo;rl.loss.positive_scale=0.1",
      grpo_neg_only="rl.policy_loss=grpo;rl.loss.positive_scale=0.0",
      rcca_focus_neg_only=f"{focus};rl.loss.positive_scale=0.0",
      rcca_focus_neg_only_placebo=f"{focus};credit.blame=placebo;rl.loss.positive_scale=0.0",
      **{f"rcca_focus_placebo_d{k}": f"{focus};credit.blame=placebo;credit.placebo_draw={k}"
         for k in range(1, PLACEBO_DRAWS + 1)},
      dapo=preset_arm("dapo"),
      dr_grpo=preset_arm("dr_grpo"),
  )
  config.arms.update(arms)
  # Each group's prompt once in the update (the tiny hybrid has no router whose
  # balancing would count it differently): the same loss within float32 rounding,
  # 1.3x faster updates on low_overlap's batches.
  config.rl.shared_prefix = True
  config.sweep.settings = "multi_bug,low_overlap,long"
  config.settings = ml_collections.ConfigDict(dict(
      low_overlap="data.controlled.bug_sites=3;data.controlled.neutral_sites=4;"
                  f"data.controlled.rates=0.8;ablation.arms={GRID}",
      long="data.controlled.bug_sites=1;data.controlled.neutral_sites=0;"
           f"data.controlled.padding=100;{LONG};ablation.arms={GRID}",
      multi_bug="data.controlled.bug_sites=3;data.controlled.neutral_sites=0;"
                f"ablation.arms={GRID}",
      s1_0=f"{config.settings.s1_0.split(';ablation.arms=')[0]};ablation.arms={GRID}",
      s3_4=f"{config.settings.s3_4.split(';ablation.arms=')[0]};ablation.arms={GRID}",
  ))
  return config
