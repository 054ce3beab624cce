"""A sampler process's parts from a config (launch/serve_sampler.py): a checkpoint follower
whose sampler is the one config.sampler describes, on this process's mesh."""

from __future__ import annotations

import os

import jax
import ml_collections

from deepswe_jax.experiment.model import abstract_model, sharding_rules
from deepswe_jax.experiment.training import serving_sampler
from deepswe_jax.model import Qwen3ForCausalLM
from deepswe_jax.sampling.base import Sampler
from deepswe_jax.sampling.checkpoint_follower import CheckpointFollower


def checkpoint_follower(
    config: ml_collections.ConfigDict,
    checkpoint_dir: str | os.PathLike,
    mesh: jax.sharding.Mesh,
    *,
    status_file: str | os.PathLike | None = None,
) -> CheckpointFollower:
    """A CheckpointFollower of the trainer's `checkpoint_dir` for config.model, serving on
    `mesh` (any shape) through `serving_sampler(config, ...)` seeded with config.seed."""
    rules = sharding_rules(config)

    def sampler_for(model: Qwen3ForCausalLM) -> Sampler:
        return serving_sampler(config, model, mesh, rules, config.seed)

    return CheckpointFollower(
        checkpoint_dir,
        abstract_model(config),
        mesh=mesh,
        rules=rules,
        make_sampler=sampler_for,
        status_file=status_file,
    )
