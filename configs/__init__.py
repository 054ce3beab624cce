"""Experiment configs: each module's `get_config()` returns an ml_collections.ConfigDict."""
