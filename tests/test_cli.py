"""The launch/ scripts on bad input (issue 17): the project's error in two lines (the traceback
with --verbose), an empty task file refused by every script that reads one, and a task whose
image is missing stopping launch/train.py before the model, the workdir or any rollout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import docker

from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.tasks import load_tasks

REPO_ROOT = Path(__file__).resolve().parents[1]
SHIPPED_TASKS = REPO_ROOT / "tasks" / "tasks.jsonl"
HINT = "(--verbose prints the full traceback)"


def launch(script: str, *flags: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    return subprocess.run(
        [sys.executable, f"launch/{script}.py", *flags],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """stderr without absl's INFO progress lines (`I1201 16:06:23.104164 ... pool.py:392] ...`)."""
    return [
        line
        for line in result.stderr.splitlines()
        if line.strip() and not re.match(r"I\d{4} \d\d:\d\d:\d\d", line)
    ]


def test_every_script_refuses_an_empty_task_file_in_two_lines(tmp_path):
    """Before: validate_tasks and build_images printed "0/0 tasks ok" and exited 0, evaluate
    failed later on a shape error, and each error was a 17-53 line traceback."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    runs = {
        "validate_tasks": launch("validate_tasks", f"--tasks={empty}"),
        "build_images": launch("build_images", f"--tasks={empty}"),
        "evaluate": launch(
            "evaluate", "--policy=gold", f"--tasks={empty}", f"--output_dir={tmp_path / 'eval'}"
        ),
        "train": launch(
            "train",
            "--config=configs/tiny.py",
            f"--workdir={tmp_path / 'run'}",
            f"--config.env.tasks={empty}",
        ),
    }
    for script, result in runs.items():
        assert result.returncode == 1, (script, result.stdout, result.stderr)
        assert error_lines(result) == [
            f"error: TaskFormatError: {empty} holds no tasks; give a task file with at least one "
            "row (e.g. tasks/tasks.jsonl)",
            HINT,
        ], (script, result.stderr)
    assert not (tmp_path / "run").exists()
    verbose = launch("build_images", f"--tasks={empty}", "--verbose")
    assert verbose.returncode == 1
    assert "Traceback (most recent call last)" in verbose.stderr
    assert "holds no tasks" in error_lines(verbose)[-1]


def test_a_missing_task_image_stops_train_before_the_first_rollout(tmp_path):
    """The task image is gone and the task has no source to build it from: train.py exits 1
    naming image and task, with no workdir and no container started (before: 12 start
    failures, 4 episodes given up, a checkpoint written, "reward 0.000" and exit status 0)."""
    task = load_tasks(SHIPPED_TASKS)[0].to_row()
    image = f"deepswe-test/missing-{uuid.uuid4().hex[:8]}:base"
    task.update(image=image, source=None)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    workdir = tmp_path / "run"
    result = launch(
        "train",
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        f"--config.env.tasks={tasks}",
        "--config.rl.tasks_per_step=1",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [error, hint] = error_lines(result)
    assert error.startswith("error: ImageBuildError: 1 task image(s) are not present"), error
    assert f"{image} (task {task['instance_id']})" in error
    assert hint == HINT
    assert not workdir.exists()
    started = docker.from_env().containers.list(
        all=True, filters={"label": f"{RUN_LABEL}=train-{workdir.name}"}
    )
    assert not started


def test_every_launch_script_ends_through_the_cli_handler():
    """One place prints errors and interrupts: every entry point runs `cli.run(main)`."""
    scripts = sorted((REPO_ROOT / "launch").glob("*.py"))
    assert len(scripts) >= 10
    for script in scripts:
        text = script.read_text()
        if '__name__ == "__main__"' in text:
            assert "cli.run(main)" in text and "app.run(" not in text, script.name


def test_a_missing_config_file_with_overrides_is_refused_in_two_lines(tmp_path):
    """Before (issue 26): with an override, config_flags tripped over the missing file in a
    59-line traceback (2 lines without one, naming no file)."""
    for overrides in ((), ("--config.rl.lr=3e-4",)):
        result = launch(
            "train", "--config=configs/tiny_typo.py", f"--workdir={tmp_path / 'run'}", *overrides
        )
        assert result.returncode == 1
        assert error_lines(result) == [
            "error: FileNotFoundError: --config=configs/tiny_typo.py: no such config file (did "
            "you mean configs/tiny.py?)",
            HINT,
        ], result.stderr
    assert not (tmp_path / "run").exists()
