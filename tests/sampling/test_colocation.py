"""Colocation settings that need no engine: JAX's memory fraction is exported before JAX starts,
rollouts go to the processes that own an engine, and JaxSampler refuses shared engines."""

import os

import pytest

from configs import tiny
from deepswe_jax.experiment import apply_jax_memory_settings, make_sampler
from deepswe_jax.rl import loop


def test_jax_memory_fraction_becomes_xla_client_setting(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    config = tiny.get_config()
    apply_jax_memory_settings(config)  # 0: JAX's default, nothing set
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ
    config.sampler.jax_memory_fraction = 0.55
    apply_jax_memory_settings(config)
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.550"
    config.sampler.jax_memory_fraction = 1.0
    with pytest.raises(ValueError, match="jax_memory_fraction=1.0 must lie in"):
        apply_jax_memory_settings(config)


def test_only_engine_owners_roll_out(monkeypatch):
    """Every task goes whole to exactly one engine owner: a group's rollouts and an episode's
    turns all reach the engine that caches their prefixes (session affinity)."""
    tasks = list(range(6))
    monkeypatch.setattr(loop.jax, "process_count", lambda: 4)
    shares = {}
    for index in range(4):
        monkeypatch.setattr(loop.jax, "process_index", lambda index=index: index)
        shares[index] = loop.rollout_share(tasks, processes_per_engine=2)
    assert shares == {0: [0, 2, 4], 1: [], 2: [1, 3, 5], 3: []}
    assert sorted(task for share in shares.values() for task in share) == tasks


def test_jax_sampler_refuses_a_shared_engine():
    config = tiny.get_config()
    config.sampler.processes_per_engine = 2
    with pytest.raises(ValueError, match="processes_per_engine applies to kind='vllm'"):
        make_sampler(config, None, None, (), seed=0)
