"""Orbax checkpoints: training state every k steps, and bare parameters for HF import/export.

A training checkpoint directory holds one folder per step, each with the items
  params        model parameters (nested dict of arrays)
  opt_state     optimizer state (nested dict of arrays)
  model_config  HF Qwen3 config.json fields (json)
  meta          step, RNG key data, data-iterator position (json)
  config        the full experiment config (json)
A parameters directory (`save_params`) holds only `params` and `model_config`, so a training
step folder is also a valid parameters directory.

Arrays are saved from any pytree (nnx.State, optax state, dicts) as a nested dict keyed by the
pytree path, and restored into the structure and shardings of an abstract target (build one
with `restore_target(nnx.eval_shape(...) state, parallel.state_shardings(...))`): a checkpoint
saved on one mesh restores onto another. Orbax writes each step into a temporary folder and
renames it when complete, so a crash mid-save leaves the previous step as `latest_step()`.

Faults: a step that no longer restores (damaged after it was written) is skipped with a warning
naming it, for the newest one that does (`TrainCheckpoints.restore_newest_intact`, and
`restore_params` / `read_model_config` on a training checkpoint directory); a failed
asynchronous save raises `CheckpointSaveError` at the next `check_saved()`, `save()` or
`wait_until_finished()`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from deepswe_jax.errors import one_line

logger = logging.getLogger(__name__)

T = TypeVar("T")

PARAMS = "params"
OPT_STATE = "opt_state"
MODEL_CONFIG = "model_config"
META = "meta"
CONFIG = "config"
# A step folder that no longer restores is renamed <step> + this, out of the step listing.
CORRUPT_SUFFIX = ".corrupt"


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written (e.g. the disk is full); the run must stop."""


class CorruptCheckpointError(RuntimeError):
    """No saved step of a checkpoint directory can be restored."""


@dataclasses.dataclass(frozen=True)
class TrainCheckpoint:
    """One restored training step.

    params, opt_state: pytrees shaped like the restore targets, on the targets' shardings.
    rng_key: the saved PRNG key (typed key if a typed key was saved, else raw uint32 data).
    data_position: the data iterator's position as saved (json-compatible dict).
    config: the experiment config as saved (plain dict).
    """

    step: int
    params: Any
    opt_state: Any
    rng_key: jax.Array
    data_position: dict
    config: dict


def _key_name(entry: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    raise TypeError(f"unsupported pytree path entry {entry!r}")


def _plain(tree: Any) -> Any:
    """nnx.State -> nested dict of arrays (no Variable wrappers); other pytrees unchanged."""
    return nnx.to_pure_dict(tree) if isinstance(tree, nnx.State) else tree


def _to_nested_dict(tree: Any) -> dict:
    """Any pytree -> nested dict with string keys (its pytree path), the leaves unchanged."""
    nested: dict = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(_plain(tree))[0]:
        names = [_key_name(entry) for entry in path] or ["value"]
        node = nested
        for name in names[:-1]:
            node = node.setdefault(name, {})
        node[names[-1]] = leaf
    return nested


def _from_nested_dict(nested: dict, target: Any) -> Any:
    """Inverse of `_to_nested_dict`: the leaves of `nested` in the structure of `target`."""

    def lookup(path: tuple, _: Any) -> Any:
        node = nested
        for name in [_key_name(entry) for entry in path] or ["value"]:
            node = node[name]
        return node

    plain = jax.tree_util.tree_map_with_path(lookup, _plain(target))
    if isinstance(target, nnx.State):
        state = jax.tree.map(lambda x: x, target)
        nnx.replace_by_pure_dict(state, plain)
        return state
    return plain


def _abstract(leaf: Any, mesh: jax.sharding.Mesh | None) -> jax.ShapeDtypeStruct:
    """A restore target leaf: shape, dtype and the (concrete) sharding to restore onto.

    With `mesh`, a NamedSharding on an abstract mesh (what jax.eval_shape returns) is placed on
    `mesh`, and a leaf without sharding is replicated over `mesh`.
    """
    sharding = getattr(leaf, "sharding", None)
    if mesh is not None:
        if sharding is None:
            sharding = NamedSharding(mesh, PartitionSpec())
        elif isinstance(sharding, NamedSharding) and not isinstance(
            sharding.mesh, jax.sharding.Mesh
        ):
            sharding = NamedSharding(mesh, sharding.spec)
    if sharding is None or (
        isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, jax.sharding.Mesh)
    ):
        raise ValueError(
            f"restore target leaf {leaf!r} has no concrete sharding; pass mesh=... or build the "
            "target with jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))"
        )
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)


def _abstract_nested(target: Any, mesh: jax.sharding.Mesh | None) -> dict:
    return jax.tree.map(lambda leaf: _abstract(leaf, mesh), _to_nested_dict(target))


def restore_target(abstract: Any, shardings: Any) -> Any:
    """Pair an abstract state with its shardings into a restore target.

    abstract: nnx.State / pytree of jax.ShapeDtypeStruct (from nnx.eval_shape / jax.eval_shape).
    shardings: the same tree with a Sharding per array (e.g. deepswe_jax.parallel.state_shardings).
    """

    def with_sharding(leaf: Any, sharding: jax.sharding.Sharding) -> Any:
        if isinstance(leaf, nnx.Variable):
            value = leaf.get_value()
            return leaf.replace(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return jax.tree.map(
        with_sharding, abstract, shardings, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )


def _rng_to_json(rng_key: jax.Array) -> dict:
    if jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        impl = str(jax.random.key_impl(rng_key))
        data = np.asarray(jax.random.key_data(rng_key))
    else:
        impl, data = "", np.asarray(rng_key)
    return {"impl": impl, "data": data.tolist(), "dtype": str(data.dtype)}


def _rng_from_json(saved: dict) -> jax.Array:
    data = jax.numpy.asarray(np.asarray(saved["data"], dtype=saved["dtype"]))
    return jax.random.wrap_key_data(data, impl=saved["impl"]) if saved["impl"] else data


def _json_ready(config: Any) -> dict:
    """ConfigDict / Mapping -> plain json-compatible dict (tuples become lists)."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    return jax.tree.map(
        lambda x: x.item() if isinstance(x, np.generic) else x,
        dict(config),
        is_leaf=lambda x: isinstance(x, tuple),
    )


class TrainCheckpoints:
    """A directory of training checkpoints: async save every `every` steps, keep the last `keep`.

    with TrainCheckpoints(workdir / "checkpoints", every=10, keep=3) as checkpoints:
        checkpoints.save(step, params=..., opt_state=..., rng_key=..., data_position=..., config=...)
        restored = checkpoints.restore(params=abstract_params, opt_state=abstract_opt_state)
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        every: int = 1,
        keep: int = 3,
        async_save: bool = True,
    ):
        if every < 1 or keep < 1:
            raise ValueError(f"checkpoint every={every} and keep={keep} must both be >= 1")
        self.directory = os.path.abspath(os.fspath(directory))
        self.every = every
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            save_interval_steps=every,
            enable_async_checkpointing=async_save,
            cleanup_tmp_directories=True,
        )
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=options,
            item_names=(PARAMS, OPT_STATE, MODEL_CONFIG, META, CONFIG),
        )
        self._writing: int | None = None  # the step an asynchronous save may still be writing

    def latest_step(self) -> int | None:
        """The newest fully written step (never one whose save was interrupted), or None."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def should_save(self, step: int) -> bool:
        return self._manager.should_save(step)

    def save(
        self,
        step: int,
        *,
        params: Any,
        opt_state: Any,
        rng_key: jax.Array,
        data_position: Mapping[str, Any],
        config: Any,
        force: bool = False,
    ) -> bool:
        """Starts saving `step` if it is due (every k steps) or `force`; returns whether it did.

        With async_save the arrays are copied to host before returning and written in the
        background; call `wait_until_finished()` before reading the step back.
        config: the experiment ConfigDict (or a mapping); its `model` field is saved as
        `model_config` so the step folder can be exported to HF.
        """
        config = _json_ready(config)
        if self._writing is not None:  # Orbax waits for it anyway; a failure names its step
            self.wait_until_finished()
        items = {
            PARAMS: ocp.args.StandardSave(_to_nested_dict(params)),
            OPT_STATE: ocp.args.StandardSave(_to_nested_dict(opt_state)),
            MODEL_CONFIG: ocp.args.JsonSave(dict(config.get("model", {}))),
            META: ocp.args.JsonSave(
                {"step": step, "rng": _rng_to_json(rng_key), "data_position": dict(data_position)}
            ),
            CONFIG: ocp.args.JsonSave(config),
        }
        with self._save_errors(step):
            started = self._manager.save(step, args=ocp.args.Composite(**items), force=force)
        if started:
            self._writing = step
            self.check_saved()  # a synchronous save is done: check it now
        return started

    def check_saved(self) -> None:
        """Raises CheckpointSaveError if the last save failed; returns at once while it is still
        being written. Call at step boundaries so a failed background save stops the run there."""
        if self._writing is not None and not self._manager.is_saving_in_progress():
            self.wait_until_finished()

    @contextlib.contextmanager
    def _save_errors(self, step: int) -> Iterator[None]:
        """Turns an error of saving `step` into one clear CheckpointSaveError."""
        try:
            yield
        except Exception as error:
            self._manager.reload()
            latest = self.latest_step()
            resume = f"step {latest}" if latest is not None else "the start"
            raise CheckpointSaveError(
                f"saving checkpoint step {step} in {self.directory} failed ({one_line(error)}); "
                f"the run stops here. Fix the cause (a full disk? `df -h {self.directory}`) and "
                f"run again: it resumes from {resume}"
            ) from error

    def restore_newest_intact(
        self, *, params: Any, opt_state: Any, mesh: jax.sharding.Mesh | None = None
    ) -> TrainCheckpoint | None:
        """`restore` of the newest step that restores, or None when there is no step.

        A step that fails to restore (files damaged after it was written) is skipped with a
        warning naming it and moved aside to `<step>.corrupt` (process 0), so the run can write
        that step again. Raises CorruptCheckpointError when every step fails.
        """
        failures = []
        for step in reversed(self.all_steps()):
            try:
                return self.restore(step, params=params, opt_state=opt_state, mesh=mesh)
            except Exception as error:
                failures.append(f"step {step}: {one_line(error)}")
                logger.warning(
                    "checkpoint step %d in %s cannot be restored (%s); skipped, trying the step "
                    "before%s",
                    step,
                    self.directory,
                    one_line(error),
                    self._move_aside(step),
                )
        if failures:
            raise CorruptCheckpointError(
                f"no checkpoint in {self.directory} can be restored ({'; '.join(failures)}); "
                "move the folder aside to start from scratch, or restore it from a backup"
            )
        return None

    def _move_aside(self, step: int) -> str:
        """Renames step `step`'s folder out of the step listing; says where, for the warning."""
        if jax.process_index() != 0:
            return ""
        source = self.step_directory(step)
        target = source + CORRUPT_SUFFIX
        while os.path.exists(target):
            target += CORRUPT_SUFFIX
        os.rename(source, target)
        self._manager.reload()
        return f" (moved to {target})"

    def restore(
        self,
        step: int | None = None,
        *,
        params: Any,
        opt_state: Any,
        mesh: jax.sharding.Mesh | None = None,
    ) -> TrainCheckpoint:
        """Restores `step` (default: the latest) onto the shardings of the abstract targets.

        params, opt_state: pytrees (nnx.State, optax state, ...) whose leaves carry shape,
        dtype and sharding (jax.ShapeDtypeStruct with sharding=..., or live arrays). The mesh
        may differ from the one the checkpoint was saved on. mesh: the current mesh, for leaves
        whose sharding names only an abstract mesh (jax.eval_shape output) or is missing
        (replicated).
        """
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(
                    f"no finished checkpoint in {self.directory}; start from scratch "
                    "(config.init_from='') or point to a directory with saved steps"
                )
        items = {
            PARAMS: ocp.args.StandardRestore(_abstract_nested(params, mesh)),
            OPT_STATE: ocp.args.StandardRestore(_abstract_nested(opt_state, mesh)),
            META: ocp.args.JsonRestore(),
            CONFIG: ocp.args.JsonRestore(),
        }
        restored = self._manager.restore(step, args=ocp.args.Composite(**items))
        meta = restored[META]
        return TrainCheckpoint(
            step=int(meta["step"]),
            params=_from_nested_dict(restored[PARAMS], params),
            opt_state=_from_nested_dict(restored[OPT_STATE], opt_state),
            rng_key=_rng_from_json(meta["rng"]),
            data_position=meta["data_position"],
            config=restored[CONFIG],
        )

    def step_directory(self, step: int) -> str:
        """The folder of a finished step; it is also a parameters directory (`restore_params`)."""
        return os.path.join(self.directory, str(step))

    def wait_until_finished(self) -> None:
        """Blocks until the last save is written; raises CheckpointSaveError if it failed."""
        step, self._writing = self._writing, None
        if step is None:
            self._manager.wait_until_finished()
            return
        with self._save_errors(step):
            self._manager.wait_until_finished()
            self._manager.reload()
            if step not in self._manager.all_steps():
                raise FileNotFoundError(f"no folder for step {step} after its save ended")

    def close(self) -> None:
        """Finishes the last save (CheckpointSaveError if it failed) and releases the manager."""
        try:
            self.wait_until_finished()
        finally:
            self._manager.close()

    def __enter__(self) -> TrainCheckpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def save_params(path: str | os.PathLike, params: Any, *, model_config: Mapping[str, Any]) -> None:
    """Writes `params` (any pytree of arrays) and the HF model config to a new directory."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; choose a new --out directory or delete it first")
    items = {
        PARAMS: ocp.args.StandardSave(_to_nested_dict(params)),
        MODEL_CONFIG: ocp.args.JsonSave(_json_ready(model_config)),
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
    restores: a damaged one is skipped with a warning naming it).

    abstract_params: pytree (e.g. nnx.State from nnx.eval_shape) whose leaves carry shape,
    dtype and sharding; the result has its structure and shardings. mesh: as in
    `TrainCheckpoints.restore`.
    """
    target = _abstract_nested(abstract_params, mesh)

    def read(directory: str) -> Any:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory, ocp.args.Composite(**{PARAMS: ocp.args.StandardRestore(target)})
            )
        return _from_nested_dict(restored[PARAMS], abstract_params)

    return _read_newest_intact(path, read)
