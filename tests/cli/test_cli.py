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

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    # Its containers' label is train-<workdir name>: a name of its own, not another test's
    # "run" (test_train_main and test_train_vllm run real episodes under train-run meanwhile).
    workdir = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
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


CLOSED_LOOP_RUN = """
import asyncio, threading
from deepswe_jax import cli

class Write:
    # What TensorStore's C++ threads do once Orbax closed its loop after a failed write: a
    # write finishing calls loop.call_soon_threadsafe, which raises, and the error goes to
    # sys.unraisablehook (here through __del__; TensorStore passes no object).
    def __init__(self, loop, error=None):
        self.loop, self.error = loop, error

    def __del__(self):
        if self.error:
            raise self.error
        self.loop.call_soon_threadsafe(print)

def main(argv):
    loop = asyncio.new_event_loop()
    loop.close()

    def finished_writes():
        Write(loop)
        Write(loop, ValueError("a thread's own error"))

    threads = [threading.Thread(target=finished_writes) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    raise OSError("No space left on device")

cli.run(main)
"""


def test_closed_event_loop_callbacks_of_other_threads_are_not_printed():
    """The full-disk run's 43 lines (final CI of stop 24): TensorStore's late callbacks on
    Orbax's closed loop each printed a traceback before the error. Other unraisable errors
    still print."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", CLOSED_LOOP_RUN],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = error_lines(result)
    assert result.returncode == 1, result.stderr
    assert "Event loop is closed" not in result.stderr, result.stderr
    # Five threads report at once, so Python's hook may interleave their lines ("ValueError:
    # ValueError: a thread's own errora thread's own error"); each message is one write.
    assert result.stderr.count("a thread's own error") == 5, result.stderr
    assert lines[-2:] == ["error: OSError: No space left on device", HINT], lines


def test_a_full_disk_stops_the_run_in_at_most_three_lines(tmp_path):
    """The checkpoint disk (a tmpfs) holds step 1 but not step 2: the run ends with exit status
    1 and the CheckpointSaveError line, without the ~40 lines of Orbax's background threads
    (`RuntimeError: Event loop is closed`, `Task exception was never retrieved`) around it."""
    import jax
    from flax import nnx

    from deepswe_jax.experiment import model_factory
    from tests.rl.test_loop import scripted_config

    abstract = nnx.split(nnx.eval_shape(model_factory(scripted_config(3))), nnx.Param)[1]
    one_step = 3 * sum(leaf.size * 4 for leaf in jax.tree.leaves(abstract))  # params, mu, nu
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    size = f"size={4 * one_step}"  # step 1 fits; the run fills the rest before step 2
    subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", checkpoints], check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
        result = subprocess.run(
            [sys.executable, __file__, str(tmp_path / "run"), str(one_step)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        subprocess.run(["umount", checkpoints], check=True)
    lines = error_lines(result)
    assert result.returncode == 1, result.stderr[-5000:]
    assert len(lines) <= 3, result.stderr[-5000:]
    assert lines[-2].startswith("error: CheckpointSaveError: saving checkpoint step 2 in"), lines
    assert lines[-1] == HINT


if __name__ == "__main__":
    # The full-disk run: test_loop's scripted loop (no Docker) through the cli handler.
    sys.path.insert(0, str(REPO_ROOT))
    from deepswe_jax import cli

    def full_disk_run(argv: list[str]) -> None:
        from absl import logging as absl_logging

        from deepswe_jax.agent.chat import ChatTokenizer
        from deepswe_jax.experiment import train
        from tests.rl.test_loop import (
            TOKENIZER_DIR,
            MemoryPool,
            alternating_sampler,
            make_task,
            scripted_config,
        )
        from tests.rl.test_loop_faults import fill_disk_before_saving

        absl_logging.set_verbosity(absl_logging.WARNING)
        sampler = alternating_sampler(ChatTokenizer.from_directory(TOKENIZER_DIR))
        config = scripted_config(3)
        config.rl.micro_batch_size = 1
        tasks = [make_task(0), make_task(1)]
        with fill_disk_before_saving(2, leave=int(argv[2]) // 2):
            train(
                config,
                argv[1],
                sampler=sampler,
                env_pool=MemoryPool(),
                tasks=tasks,
                show_progress=False,
            )

    cli.run(full_disk_run)
