"""A training run's folder, shared by RL (rl/loop.py) and SFT (rl/sft.py) training.

    workdir/
      config.json          the resolved config, written once the run has restored or started
                           (a resumed run warns about what changed)
      metrics.jsonl        one row of scalars per step (process 0)
      tensorboard/         the same as TensorBoard events
      checkpoints/<step>/  parameters, optimizer state, step, RNG key, data position, config

    with RunDirectory(workdir, config.to_dict(), CheckpointSettings(every=10),
                      model_config=config.model.to_dict()) as run_dir:
        run = run_dir.restore_or_init(trainer, initial_params, seed=0)
        run_dir.open_metrics(run.iteration)
        ... state = trainer.step(...)
        run_dir.save(step, state, run.rng_key, {"tasks_consumed": ...}, force=last)
        run_dir.write_metrics(step, metrics)

Started again on the same folder, a run resumes from its latest finished checkpoint. A config
whose model does not fit the checkpoints (shapes, dtypes, structure) is refused before anything
in the folder changes, naming the config fields that differ from config.json. With several
processes all save checkpoints together; only the first writes config and metrics.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

from deepswe_jax.checkpoint import CheckpointMismatchError, TrainCheckpoints, restore_target
from deepswe_jax.checkpoint.layout import summarize
from deepswe_jax.model import Qwen3Config
from deepswe_jax.parallel.distributed import is_primary_process
from deepswe_jax.rl.metrics import MetricsWriter
from deepswe_jax.rl.train_step import Trainer, TrainState

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"


@dataclasses.dataclass(frozen=True)
class CheckpointSettings:
    """Save every `every` steps (and when forced), keep the newest `keep`, in the background
    with `async_save` (config.checkpoint)."""

    every: int = 10
    keep: int = 3
    async_save: bool = True


@dataclasses.dataclass(frozen=True)
class RunState:
    """Where a run stands after `iteration` finished steps (what a checkpoint restores):
    tasks_consumed is its data position (tasks of the RL task stream, SFT examples)."""

    train_state: TrainState
    iteration: int
    tasks_consumed: int
    rng_key: jax.Array


def _fields(config: Any, prefix: str = "") -> dict[str, Any]:
    """A json config's leaves keyed by their dotted field name."""
    if not isinstance(config, Mapping):
        return {prefix: config}
    fields: dict[str, Any] = {}
    for key, value in config.items():
        fields.update(_fields(value, f"{prefix}.{key}" if prefix else str(key)))
    return fields


def config_differences(saved: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """'field: saved X, now Y' for each dotted field where two json configs differ."""
    before, after = _fields(saved), _fields(json.loads(json.dumps(config)))
    return [
        f"{field}: saved {before.get(field)!r}, now {after.get(field)!r}"
        for field in sorted(before.keys() | after.keys())
        if before.get(field) != after.get(field)
    ]


def write_config(path: Path, config: Mapping[str, Any]) -> None:
    """Writes the resolved config as json, warning about sections that differ from the file a
    resumed run wrote before."""
    text = json.dumps(config, indent=2, sort_keys=True)
    if path.exists() and path.read_text() != text:
        before = json.loads(path.read_text())
        after = json.loads(text)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        logger.warning("config differs from the one in %s (sections %s)", path, changed)
    path.write_text(text)


class RunDirectory:
    """The folder of the module docstring: config dump, checkpoints, restore, metrics.

    Args:
      workdir: the run's folder (created).
      config: the resolved experiment config as a json-ready mapping (ConfigDict.to_dict()),
        written to config.json and into every checkpoint.
      checkpoint: when to save and how many to keep.
      model_config: the policy's HF config.json fields (a mapping or Qwen3Config), saved with
        every checkpoint so a step folder is also a parameters directory.
    """

    def __init__(
        self,
        workdir: str | os.PathLike,
        config: Mapping[str, Any],
        checkpoint: CheckpointSettings,
        *,
        model_config: Mapping[str, Any] | Qwen3Config,
    ):
        self.workdir = Path(workdir).resolve()
        self.config = config
        self.model_config = model_config
        self.settings = checkpoint
        self.primary = is_primary_process()
        self.checkpoints: TrainCheckpoints | None = None
        self._writer: MetricsWriter | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> RunDirectory:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.checkpoints = self._stack.enter_context(
            TrainCheckpoints(
                self.workdir / CHECKPOINT_DIR,
                every=self.settings.every,
                keep=self.settings.keep,
                async_save=self.settings.async_save,
            )
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def restore_or_init(
        self, trainer: Trainer, initial_params: Callable[[], nnx.State], seed: int
    ) -> RunState:
        """The newest checkpoint that restores (a damaged newer one is skipped with a warning
        naming it and moved aside), onto the trainer's mesh; or a fresh start when there is
        none: `initial_params()` (called only then), fresh optimizer state, the key of `seed`.
        config.json is written after that. Raises CheckpointMismatchError, with the folder
        unchanged, when the checkpoints hold another model than the trainer's."""
        abstract, shardings = trainer.abstract_state, trainer.state_shardings
        try:
            restored = self.checkpoints.restore_newest_intact(
                params=restore_target(abstract.params, shardings.params),
                opt_state=restore_target(abstract.opt_state, shardings.opt_state),
                mesh=trainer.mesh,
            )
        except CheckpointMismatchError as error:
            raise self._mismatch(error) from error
        if self.primary:
            write_config(self.workdir / CONFIG_FILE, self.config)
        if restored is None:
            return RunState(trainer.init_state(initial_params()), 0, 0, jax.random.key(seed))
        position = restored.data_position
        train_state = TrainState(
            step=jax.device_put(np.int32(position["optimizer_steps"]), shardings.step),
            params=restored.params,
            opt_state=restored.opt_state,
        )
        logger.info("resuming from %s", self.checkpoints.step_directory(restored.step))
        return RunState(train_state, restored.step, position["tasks_consumed"], restored.rng_key)

    def _mismatch(self, error: CheckpointMismatchError) -> CheckpointMismatchError:
        """`error` with the config fields that differ from config.json and the ways on."""
        path = self.workdir / CONFIG_FILE
        saved = json.loads(path.read_text()) if path.exists() else {}
        differences = config_differences(saved, self.config) if saved else []
        if differences:
            fields = f"this config differs from {path} in {summarize(differences)}"
        else:
            fields = f"no config field differs from {path} (the mesh or sharding rules?)"
        return CheckpointMismatchError(
            f"{self.workdir} holds a run of another model: {error}; {fields}. Nothing was "
            "changed: run again with the saved config, or give a new workdir"
        )

    def open_metrics(self, resume_step: int) -> None:
        """Opens metrics.jsonl and tensorboard/ (process 0), dropping rows after `resume_step`
        that an interrupted run logged and this one redoes."""
        if self.primary:
            self._writer = self._stack.enter_context(
                MetricsWriter(self.workdir, resume_step=resume_step)
            )

    def write_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Records `metrics` at `step` (process 0; the others have nothing to write)."""
        if self._writer is not None:
            self._writer.write(step, metrics)

    def save(
        self,
        step: int,
        state: TrainState,
        rng_key: jax.Array,
        data_position: Mapping[str, int],
        *,
        force: bool = False,
    ) -> bool:
        """Starts checkpointing `state` as step `step` when due (every k steps) or `force`d;
        returns whether it did. The optimizer-step count is recorded with `data_position` (a
        collective: every process)."""
        return self.checkpoints.save(
            step,
            params=state.params,
            opt_state=state.opt_state,
            rng_key=rng_key,
            data_position={**data_position, "optimizer_steps": int(state.step)},
            model_config=self.model_config,
            config=self.config,
            force=force,
        )

    def check_saved(self) -> None:
        """Raises CheckpointSaveError if the last background save failed (returns at once while
        it is still being written): call at step boundaries, before training on."""
        self.checkpoints.check_saved()

    def wait_until_finished(self) -> None:
        """Blocks until background checkpoint writes are done; a failed one raises
        CheckpointSaveError."""
        self.checkpoints.wait_until_finished()
