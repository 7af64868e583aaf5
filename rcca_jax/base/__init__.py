"""The shared base layer: the record vocabulary, config mappings, the rubric DSL and the
JS index.

Every package of rcca_jax may import it; it imports no other package of rcca_jax. The
pipeline packages above it import in one direction (data -> sampling -> evaluation ->
credit -> rl -> train), with models and parallel beside them, and `study` (ablations,
sweeps and their reports) above train; `tests/repo/test_layers.py` checks this.
"""
