"""Studies: the GRPO-vs-RCCA ablation over seeds, sweeps of its settings, and their
reports (docs/ablation.md).

`python -m rcca_jax.study --config=experiments/ablation_small.py --workdir=DIR --seeds=N`
(`__main__`) runs an ablation, or a sweep when the config has `sweep.settings`. The
modules import one way, each only those above it in this list:

  overrides        `FIELD=VALUE;...` overrides: the syntax of arms and settings
  stats            the statistics of runs, pure functions of a summary's arms
  ablation_report  an ablation directory's summary (`collect`), table and plot
  sweep_report     the sweep's table and figure across settings
  ablation         one ablation's runs: their configs, checks and stages, resumably
  sweep            one ablation per setting
  __main__         the command

The package is the top layer of rcca_jax: it imports train and the packages below it,
and none of them imports it (`tests/repo/test_layers.py`). `rcca_jax.ablation`,
`rcca_jax.sweep`, `rcca_jax.sweep_report`, `rcca_jax.ablation_report` and
`rcca_jax.overrides` are aliases of these modules, kept for one release.
"""
