"""rcca_jax: Rubric-to-Code Credit Assignment for RL on code LLMs that write web apps.

Pipeline: data -> sampling -> evaluation -> credit -> rl -> train, with models and
parallel beside; `study` (ablations, sweeps) runs it.
"""

__version__ = "0.1.0"
