"""The RL loop under faults (issue 17): a torn metrics line and a restart without a finished
checkpoint, a corrupt latest checkpoint, a failed asynchronous save, an iteration without a
usable episode, and an invalid config.

Runs in-process on test_loop's scripted pieces (ScriptedSampler, in-memory environment pool)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess

import jax
import pytest
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.checkpoint import (
    CheckpointSaveError,
    TrainCheckpoints,
    read_model_config,
    restore_params,
)
from deepswe_jax.experiment import model_factory, train
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl import loop
from deepswe_jax.rl.loop import update_policy
from deepswe_jax.rl.metrics import METRICS_FILE, read_metrics
from tests.rl.test_loop import (
    TOKENIZER_DIR,
    MemoryPool,
    alternating_sampler,
    make_task,
    scripted_config,
)

TASKS = [make_task(0), make_task(1)]


def run(workdir, total_steps: int, **overrides):
    """The scripted loop for `total_steps` iterations in `workdir`; returns the final state."""
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    pieces = dict(sampler=alternating_sampler(tokenizer), env_pool=MemoryPool(), tasks=TASKS)
    pieces.update(overrides)
    config = scripted_config(total_steps)
    config.rl.micro_batch_size = 8  # one row per fake device (tests/conftest.py: 8 devices)
    return train(config, workdir, show_progress=False, **pieces)


def test_restart_without_a_finished_checkpoint_and_a_torn_metrics_line(tmp_path, caplog):
    """A run killed before its first checkpoint finished left step 1's row and a torn step-2
    line: the restart redoes steps 1 and 2 and logs each once (before: 1, 1, 2 and a
    JSONDecodeError naming no file)."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    step_1 = {"step": 1, "rollout/reward_mean": 0.25}
    (workdir / METRICS_FILE).write_text(json.dumps(step_1) + '\n{"step": 2, "rollout/rew')
    with caplog.at_level(logging.WARNING, logger="deepswe_jax"):
        run(workdir, 2)
    assert [row["step"] for row in read_metrics(workdir)] == [1, 2]
    assert read_metrics(workdir)[0]["rollout/reward_mean"] == 0.5  # the redone step's row
    assert f"{workdir / METRICS_FILE}:2 is not a whole metrics row" in caplog.text


def test_an_invalid_config_leaves_no_workdir(tmp_path):
    """Each value is refused before the work directory, the model or the sampler exist (before:
    tasks_per_step=0 was found at the first rollout, the directory left behind)."""
    refused = {
        "rl.tasks_per_step": (0, "config.rl.tasks_per_step=0 must be between 1 and"),
        "rl.n_rollouts": (0, r"config.rl.n_rollouts=0 must be above 0"),
        "rl.total_steps": (-1, r"config.rl.total_steps=-1 must be at least 0"),
        "checkpoint.every": (0, r"config.checkpoint.every=0 must be above 0"),
        "agent.step_timeout": (0.0, r"config.agent.step_timeout=0.0 must be above 0"),
        "sampler.kind": ("jaxx", "config.sampler.kind='jaxx'"),
        "rl.mini_batches": (3, "config.rl.mini_batches=3 must divide config.rl.tasks_per_step=2"),
    }
    for name, (value, message) in refused.items():
        config = scripted_config(1)
        section, field = name.split(".")
        config[section][field] = value
        workdir = tmp_path / name
        with pytest.raises(ValueError, match=message):
            train(config, workdir, env_pool=MemoryPool(), tasks=TASKS)
        assert not workdir.exists(), name


class NoStartPool(MemoryPool):
    """Every environment fails to start, as when the task image is missing."""

    @contextlib.asynccontextmanager
    async def acquire(self, task):
        raise RuntimeError(f"image {task.image} not found")
        yield


def test_an_iteration_without_a_usable_episode_stops_the_run(tmp_path):
    """Every episode failed in its environment: the run stops with an error before training
    or checkpointing (before: it trained on nothing, saved, logged reward 0 and exited 0)."""
    with pytest.raises(
        RuntimeError, match=r"iteration 0: all 4 episodes failed in their envi"
    ) as e:
        run(tmp_path / "run", 2, env_pool=NoStartPool())
    assert "image deepswe/calc:base not found" in str(e.value)
    assert not (tmp_path / "run" / "checkpoints" / "1").exists()
    assert not (tmp_path / "run" / METRICS_FILE).read_text()


def test_a_corrupt_latest_checkpoint_falls_back_to_the_step_before(tmp_path, caplog):
    """Step 2's parameter files were damaged after it was written: the resume warns naming it,
    moves it aside and continues from step 1; evaluate and export (restore_params,
    read_model_config) fall back the same way (before: resume stopped on Orbax's error)."""
    workdir = tmp_path / "run"
    run(workdir, 2)
    checkpoints = workdir / "checkpoints"
    damaged = [path for path in (checkpoints / "2" / "params").rglob("*") if path.is_file()]
    for path in damaged:
        if path.stat().st_size > 64:
            path.write_bytes(path.read_bytes()[:16])
    config = scripted_config(3)
    abstract = nnx.split(nnx.eval_shape(model_factory(config)), nnx.Param)[1]
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    with caplog.at_level(logging.WARNING, logger="deepswe_jax"):
        restore_params(checkpoints, abstract, mesh=mesh)  # what evaluate and export read
        assert read_model_config(checkpoints)["hidden_size"] == 32
    assert f"checkpoint {checkpoints / '2'} cannot be restored" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="deepswe_jax"):
        run(workdir, 3)
    assert f"checkpoint step 2 in {checkpoints} cannot be restored" in caplog.text
    assert f"moved to {checkpoints / '2.corrupt'}" in caplog.text
    assert f"resuming from {checkpoints / '1'}" in caplog.text
    assert TrainCheckpoints(checkpoints).all_steps() == [1, 2, 3]
    assert [row["step"] for row in read_metrics(workdir)] == [1, 2, 3]


@pytest.fixture
def small_disk(tmp_path):
    """Mounts a tmpfs of the given size (bytes) at a folder; unmounts it at the end. Needs root
    (as the Docker tests do): a real full disk, not a mocked write."""
    mounted = []

    def mount(path, size: int):
        path.mkdir(parents=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True
        )
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        # A failed save can leave an Orbax/TensorStore thread holding a file open for a moment
        # ("target is busy", exit 32; seen in CI): detach lazily then, freed once closed.
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill_disk_before_saving(step: int, leave: int) -> contextlib.AbstractContextManager:
    """Patches TrainCheckpoints.save: before saving `step`, once the earlier save has finished,
    a hidden file fills the checkpoint folder's disk up to `leave` free bytes. A disk that simply
    holds 1.5 checkpoints is not enough: how much Orbax and TensorStore write on the way (their
    file count varies from run to run: 37-47 files, 4 KiB each at least on tmpfs) and whether
    step 1's commit is still running decide which step fails, which made such a test flaky."""
    from unittest import mock

    original = TrainCheckpoints.save

    def save(self, at_step, **kwargs):
        if at_step == step:
            self.wait_until_finished()
            stat = os.statvfs(self.directory)
            free = stat.f_bavail * stat.f_frsize
            with open(os.path.join(self.directory, ".filler"), "wb") as filler:
                filler.write(b"\0" * max(free - leave, 0))
        return original(self, at_step, **kwargs)

    return mock.patch.object(TrainCheckpoints, "save", save)


def test_a_failed_background_save_stops_the_run_at_the_next_step_boundary(
    tmp_path, small_disk, monkeypatch
):
    """The checkpoint disk holds step 1 but not step 2: the run stops at the next step boundary
    with one clear error naming the step, the folder and where a rerun resumes, before training
    on (before: "checkpoint 0.16s" was logged and a whole iteration ran before the crash)."""
    abstract = nnx.split(nnx.eval_shape(model_factory(scripted_config(3))), nnx.Param)[1]
    one_step = 3 * sum(leaf.size * 4 for leaf in jax.tree.leaves(abstract))  # params, mu, nu
    small_disk(tmp_path / "run" / "checkpoints", 4 * one_step)
    updates = []
    monkeypatch.setattr(loop, "update_policy", lambda *a: updates.append(1) or update_policy(*a))
    with (
        fill_disk_before_saving(2, leave=one_step // 2),
        pytest.raises(CheckpointSaveError) as error,
    ):
        run(tmp_path / "run", 3)
    assert len(updates) == 2  # iteration 3 rolled out, found the failure, did not train
    message = str(error.value)
    assert f"saving checkpoint step 2 in {tmp_path / 'run' / 'checkpoints'} failed" in message
    assert "it resumes from step 1" in message
    assert [row["step"] for row in read_metrics(tmp_path / "run")] == [1, 2]  # no step 3
    assert TrainCheckpoints(tmp_path / "run" / "checkpoints").all_steps() == [1]


@pytest.fixture
def ctrl_c_raises():
    """Python's SIGINT handler during the test: a shell without job control starts background
    commands (`.ci/run &`) with SIGINT ignored, and pytest inherits that (these tests failed so
    in a backgrounded CI run)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c_while_saving(step: int) -> contextlib.AbstractContextManager:
    """Patches TrainCheckpoints.save: the process sends itself SIGINT as `step`'s save starts
    (held until the save is done, as a Ctrl-C during a save is)."""
    from unittest import mock

    original = TrainCheckpoints.save

    def save(self, at_step, **kwargs):
        if at_step == step:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, at_step, **kwargs)

    return mock.patch.object(TrainCheckpoints, "save", save)


def test_ctrl_c_during_a_save_keeps_the_saved_steps_metrics_row(tmp_path, ctrl_c_raises):
    """A SIGINT while step 1 is being saved lets the save finish and stops the run; the rerun
    resumes from step 1, so step 1's metrics row must already be written: every saved step has
    its row. Found by tests/bench/test_soak_interrupts.py (before: the row was written after
    the save, and the finished job's metrics.jsonl held step 2 alone)."""
    with ctrl_c_while_saving(1), pytest.raises(KeyboardInterrupt):
        run(tmp_path / "run", 2)
    assert TrainCheckpoints(tmp_path / "run" / "checkpoints").all_steps() == [1]
    run(tmp_path / "run", 2)
    assert [row["step"] for row in read_metrics(tmp_path / "run")] == [1, 2]


def test_ctrl_c_during_an_sft_save_keeps_the_saved_steps_metrics_row(tmp_path, ctrl_c_raises):
    """The same for SFT (experiment.train_sft): its row is written before its save, in one block
    for the signals."""
    from configs import sft_tiny
    from deepswe_jax.experiment import train_sft
    from tests.rl.test_sft import episode

    config = sft_tiny.get_config()
    config.sft.update(num_steps=2, batch_size=8, micro_batch_size=8)  # a row per fake device
    config.checkpoint.every = 2  # Orbax saves a run's first step too
    trajectories = [episode(index) for index in range(8)]
    with ctrl_c_while_saving(1), pytest.raises(KeyboardInterrupt):
        train_sft(config, tmp_path / "sft", trajectories)
    assert TrainCheckpoints(tmp_path / "sft" / "checkpoints").all_steps() == [1]
    train_sft(config, tmp_path / "sft", trajectories)
    assert [row["step"] for row in read_metrics(tmp_path / "sft")] == [1, 2]
