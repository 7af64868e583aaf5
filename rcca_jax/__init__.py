"""rcca_jax: Rubric-to-Code Credit Assignment for RL on code LLMs that write web apps.

Pipeline: data -> sampling -> evaluation -> credit -> rl, with models and parallel beside.
"""

__version__ = "0.1.0"
