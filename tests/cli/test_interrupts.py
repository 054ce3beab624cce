"""Ctrl-C (SIGINT) and SIGTERM in each phase of a training run and an evaluation (issues 17 and
26): imports, the first compilation, episodes running in containers, the train step, a
checkpoint save, and an evaluation's episodes. Each run gets three signals (the impatient
second and third Ctrl-C) sent to its process group, as a terminal does, and exits with status
130 and one line (absl's INFO progress lines aside), with no traceback, no container of its
own left, no temporary checkpoint folder and nothing half-written.

Before (issue 26): a SIGINT in the imports printed a traceback, one in the first compilation was
swallowed ("Exception ignored in: _xla_gc_callback") and the run finished with exit status 0,
later ones printed the line and then a segmentation fault, and two during episodes ended in
`Fatal Python error: Aborted`; SIGTERM killed the run with its containers left running.

This file is also the worker script: the run of launch/train.py (experiment.train through
`deepswe_jax.cli.run`) with the real Docker env pool on one shipped task, a ScriptedSampler and
test_loop's small model; or launch/evaluate.py's main with the gold patch. The worker creates
<workdir>/phase on reaching the phase; in the imports, the train step and the save it then
waits for <workdir>/signal_sent, so the signals surely arrive inside that phase; before the
first compilation it waits inside a garbage-collection callback (`_in_a_gc_callback`).
Episodes are interrupted once one of the run's containers runs.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TASKS = REPO_ROOT / "tasks" / "tasks.jsonl"
# absl's INFO progress lines and progress bars
NOISE = re.compile(r"^I\d{4} \d\d:\d\d:\d\d|\d+%\|.*it/s")
# (phase, signal): every phase with SIGINT, and SIGTERM where work is under way.
CASES = [
    ("imports", "SIGINT"),
    ("compile", "SIGINT"),
    ("rollouts", "SIGINT"),
    ("train_step", "SIGINT"),
    ("checkpoint_save", "SIGINT"),
    ("evaluate", "SIGINT"),
    ("rollouts", "SIGTERM"),
    ("checkpoint_save", "SIGTERM"),
]


def _mark(workdir: Path, phase: str, wait: bool) -> None:
    (workdir / "phase").write_text(phase)
    while wait and not (workdir / "signal_sent").exists():
        time.sleep(0.05)


def _in_a_gc_callback(workdir: Path, initial_params):
    """`initial_params` (the first compilation), preceded by a garbage collection whose
    callback waits for the signals: they land where JAX's `_xla_gc_callback` caught them during
    compilation, inside a gc callback, where Python swallows a KeyboardInterrupt."""

    def waiting(stage: str, info: dict) -> None:
        if stage == "start" and not (workdir / "phase").exists():
            _mark(workdir, "compile", wait=True)

    def compile_first(*args):
        gc.callbacks.append(waiting)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(waiting)
        return initial_params(*args)

    return compile_first


def worker(argv: list[str]) -> None:
    """The run of the module docstring, interrupted in phase argv[2]."""
    import logging

    from absl import logging as absl_logging

    from deepswe_jax import experiment
    from deepswe_jax.agent.chat import ChatTokenizer
    from deepswe_jax.agent.parsing import render_function_call
    from deepswe_jax.checkpoint import TrainCheckpoints
    from deepswe_jax.experiment import training
    from deepswe_jax.rl import loop
    from deepswe_jax.sampling.scripted import ScriptedSampler
    from tests.rl.test_loop import TOKENIZER_DIR, scripted_config

    workdir, phase, tasks_file = Path(argv[1]), argv[2], argv[3]
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)

    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    command = "sleep 120" if phase == "rollouts" else "true"
    turns = [
        render_function_call("execute_bash", {"cmd": command}),
        render_function_call("finish", {"command": "submit"}),
    ]
    script = [tokenizer.encode_text(turn) + [tokenizer.im_end_id] for turn in turns]

    def script_for(prompt: tuple[int, ...]) -> list[list[int]]:
        if phase == "rollouts":  # the environment is up; its command runs next
            _mark(workdir, phase, wait=False)
        return script

    if phase == "compile":
        training.initial_params = _in_a_gc_callback(workdir, training.initial_params)
    if phase == "train_step":
        update_policy = loop.update_policy
        loop.update_policy = lambda *args: _mark(workdir, phase, True) or update_policy(*args)
    if phase == "checkpoint_save":
        save = TrainCheckpoints.save
        TrainCheckpoints.save = lambda self, *a, **k: (
            _mark(workdir, phase, True) or save(self, *a, **k)
        )

    config = scripted_config(2)
    config.rl.update(tasks_per_step=1, n_rollouts=2)
    config.env.update(tasks=tasks_file, max_envs=2)
    config.agent.step_timeout = 180.0
    experiment.train(config, workdir, sampler=ScriptedSampler(script_for), show_progress=False)


def evaluate_worker(argv: list[str]) -> None:
    """launch/evaluate.py's main with the gold patch, its run label written to <workdir>/label."""
    from deepswe_jax.experiment import evaluation

    make_env_pool = evaluation.make_env_pool
    workdir = Path(argv[1])

    def labelled_pool(config, run_label, **kwargs):
        (workdir / "label").write_text(run_label)
        return make_env_pool(config, run_label, **kwargs)

    evaluation.make_env_pool = labelled_pool
    sys.argv = [
        "evaluate.py",
        "--policy=gold",
        f"--tasks={argv[3]}",
        f"--output_dir={workdir / 'eval'}",
        "--num_runs=2",
    ]
    from launch import evaluate

    return evaluate.main


def _first_shipped_task() -> dict:
    from deepswe_jax.env.tasks import load_tasks

    return load_tasks(SHIPPED_TASKS)[0].to_row()  # source as an absolute path


def _containers(label: str) -> list:
    import docker

    from deepswe_jax.env.ownership import RUN_LABEL

    # sparse: no inspection of each container, which races its removal (404)
    client = docker.from_env()
    return client.containers.list(all=True, sparse=True, filters={"label": f"{RUN_LABEL}={label}"})


def _run_label(workdir: Path, phase: str) -> str | None:
    if phase == "evaluate":
        label = workdir / "label"
        return label.read_text() if label.exists() else None
    return f"train-{workdir.name}"


def _reached(workdir: Path, phase: str) -> bool:
    if phase in ("rollouts", "evaluate"):  # one of the run's containers runs
        label = _run_label(workdir, phase)
        return label is not None and bool(_containers(label))
    return (workdir / "phase").exists()


def interrupted_run(tmp_path: Path, phase: str, signame: str) -> tuple[int, list[str], Path]:
    """Runs the worker until it reaches `phase`, sends `signame` to its process group three
    times; returns its exit status, its stderr lines (progress lines aside), and its
    workdir."""
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(_first_shipped_task()) + "\n")
    workdir = tmp_path / f"run_{phase}_{uuid.uuid4().hex[:8]}"  # its containers' label
    workdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    process = subprocess.Popen(
        [sys.executable, __file__, str(workdir), phase, str(tasks_file)],
        cwd=REPO_ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    deadline = time.monotonic() + 600
    while not _reached(workdir, phase):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"never reached {phase}:\n{process.communicate()[1][-5000:]}")
        time.sleep(0.05)
    for _ in range(3):
        try:
            os.killpg(process.pid, getattr(signal, signame))
        except ProcessLookupError:  # already gone (the imports end at the first one)
            break
        time.sleep(0.3)
    (workdir / "signal_sent").touch()
    _, stderr = process.communicate(timeout=300)
    lines = [line for line in stderr.splitlines() if line and not NOISE.search(line)]
    return process.returncode, lines, workdir


def _left_behind(workdir: Path) -> list[Path]:
    """Temporary checkpoint folders and half-written files under `workdir`."""
    return [
        path
        for path in workdir.rglob("*")
        if "orbax-checkpoint-tmp" in path.name or path.name.endswith((".tmp", ".partial"))
    ]


@pytest.mark.parametrize(("phase", "signame"), CASES, ids=[f"{p}-{s}" for p, s in CASES])
def test_a_signal_exits_130_with_one_line_and_leaves_nothing_behind(tmp_path, phase, signame):
    from deepswe_jax.checkpoint import TrainCheckpoints
    from deepswe_jax.interrupts import interrupted_line

    code, lines, workdir = interrupted_run(tmp_path, phase, signame)
    assert code == 130, lines[-30:]
    assert lines == [interrupted_line(signame)]
    label = _run_label(workdir, phase)
    assert not (label and _containers(label))
    assert not _left_behind(workdir)
    checkpoints = workdir / "checkpoints"
    if phase != "evaluate" and checkpoints.exists():
        # The step being saved at the signal is finished (the save was let through); no other.
        expected = [1] if phase == "checkpoint_save" else []
        assert TrainCheckpoints(checkpoints).all_steps() == expected


def run_script(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`script` in a Python process of its own, with this repository importable."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A KeyboardInterrupt Python swallowed (raised in a `__del__` or a gc callback, as JAX's
# `_xla_gc_callback` during compilation) and what happens next, in a process of its own.
SWALLOWED = """
import _thread, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground run's
from deepswe_jax import interrupts

interrupts.install()


class Collected:
    def __del__(self):  # where the first Ctrl-C landed
        raise KeyboardInterrupt


start = threading.Thread.start


def start_after_a_signal(self):
    # The second Ctrl-C arrives while the hook starts the thread that raises the first again.
    threading.Thread.start = start
    _thread.interrupt_main()
    start(self)


def run_on():
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("ran on", flush=True)


with interrupts.stop_gracefully():
    try:
        if sys.argv[1] == "signal_in_the_hook":
            threading.Thread.start = start_after_a_signal
            Collected()
            run_on()
        else:  # "deferred_block": the raise again waits for the block, as a signal would
            with interrupts.deferred_interrupts():
                Collected()
                time.sleep(0.5)
                print("block finished", flush=True)
            run_on()
    except KeyboardInterrupt:
        print("stopped", flush=True)
"""


@pytest.mark.parametrize(
    ("case", "expected"),
    [("signal_in_the_hook", ["stopped"]), ("deferred_block", ["block finished", "stopped"])],
)
def test_a_swallowed_interrupt_is_raised_again_once_safe(case, expected):
    """The compile-SIGINT flake of stop 27's fresh-clone CI (exit 0, "Exception ignored in
    sys.unraisablehook"): a second signal while the unraisable hook started its thread raised
    KeyboardInterrupt inside the hook, where Python swallowed it once more and the run went on.
    And a swallowed interrupt raised again inside a deferred block broke the block's promise."""
    result = run_script(SWALLOWED, case)
    assert result.stdout.splitlines() == expected, result.stdout + result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr


# A stop signal's KeyboardInterrupt swallowed by a library's bare `except:` (jax's
# core.is_constant_dim, pxla reading an executable's memory kinds right after an XLA compilation):
# the script's argv[1] says what the run does next. "stopped" is what a run must print.
CAUGHT_BY_A_LIBRARY = """
import asyncio, os, signal, sys, threading, time
case = sys.argv[1]
# a foreground run's SIGINT, or a background job's (SIGINT ignored: SIGTERM stops it)
signal.signal(signal.SIGINT, signal.SIG_IGN if case == "background" else signal.default_int_handler)
from deepswe_jax import interrupts

interrupts.install()


def is_constant_dim():
    try:
        os.kill(os.getpid(), signal.SIGTERM if case == "background" else signal.SIGINT)
        time.sleep(0.2)  # the signal lands inside the library's `try`
        return True
    except:  # noqa: E722
        return False


def run_on():
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)


async def episode():  # the rollout's shape: cleanups awaited in `except BaseException`
    try:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(5)
    except BaseException:
        for step in range(4):
            await asyncio.sleep(0.3)
            print("cleanup", step, flush=True)
        raise


with interrupts.stop_gracefully():
    try:
        if case == "asyncio_cleanup":
            asyncio.run(episode())
        elif case == "inside_another_except":
            try:
                raise ConnectionError("a retry runs inside the handler")
            except ConnectionError:
                is_constant_dim()
                run_on()
        else:
            is_constant_dim()
            if case == "blocking_sleep":
                time.sleep(60)
            elif case == "blocking_join":
                worker = threading.Thread(target=time.sleep, args=(60,), daemon=True)
                worker.start()
                worker.join()
            else:
                run_on()
        print("ran on", flush=True)
    except KeyboardInterrupt:
        print("stopped", flush=True)
"""


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("running", ["stopped"]),
        ("inside_another_except", ["stopped"]),
        ("blocking_sleep", ["stopped"]),
        ("blocking_join", ["stopped"]),
        ("background", ["stopped"]),
        ("asyncio_cleanup", ["cleanup 0", "cleanup 1", "cleanup 2", "cleanup 3", "stopped"]),
    ],
)
def test_an_interrupt_a_library_caught_is_raised_again(case, expected):
    """The compile-SIGINT flake of stop 32's fresh-clone CI (exit 0, no output): the signal
    raised KeyboardInterrupt inside a library's bare `except:`, which swallowed it without a
    trace, and the run went on to the end. It is raised again once dropped, by the signal
    itself, so it also ends a blocking sleep or join (an untimed wait would otherwise hang after
    a scheduler's single SIGTERM) and reaches a background job whose SIGINT is ignored; the
    coroutine awaiting its cleanups in `except BaseException:` holds it, so they all run (a
    watchdog tried first cut them short, as the red-team showed)."""
    result = run_script(CAUGHT_BY_A_LIBRARY, case)
    assert result.stdout.splitlines() == expected, result.stdout + result.stderr


FINISHES_AFTER_A_SWALLOWED_STOP = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from deepswe_jax import cli


def main(argv):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    except:  # noqa: E722  (the run's last compilation, in a library)
        pass
    print("main finished", flush=True)  # before the stop can come back


cli.run(main)
"""


def test_a_run_that_ends_after_a_swallowed_stop_still_exits_130():
    from deepswe_jax.interrupts import interrupted_line

    result = run_script(FINISHES_AFTER_A_SWALLOWED_STOP)
    assert result.returncode == 130, result.stdout + result.stderr
    assert interrupted_line("SIGINT") in result.stderr


if __name__ == "__main__":
    # A shell without job control starts background commands (`.ci/run &`) with SIGINT
    # ignored, and children inherit that; the worker stands for a foreground run.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, str(REPO_ROOT))
    from deepswe_jax import interrupts

    interrupts.install()
    phase = sys.argv[2]
    if phase == "imports":  # the signals arrive while the libraries load, before main
        _mark(Path(sys.argv[1]), phase, wait=False)
        import jax  # noqa: F401
        import orbax.checkpoint  # noqa: F401

        from deepswe_jax import experiment  # noqa: F401

        _mark(Path(sys.argv[1]), phase, wait=True)
    from deepswe_jax import cli

    if phase == "evaluate":
        cli.run(evaluate_worker(sys.argv))
    else:
        cli.run(worker)
