"""Resuming a run directory with a config of another model (issue 26): refused before anything
in the folder changes, naming the config fields that differ; the right config then resumes.

Before: the shape mismatch was taken for damage, both good checkpoints were renamed
`<step>.corrupt`, config.json was overwritten, and the right config then started again from
step 0 and rewrote metrics.jsonl.

Runs in-process on test_loop's scripted pieces (ScriptedSampler, in-memory environment pool).
"""

from __future__ import annotations

import logging

import jax
import pytest
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.checkpoint import CheckpointMismatchError, restore_params
from deepswe_jax.experiment import model_factory, train
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.metrics import read_metrics
from tests.rl.test_loop import (
    TOKENIZER_DIR,
    MemoryPool,
    alternating_sampler,
    make_task,
    scripted_config,
)

TASKS = [make_task(0), make_task(1)]


def config_of(total_steps: int, **model):
    config = scripted_config(total_steps)
    config.rl.micro_batch_size = 8  # one row per fake device (tests/conftest.py: 8 devices)
    config.model.update(model)
    return config


def run(workdir, config):
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    return train(
        config,
        workdir,
        sampler=alternating_sampler(tokenizer),
        env_pool=MemoryPool(),
        tasks=TASKS,
        show_progress=False,
    )


def snapshot(workdir) -> dict[str, bytes]:
    """Every file of the run directory (TensorBoard's aside) with its contents."""
    return {
        str(path.relative_to(workdir)): path.read_bytes()
        for path in sorted(workdir.rglob("*"))
        if path.is_file() and "tensorboard" not in path.parts
    }


def test_a_mismatched_resume_changes_nothing_and_the_right_config_resumes(tmp_path, caplog):
    workdir = tmp_path / "run"
    run(workdir, config_of(2))
    before = snapshot(workdir)

    with pytest.raises(CheckpointMismatchError) as error:
        run(workdir, config_of(2, hidden_size=64))
    message = str(error.value)
    assert "model.hidden_size: saved 32, now 64" in message, message
    assert "params/embed_tokens: saved shape (4096, 32), now (4096, 64)" in message, message
    assert "run again with the saved config, or give a new workdir" in message
    assert "\n" not in message
    assert snapshot(workdir) == before  # nothing renamed, config.json and metrics untouched

    with pytest.raises(CheckpointMismatchError, match="saved dtype float32, now bfloat16"):
        config = config_of(2)
        config.param_dtype = "bfloat16"
        run(workdir, config)
    assert snapshot(workdir) == before

    with caplog.at_level(logging.INFO, logger="deepswe_jax"):
        run(workdir, config_of(3))
    assert f"resuming from {workdir / 'checkpoints' / '2'}" in caplog.text
    rows = read_metrics(workdir)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert before["metrics.jsonl"] in (workdir / "metrics.jsonl").read_bytes()  # rows 1-2 kept
    assert not list((workdir / "checkpoints").glob("*.corrupt"))

    # Evaluate and export read parameters the same way: refused, no fallback to older steps.
    abstract = nnx.split(nnx.eval_shape(model_factory(config_of(1, hidden_size=64))), nnx.Param)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    with pytest.raises(CheckpointMismatchError, match=r"checkpoints/3 holds another model"):
        restore_params(workdir / "checkpoints", abstract[1], mesh=mesh)
