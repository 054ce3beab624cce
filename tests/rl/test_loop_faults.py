"""The RL loop under faults (issue 17): a torn metrics line and a restart without a finished
checkpoint, a corrupt latest checkpoint, a failed asynchronous save, an iteration without a
usable episode, and an invalid config.

Runs in-process on test_loop's scripted pieces (ScriptedSampler, in-memory environment pool)."""

from __future__ import annotations

import json
import logging

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.rl.loop import train
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
