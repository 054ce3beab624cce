"""Orbax checkpoints: training state every k steps, and bare parameters for HF import/export.

storage.py     what a checkpoint folder holds and how: item names, pytrees as nested dicts,
               restore targets (`restore_target`), RNG key and configs as JSON
layout.py      whether a checkpoint fits a restore target (mismatch vs damage), from metadata
training.py    `TrainCheckpoints`: asynchronous saves every k steps, the last n kept, restore
               onto another mesh, fallback from a damaged step, failed saves reported
parameters.py  parameters directories (`save_params`, `restore_params`, `read_model_config`),
               a training checkpoint directory read as one
"""

from deepswe_jax.checkpoint.layout import CheckpointMismatchError
from deepswe_jax.checkpoint.parameters import (
    parameter_directories,
    params_directory,
    read_model_config,
    restore_params,
    save_params,
)
from deepswe_jax.checkpoint.storage import CorruptCheckpointError, restore_target
from deepswe_jax.checkpoint.training import (
    CheckpointSaveError,
    TrainCheckpoint,
    TrainCheckpoints,
)

__all__ = [
    "CheckpointMismatchError",
    "CheckpointSaveError",
    "CorruptCheckpointError",
    "TrainCheckpoint",
    "TrainCheckpoints",
    "parameter_directories",
    "params_directory",
    "read_model_config",
    "restore_params",
    "restore_target",
    "save_params",
]
