"""The Ctrl-C soak of issue 26 in CI: bench/soak_interrupts.py's five marker moments (two in the
SFT stage, two in GRPO++, one in the evaluation; one, two or three SIGINTs each), the job rerun
from its first stage after each, as a user reruns ./run.sh. Each interrupted run exits 130 with
one line and leaves no container, temporary checkpoint folder or half-written file; the job
then completes with one metrics row per step, its evaluation summary, and SFT parameters equal
to an uninterrupted SFT stage's (GRPO++'s cannot be compared: the module docstring of the
bench says why). BENCHMARKS.md ("Ctrl-C soak") has the 30 random moments."""

from __future__ import annotations

import sys

import pytest

from bench import soak_interrupts


@pytest.mark.timeout(1800)  # ~5-8 min on 2 cores (BENCHMARKS.md, "Ctrl-C soak")
def test_the_main_job_interrupted_at_five_moments_resumes_and_loses_nothing(tmp_path):
    report = soak_interrupts.soak(tmp_path, 5, markers=True, seed=0, reference=False)
    assert report["problems"] == [], report
    # Every moment interrupted the one job: none came after the stage it was meant for.
    assert report["by_stage"] == {"sft": 2, "rl": 2, "eval": 1}, report
    assert list(report["jobs"]) == ["job_0"], report
    job = report["jobs"]["job_0"]
    assert job["sft_metric_steps"] == [1, 2, 3, 4]
    assert job["rl_metric_steps"] == list(range(1, soak_interrupts.RL_STEPS + 1))
    assert job["eval_summary"]

    reference = tmp_path / "uninterrupted"
    code, lines = soak_interrupts.StageProcess("sft", reference).finish()
    assert code == 0, lines[-20:]
    assert job["sft_params"] == soak_interrupts.params_hash(reference / "sft" / "checkpoints")


def test_a_stage_that_does_not_stop_is_reported_with_its_threads_stacks_and_killed(tmp_path):
    """The CI soak of stop 33 waited 30 minutes for an interrupted run that never exited and
    said nothing of where it was; a hung stage now shows its threads' stacks."""
    stuck = (
        "import sys, threading, time; sys.path.insert(0, '.');"
        "from deepswe_jax import interrupts; interrupts.install();"
        "threading.Thread(target=time.sleep, args=(600,), name='stuck', daemon=True).start();"
        "print('started', file=sys.stderr, flush=True);"
        "time.sleep(600)"
    )
    process = soak_interrupts.StageProcess("rl", tmp_path, [sys.executable, "-c", stuck])
    assert process.wait_for("started", None)
    code, lines = process.finish(timeout=2)
    assert code is None, lines
    assert process.process.poll() is not None  # killed
    stacks = "\n".join(lines)
    assert "Current thread" in stacks and stacks.count("line 1 in <module>") == 1, stacks
    assert "threading.py" in stacks, stacks  # the other thread's frames


def test_only_a_traceback_through_pythons_own_start_up_counts_as_before_the_script():
    """The one exception the soak allows (30 random moments, BENCHMARKS.md): a signal while
    Python itself starts, before the script runs (recorded in the 30-moment runs)."""
    startup = [
        "Traceback (most recent call last):",
        '  File "<frozen site>", line 186, in addpackage',
        '  File "<string>", line 1, in <module>',
        f'  File "{soak_interrupts.REPO_ROOT}/.venv/lib/python3.11/site-packages/'
        '__editable___deepswe_jax_0_1_0_finder.py", line 5, in <module>',
        '  File "<frozen importlib._bootstrap>", line 1026, in __enter__',
        "KeyboardInterrupt",
    ]
    assert soak_interrupts.in_python_startup(1, startup)  # ./run.sh's .venv is in the repository
    assert soak_interrupts.in_python_startup(1, [*startup[:3], startup[4], startup[5]])
    in_the_script = [
        *startup[:2],
        f'  File "{soak_interrupts.REPO_ROOT}/launch/train.py"',
        *startup[4:],
    ]
    assert not soak_interrupts.in_python_startup(1, in_the_script)
    assert not soak_interrupts.in_python_startup(130, ["interrupted (SIGINT): stopped cleanly"])
    # Killed by the signal before the interpreter's handler existed (the second 30-moment run).
    assert soak_interrupts.in_python_startup(-2, [])
    assert not soak_interrupts.in_python_startup(-2, ["interrupted (SIGINT): stopped cleanly"])
    assert not soak_interrupts.in_python_startup(0, [])
