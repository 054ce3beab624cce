"""Parameters directories: bare model parameters and their HF model config (`save_params`, for
HF import/export, verifiers and policies), and reading parameters from either such a directory
or a training checkpoint directory (its newest step that restores).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import orbax.checkpoint as ocp

from deepswe_jax.checkpoint.layout import CheckpointMismatchError, check_fits
from deepswe_jax.checkpoint.storage import (
    MODEL_CONFIG,
    PARAMS,
    CorruptCheckpointError,
    abstract_nested,
    from_nested_dict,
    model_config_json,
    to_nested_dict,
)
from deepswe_jax.errors import one_line
from deepswe_jax.model import Qwen3Config

logger = logging.getLogger(__name__)

T = TypeVar("T")


def save_params(
    path: str | os.PathLike, params: Any, *, model_config: Mapping[str, Any] | Qwen3Config
) -> None:
    """Writes `params` (any pytree of arrays) and the HF model config (a Qwen3Config or a
    mapping of config.json fields) to a new directory."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; choose a new --out directory or delete it first")
    items = {
        PARAMS: ocp.args.StandardSave(to_nested_dict(params)),
        MODEL_CONFIG: ocp.args.JsonSave(model_config_json(model_config)),
    }
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        checkpointer.save(path, ocp.args.Composite(**items))


def parameter_directories(path: str | os.PathLike) -> list[str]:
    """The parameters directories `path` offers, best first: `path` itself, or the finished
    steps of a training checkpoint dir, newest first. Raises FileNotFoundError if none."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(os.path.join(path, PARAMS)):
        return [path]
    steps = (
        [int(name) for name in os.listdir(path) if name.isdigit()] if os.path.isdir(path) else []
    )
    directories = [
        os.path.join(path, str(step))
        for step in sorted(steps, reverse=True)
        if os.path.isdir(os.path.join(path, str(step), PARAMS))
    ]
    if not directories:
        raise FileNotFoundError(
            f"{path} holds no Orbax parameters (no '{PARAMS}' item and no finished step folder); "
            "create one with `python -m launch.import_hf --hf_dir=... --out=...`"
        )
    return directories


def params_directory(path: str | os.PathLike) -> str:
    """A parameters directory: `path` itself, or the latest step of a training checkpoint dir."""
    return parameter_directories(path)[0]


def _read_newest_intact(path: str | os.PathLike, read: Callable[[str], T]) -> T:
    """`read(directory)` of the first of `parameter_directories(path)` it succeeds on; each
    failing step is named in a warning. Raises CorruptCheckpointError when all fail."""
    *newer, oldest = parameter_directories(path)
    failures = []
    for directory in newer:
        try:
            return read(directory)
        except CheckpointMismatchError:
            raise  # another model, not damage: the older steps hold it too
        except Exception as error:
            failures.append(f"{directory}: {one_line(error)}")
            logger.warning(
                "checkpoint %s cannot be restored (%s); skipped, trying the step before",
                directory,
                one_line(error),
            )
    try:
        return read(oldest)
    except Exception as error:
        if not failures:  # a parameters directory, or a single step: its own error
            raise
        failures.append(f"{oldest}: {one_line(error)}")
        raise CorruptCheckpointError(
            f"no parameters in {os.fspath(path)} can be restored ({'; '.join(failures)})"
        ) from error


def read_model_config(path: str | os.PathLike) -> dict:
    """The HF config.json fields saved next to the parameters in `path` (see params_directory;
    a training checkpoint dir falls back from a step that cannot be read to the one before)."""

    def read(directory: str) -> dict:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory, ocp.args.Composite(**{MODEL_CONFIG: ocp.args.JsonRestore()})
            )
        return dict(restored[MODEL_CONFIG])

    return _read_newest_intact(path, read)


def restore_params(
    path: str | os.PathLike, abstract_params: Any, *, mesh: jax.sharding.Mesh | None = None
) -> Any:
    """Reads parameters saved by `save_params` or `TrainCheckpoints` (the newest step that
    restores: a damaged one is skipped with a warning naming it). Raises
    CheckpointMismatchError when they have other shapes or structure than `abstract_params`.

    abstract_params: pytree (e.g. nnx.State from nnx.eval_shape) whose leaves carry shape,
    dtype and sharding; the result has its structure and shardings. mesh: as in
    `TrainCheckpoints.restore`.
    """
    target = abstract_nested(abstract_params, mesh)

    def read(directory: str) -> Any:
        check_fits(directory, {PARAMS: target}, dtypes=False)  # a saved dtype is cast
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory, ocp.args.Composite(**{PARAMS: ocp.args.StandardRestore(target)})
            )
        return from_nested_dict(restored[PARAMS], abstract_params)

    return _read_newest_intact(path, read)
