"""The small-model GRPO-vs-RCCA ablation, controlled setting (docs/ablation.md).

    python -m rcca_jax.study --config=experiments/ablation_small.py \
        --workdir=/tmp/ablation_small --seeds=3

Twelve fixed requests (the first train task of the twelve families with the shortest
apps). Each has one known bug (a mutant of its reference from `credit/mutations.py`,
operators round-robin, one that fails at least one rubric) and a mutant rate
(0.25 / 0.6 / 0.75 / 0.9 round-robin): SFT on 20 targets per request, that share of
them the mutant, so the SFT policy writes each bug at about its rate and greedy decoding
writes it on the requests whose rate is above one half. RL (4 requests x 8 samples per
step) on the same requests must unlearn the bugs; the dev evaluation is greedy on them.
Both arms start from the same SFT checkpoint per seed, with the same prompt order and
sampling seeds; they differ only in `rl.policy_loss` (see `arms`).

The model is tiny_natural's (and the embedded default's) tiny hybrid (one KDA and one MLA layer, hidden 128).
Runtime: about 75 minutes for 3 seeds on 2 CPU cores. Result: greedy dev pass rate
0.25 -> 0.53 in both arms, paired difference 0.00 on every seed
(experiments/results/ablation_small/README.md).
"""

import ml_collections

from experiments import tiny_natural

FAMILIES = ("dark_mode", "char_counter", "counter", "star_rating", "filter_search",
            "temperature_converter", "password_strength", "unit_converter", "calculator",
            "tip_splitter", "pagination", "guess_number")
# The SGD arms' learning rate: a first SGD step about as long as AdamW's first (lr 1e-4).
# benchmarks/credit_mechanism.py on RL batches 0-2 of the seed-0 SFT checkpoint (step
# 200 of 600): |first AdamW update| / |clipped GRPO gradient| = 0.099 / 0.181 / 0.083.
SGD_LR = 0.1
# Fields set to their section default on purpose (tests/experiments/test_experiment_configs.py):
# tiny_natural, which this config builds on, sets them otherwise.
DELIBERATE = ("eval.samples_per_request",)


def get_config() -> ml_collections.ConfigDict:
  config = tiny_natural.get_config()
  config.model.max_position_embeddings = 1024
  config.data.families = FAMILIES
  config.data.setting = "controlled"  # "natural": the families' own train/dev tasks
  # drop_listener is left out: a deletion leaves no code to blame (in pilot A its three
  # mutants were never hit by a direct or context span). `bug_sites` (K_bug) and
  # `neutral_sites` (K_neutral, credit/neutral.py) stay 1 and 0: the one-mutant setting.
  # The task file is DIR/controlled_tasks.jsonl (`path` empty; the runner shares one).
  config.data.controlled.update(families=FAMILIES, path="",
                                operators=("handler_op", "misspell_id", "throw"))
  # `credit` keeps its defaults (credit/blame.py): the diagnostic weights of
  # docs/method.md#5-diagnostic-weights, the blame source ("evaluator" | "placebo" |
  # "oracle" | "sibling_diff") and the weight of the unblamed tokens of
  # negative-advantage responses; the arms change them.
  config.sft.num_steps = 600
  config.sft.max_len = 640  # the longest example is 623 tokens
  config.sft.checkpoint_every = 200
  config.sft.optimizer.warmup_steps = 30
  config.rl.num_steps = 32
  config.rl.group_size = 8
  config.rl.prompts_per_step = 4
  config.rl.max_new_tokens = 464  # the longest target is 441
  config.rl.max_prompt_len = 192
  config.rl.checkpoint_every = 4
  config.rl.optimizer.learning_rate = 1e-4
  config.eval.every_rl_steps = 4
  config.eval.max_new_tokens = 464
  config.eval.num_reports = 2
  # Sampled pass@1 at every dev evaluation (tiny_natural turns it off): samples per
  # request at rl.temperature.
  config.eval.samples_per_request = 8
  # Gate values and the penalty table of docs/method.md#2-gated-reward (evaluation/reward.py
  # field names).
  config.eval.evaluator.reward = ml_collections.ConfigDict(dict(
      format_fail=0.0, source_fail=0.05, runtime_fail=0.10, floor=0.2))
  config.checkpoint.max_to_keep = 1
  # Arms: name -> overrides ("FIELD=VALUE" joined by ";"); `ablation.arms` picks the run.
  config.arms = ml_collections.ConfigDict(dict(
      grpo="rl.policy_loss=grpo",
      rcca="rl.policy_loss=rcca",
      rcca_no_context="rl.policy_loss=rcca;credit.context=1.0",
      rcca_c1="rl.policy_loss=rcca;rl.loss.rcca_c=1.0",
      # Controls (docs/ablation.md#controls): the negative update on blamed code only;
      # blame moved to random places of the same response; blame exactly on the known bug
      # sites.
      rcca_focus="rl.policy_loss=rcca;credit.negative_unblamed=0.0",
      rcca_placebo="rl.policy_loss=rcca;credit.blame=placebo",
      rcca_oracle="rl.policy_loss=rcca;credit.blame=oracle",
      # Why focus wins (issue 36): focus with placebo / oracle blame (location); focus
      # with each failed response's tokens at their mean weight, its total kept
      # (magnitude; the arm keeps the label of the committed results, its loss's former
      # name); focus on the tokens that differ from the group's best response (a
      # model-free localizer); GRPO on each response's 20% highest-entropy tokens.
      rcca_focus_placebo="rl.policy_loss=rcca;credit.blame=placebo;"
                         "credit.negative_unblamed=0.0",
      rcca_focus_oracle="rl.policy_loss=rcca;credit.blame=oracle;"
                        "credit.negative_unblamed=0.0",
      grpo_neg_scaled="rl.policy_loss=rcca_neg_mean;credit.negative_unblamed=0.0",
      sibling_diff_focus="rl.policy_loss=rcca;credit.blame=sibling_diff;"
                         "credit.negative_unblamed=0.0",
      entropy_top20="rl.policy_loss=grpo;rl.loss.entropy_top_fraction=0.2",
      # GRPO with every token of a failed response at one constant weight, no blame at
      # all (the model-free magnitude control). 0.1 matches grpo_neg_scaled's gradient
      # norm: on credit study 2's s3_4 seed-0 first batches |g| / |g_grpo| is 0.11-0.13
      # at 0.1 against 0.08-0.16 for grpo_neg_scaled (failed responses carry 0.97-1.00
      # of GRPO's gradient); 0.3, their token-weight ratio in s1_0, left the gradient
      # GRPO's (cosine 0.99). experiments/results/credit_study2/README.md.
      grpo_neg_const="rl.policy_loss=grpo;rl.loss.negative_scale=0.1",
      # Plain SGD, learning rate SGD_LR (see its note).
      grpo_sgd=f"rl.policy_loss=grpo;rl.optimizer.name=sgd;rl.optimizer.learning_rate={SGD_LR}",
      rcca_sgd=f"rl.policy_loss=rcca;rl.optimizer.name=sgd;rl.optimizer.learning_rate={SGD_LR}",
      # Sequence-level baselines: one mean over all tokens (DAPO's normaliser), and
      # Dr. GRPO (token sums per sequence, advantages not scaled by the group's std).
      grpo_token_mean="rl.policy_loss=grpo;rl.loss.aggregation=token-mean",
      dr_grpo="rl.policy_loss=grpo;rl.loss.aggregation=seq-mean-token-sum;"
              "rl.loss.scale_advantages_by_std=false",
  ))
  config.ablation = ml_collections.ConfigDict(dict(arms="grpo,rcca", bootstrap=2000))
  return config
