"""Training checkpoints: the train state every k steps, written in the background by Orbax.

A checkpoint directory holds one folder per step, each with the items (`storage`)
  params        model parameters (nested dict of arrays)
  opt_state     optimizer state (nested dict of arrays)
  model_config  HF Qwen3 config.json fields (json)
  meta          step, RNG key data, data-iterator position (json)
  config        the full experiment config (json)
so a step folder is also a parameters directory (`parameters.restore_params`). Orbax writes
each step into a temporary folder and renames it when complete, so a crash mid-save leaves the
previous step as `latest_step()`.

Faults: a step that no longer restores (damaged after it was written) is skipped with a warning
naming it, for the newest one that does (`TrainCheckpoints.restore_newest_intact`); a step that
holds another model (shapes, dtypes, structure) is refused with nothing moved; a failed
asynchronous save raises `CheckpointSaveError` at the next `check_saved()`, `save()` or
`wait_until_finished()`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import orbax.checkpoint as ocp

from deepswe_jax.checkpoint.layout import CheckpointMismatchError, check_fits
from deepswe_jax.checkpoint.storage import (
    CONFIG,
    META,
    MODEL_CONFIG,
    OPT_STATE,
    PARAMS,
    CorruptCheckpointError,
    abstract_nested,
    from_nested_dict,
    json_ready,
    model_config_json,
    rng_from_json,
    rng_to_json,
    to_nested_dict,
)
from deepswe_jax.errors import one_line
from deepswe_jax.model import Qwen3Config

logger = logging.getLogger(__name__)

# A step folder that no longer restores is renamed <step> + this, out of the step listing.
CORRUPT_SUFFIX = ".corrupt"


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written (e.g. the disk is full); the run must stop."""


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


class TrainCheckpoints:
    """A directory of training checkpoints: async save every `every` steps, keep the last `keep`.

    with TrainCheckpoints(workdir / "checkpoints", every=10, keep=3) as checkpoints:
        checkpoints.save(step, params=..., opt_state=..., rng_key=..., data_position=...,
                         model_config=..., config=...)
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
        model_config: Mapping[str, Any] | Qwen3Config,
        config: Mapping[str, Any],
        force: bool = False,
    ) -> bool:
        """Starts saving `step` if it is due (every k steps) or `force`; returns whether it did.

        With async_save the arrays are copied to host before returning and written in the
        background; call `wait_until_finished()` before reading the step back.
        model_config: the policy's HF config.json fields (a Qwen3Config or a mapping), saved as
          `model_config` so the step folder is a parameters directory (export to HF, sampling).
        config: the experiment config as a plain JSON-ready mapping (ConfigDict.to_dict() at
          the caller), saved as `config`.
        """
        model_config, config = model_config_json(model_config), json_ready(config)
        if self._writing is not None:  # Orbax waits for it anyway; a failure names its step
            self.wait_until_finished()
        items = {
            PARAMS: ocp.args.StandardSave(to_nested_dict(params)),
            OPT_STATE: ocp.args.StandardSave(to_nested_dict(opt_state)),
            MODEL_CONFIG: ocp.args.JsonSave(model_config),
            META: ocp.args.JsonSave(
                {"step": step, "rng": rng_to_json(rng_key), "data_position": dict(data_position)}
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
        warning naming it and, once a step restores, moved aside to `<step>.corrupt` (process
        0), so the run can write that step again. Raises CheckpointMismatchError, with nothing
        moved, when the newest readable step holds arrays of other shapes, dtypes or structure
        than the targets (another config's model); CorruptCheckpointError (every step moved
        aside) when no step restores.
        """
        targets = {
            PARAMS: abstract_nested(params, mesh),
            OPT_STATE: abstract_nested(opt_state, mesh),
        }
        damaged: list[tuple[int, str]] = []
        restored = None
        for step in reversed(self.all_steps()):
            try:
                check_fits(self.step_directory(step), targets)
                restored = self.restore(step, params=params, opt_state=opt_state, mesh=mesh)
                break
            except CheckpointMismatchError:
                raise
            except Exception as error:
                damaged.append((step, one_line(error)))
        for step, error in damaged:
            logger.warning(
                "checkpoint step %d in %s cannot be restored (%s); skipped%s",
                step,
                self.directory,
                error,
                self._move_aside(step),
            )
        if damaged and restored is None:
            failures = "; ".join(f"step {step}: {error}" for step, error in damaged)
            raise CorruptCheckpointError(
                f"no checkpoint in {self.directory} can be restored ({failures}); "
                "move the folder aside to start from scratch, or restore it from a backup"
            )
        return restored

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
            PARAMS: ocp.args.StandardRestore(abstract_nested(params, mesh)),
            OPT_STATE: ocp.args.StandardRestore(abstract_nested(opt_state, mesh)),
            META: ocp.args.JsonRestore(),
            CONFIG: ocp.args.JsonRestore(),
        }
        restored = self._manager.restore(step, args=ocp.args.Composite(**items))
        meta = restored[META]
        return TrainCheckpoint(
            step=int(meta["step"]),
            params=from_nested_dict(restored[PARAMS], params),
            opt_state=from_nested_dict(restored[OPT_STATE], opt_state),
            rng_key=rng_from_json(meta["rng"]),
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
