"""Experiment configurations (ml_collections files, loaded with config_flags)."""
