"""Ctrl-C (SIGINT) in each phase of a training run (issue 17): episodes running in containers,
the train step, a checkpoint save. Each run exits with status 130 and one line (absl's INFO
progress lines aside), with no traceback, no container left and nothing half-written.

Before: during rollouts SIGINT ended in `ValueError: a coroutine was expected, got
<_GatheringFuture pending>`; in a train step one of two SIGINTs ended in a segmentation fault.

This file is also the worker script: experiment.train through `deepswe_jax.cli.run` (as
launch/train.py runs it) with the real Docker env pool on one shipped task, a ScriptedSampler
and test_loop's small model. The worker creates <workdir>/phase on reaching the phase; in the
train step and the save it then waits for <workdir>/signal_sent, so the signal surely arrives
inside that phase.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHIPPED_TASKS = REPO_ROOT / "tasks" / "tasks.jsonl"
PHASES = ("rollouts", "train_step", "checkpoint_save")
INFO_LINE = re.compile(r"I\d{4} \d\d:\d\d:\d\d")  # absl's INFO prefix


def worker(argv: list[str]) -> None:
    """The training run of the module docstring, interrupted in phase argv[2]."""
    import logging

    from absl import logging as absl_logging

    from deepswe_jax import experiment
    from deepswe_jax.agent.chat import ChatTokenizer
    from deepswe_jax.agent.parsing import render_function_call
    from deepswe_jax.checkpoint import TrainCheckpoints
    from deepswe_jax.rl import loop
    from deepswe_jax.sampling.scripted import ScriptedSampler
    from tests.rl.test_loop import TOKENIZER_DIR, scripted_config

    workdir, phase, tasks_file = Path(argv[1]), argv[2], argv[3]
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)

    def reached_phase() -> None:
        (workdir / "phase").write_text(phase)
        if phase != "rollouts":
            while not (workdir / "signal_sent").exists():
                time.sleep(0.05)

    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    command = "sleep 120" if phase == "rollouts" else "true"
    turns = [
        render_function_call("execute_bash", {"cmd": command}),
        render_function_call("finish", {"command": "submit"}),
    ]
    script = [tokenizer.encode_text(turn) + [tokenizer.im_end_id] for turn in turns]

    def script_for(prompt: tuple[int, ...]) -> list[list[int]]:
        if phase == "rollouts":  # the environment is up; its command runs next
            reached_phase()
        return script

    if phase == "train_step":
        update_policy = loop.update_policy
        loop.update_policy = lambda *args: reached_phase() or update_policy(*args)
    if phase == "checkpoint_save":
        save = TrainCheckpoints.save
        TrainCheckpoints.save = lambda self, *a, **k: reached_phase() or save(self, *a, **k)

    config = scripted_config(2)
    config.rl.update(tasks_per_step=1, n_rollouts=2)
    config.env.update(tasks=tasks_file, max_envs=2)
    config.agent.step_timeout = 180.0
    experiment.train(config, workdir, sampler=ScriptedSampler(script_for), show_progress=False)


def interrupted_run(tmp_path: Path, phase: str) -> tuple[int, list[str]]:
    """Runs the worker until it reaches `phase`, sends SIGINT; returns its exit status, its
    stderr lines (absl INFO progress lines aside)."""
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(_first_shipped_task()) + "\n")
    workdir = tmp_path / f"run_{phase}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "XLA_FLAGS": "",
        "JAX_PLATFORMS": "cpu",
    }
    process = subprocess.Popen(
        [sys.executable, __file__, str(workdir), phase, str(tasks_file)],
        cwd=REPO_ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 600
    while not (workdir / "phase").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the worker never reached {phase}:\n{process.communicate()[1][-5000:]}")
        time.sleep(0.05)
    if phase == "rollouts":
        assert _containers(workdir), "no container was running at the signal"
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)  # the impatient second Ctrl-C
    (workdir / "signal_sent").touch()
    _, stderr = process.communicate(timeout=300)
    lines = stderr.splitlines()
    return process.returncode, [line for line in lines if line and not INFO_LINE.match(line)]


def _first_shipped_task() -> dict:
    from deepswe_jax.env.tasks import load_tasks

    return load_tasks(SHIPPED_TASKS)[0].to_row()  # source as an absolute path


def _containers(workdir: Path) -> list:
    label = f"deepswe.run=train-{workdir.name}"
    return docker.from_env().containers.list(all=True, filters={"label": label})


@pytest.mark.parametrize("phase", PHASES)
def test_sigint_exits_130_with_one_line_and_leaves_nothing_behind(tmp_path, phase):
    from deepswe_jax.checkpoint import TrainCheckpoints
    from deepswe_jax.cli import INTERRUPTED

    workdir = tmp_path / f"run_{phase}"
    code, lines = interrupted_run(tmp_path, phase)
    assert code == 130, lines
    assert lines == [INTERRUPTED]
    assert not _containers(workdir)
    checkpoints = workdir / "checkpoints"
    assert not list(checkpoints.glob("*tmp*")), list(checkpoints.iterdir())
    # The step being saved at the signal is finished (the save was let through); no other.
    expected = [1] if phase == "checkpoint_save" else []
    assert TrainCheckpoints(checkpoints).all_steps() == expected


if __name__ == "__main__":
    # A shell without job control starts background commands (`.ci/run &`) with SIGINT
    # ignored, and children inherit that; the worker stands for a foreground run.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, str(REPO_ROOT))
    from deepswe_jax import cli

    cli.run(worker)
