"""grade_patch's steps (apply, restore test files, apply test_patch, run, score) driven on an
in-memory Runtime: the commands each step runs, how a failing step decides the status, and a
Harness of its own deciding how tests run and are scored. tests/env/test_grading.py grades the
same way in real containers."""

from __future__ import annotations

import dataclasses
import re
import shlex
import textwrap

import pytest

from deepswe_jax.env.grading import grading
from deepswe_jax.env.grading.grading import (
    GradingSession,
    grade_patch,
    harness_for,
    restore_test_files,
)
from deepswe_jax.env.grading.harness import RECORD_VARIABLE, PytestHarness, Verdict
from deepswe_jax.env.grading.harness_r2egym import R2EHarness
from deepswe_jax.env.grading.harness_swebench import SwebenchHarness
from deepswe_jax.env.grading.patches import without_paths
from deepswe_jax.env.grading.verdict_guards import PROBE_MARK
from deepswe_jax.env.runtime import EnvironmentUnavailableError, MissingImageError
from deepswe_jax.env.tasks import Task
from tests.env.fake_runtime import ScriptedFactory, ScriptedRuntime

PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a - b\n+return a + b"
TEST_PATCH = (
    "--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -0,0 +1 @@\n+def test_add(): ...\n"
)
PASSING_LOG = textwrap.dedent(
    """\
    =========================== short test summary info ============================
    PASSED tests/test_calc.py::test_add
    PASSED tests/test_calc.py::test_mul
    ============================== 2 passed in 0.01s ===============================
    """
)
# git status -z after the patch: a new conftest.py, an edited test file, a fix, a new pytest.ini
# in a subfolder; before it, an untracked tests/ folder of the image that the patch left alone.
BEFORE = "?? build/tests/conftest.py\0"
CHANGED = "?? conftest.py\0 M tests/test_calc.py\0 M calc.py\0?? pkg/pytest.ini\0" + BEFORE
CHANGES = CHANGED + grading.STATUS_SEPARATOR + BEFORE


def make_task(**fields) -> Task:
    task = Task(
        instance_id="calc-1",
        repo="calc",
        base_commit="0" * 40,
        problem_statement="add subtracts",
        patch=PATCH,
        test_patch=TEST_PATCH,
        FAIL_TO_PASS=("tests/test_calc.py::test_add",),
        PASS_TO_PASS=("tests/test_calc.py::test_mul",),
        image="deepswe/calc:base",
    )
    return dataclasses.replace(task, **fields)


def result_record(runtime: ScriptedRuntime) -> str:
    """The path of the result record the grader asked the test run of `runtime` for."""
    return re.match(rf"{RECORD_VARIABLE}=(\S+) ", runtime.commands[-1])[1]


def repository(fail: str = "", test_log: str = PASSING_LOG):
    """respond() of a grading runtime whose step `fail` ('apply', 'restore', 'test_patch',
    'timeout') fails; the test run prints `test_log`."""

    def respond(cmd: str) -> tuple[int | None, str]:
        if cmd == grading._apply_cmd(grading.PATCH_FILE):
            return (1, "error: patch failed") if fail == "apply" else (0, "Applied")
        if cmd == grading.CHANGES_CMD:
            return 0, CHANGES
        if cmd == grading.RESTORE_CMD:
            return (1, "checkout failed") if fail == "restore" else (0, "restored")
        if cmd.startswith("git apply --verbose /tmp/deepswe_test.patch"):
            return (1, "does not apply") if fail == "test_patch" else (0, "Applied")
        if cmd.startswith("timeout -k 5") or re.match(rf"{RECORD_VARIABLE}=\S+ timeout -k 5", cmd):
            return (124, "") if fail == "timeout" else (0, test_log)
        raise AssertionError(f"unexpected command {cmd!r}")

    return respond


def test_the_steps_run_in_order_in_one_fresh_runtime_and_their_log_is_kept():
    factory = ScriptedFactory(repository())
    task = make_task()
    result = grade_patch(task, PATCH, runtime_factory=factory, run_label="grade-1", timeout=60)

    assert result.status == "resolved" and result.reward == 1.0, result.test_log
    assert result.tests_status["FAIL_TO_PASS"]["success"] == ["tests/test_calc.py::test_add"]
    [runtime] = factory.made
    assert (runtime.image, runtime.run_label, runtime.closes) == (task.image, "grade-1", 1)
    test_cmd = PytestHarness().command(task)
    # The environment probe (once per image), then the steps; the tests with a result record.
    record_path = result_record(runtime)
    assert runtime.commands[1:] == [
        grading._apply_cmd(grading.PATCH_FILE),
        grading.CHANGES_CMD,
        grading.RESTORE_CMD,
        f"git apply --verbose {grading.TEST_PATCH_FILE}",
        f"{RECORD_VARIABLE}={record_path} timeout -k 5 60 bash -c {shlex.quote(test_cmd)}",
    ]
    assert PROBE_MARK in runtime.commands[0] and record_path.startswith("/tmp/deepswe-record-")
    assert {path: data for path, data in runtime.files.items() if path != record_path} == {
        grading.PATCH_FILE: (PATCH + "\n").encode(),  # a final newline added
        grading.PROTECTED_LIST_FILE: b"conftest.py\0tests/test_calc.py\0pkg/pytest.ini\0",
        grading.TEST_PATCH_FILE: TEST_PATCH.encode(),
    }
    outputs = ["Applied", CHANGES, "restored", "Applied", PASSING_LOG]
    logged = [grading._apply_cmd(grading.PATCH_FILE), *runtime.commands[2:5], test_cmd]
    assert result.test_log == "\n".join(
        f"$ {cmd}\n{output}" for cmd, output in zip(logged, outputs, strict=True)
    )


@pytest.mark.parametrize(
    "fail, status, applied, commands, error",
    [
        ("apply", "apply_failed", False, 1, ""),
        ("restore", "infra_error", True, 3, "restoring test files failed"),
        ("test_patch", "infra_error", True, 4, "test_patch of calc-1 does not apply"),
        ("timeout", "timeout", True, 5, "tests ran past 60 s"),
    ],
)
def test_a_failing_step_decides_the_status_and_stops_the_grading(
    fail, status, applied, commands, error
):
    factory = ScriptedFactory(repository(fail))
    result = grade_patch(make_task(), PATCH, runtime_factory=factory, timeout=60)
    assert (result.status, result.patch_successfully_applied, result.reward) == (
        status,
        applied,
        0.0,
    )
    steps = [cmd for cmd in factory.made[0].commands if PROBE_MARK not in cmd]
    assert error in result.error and len(steps) == commands
    assert result.tests_status["FAIL_TO_PASS"] == {"success": [], "failure": []}
    assert factory.made[0].closes == 1


@pytest.mark.parametrize(
    "error", [EnvironmentUnavailableError("pod gone"), MissingImageError("no image")]
)
def test_a_runtime_that_does_not_start_is_an_infra_error(error):
    factory = ScriptedFactory(repository(), start_errors=[error])
    result = grade_patch(make_task(), PATCH, runtime_factory=factory)
    assert result.status == "infra_error" and result.infra_error and result.reward == 0.0
    assert result.error == f"{type(error).__name__}: {error}"
    assert factory.made[0].closes == 1


def test_an_empty_patch_skips_apply_and_restore_but_still_runs_the_tests():
    factory = ScriptedFactory(repository())
    assert grade_patch(make_task(), "  \n", runtime_factory=factory).status == "empty_patch"
    assert factory.made == []  # no runtime at all
    result = grade_patch(make_task(), "", runtime_factory=factory, skip_empty=False)
    assert result.status == "resolved" and not result.patch_exists
    assert [cmd.split()[0:2] for cmd in factory.made[0].commands] == [
        ["git", "apply"],
        [f"{RECORD_VARIABLE}={result_record(factory.made[0])}", "timeout"],
    ]
    assert result.to_report()["calc-1"]["patch_exists"] is False


def test_restore_only_touches_protected_paths():
    runtime = ScriptedRuntime("img", "r", repository())
    runtime.start()
    assert restore_test_files(GradingSession(runtime), make_task())
    protected = runtime.files[grading.PROTECTED_LIST_FILE].split(b"\0")
    assert b"calc.py" not in protected and b"pkg/pytest.ini" in protected
    assert b"build/tests/conftest.py" not in protected  # the image's, there before the patch
    clean = ScriptedRuntime("img", "r", lambda cmd: (0, " M calc.py\0"))
    clean.start()
    assert restore_test_files(GradingSession(clean), make_task())
    assert clean.commands == [grading.CHANGES_CMD]  # nothing to restore: no restore command


@dataclasses.dataclass(frozen=True)
class MarkerHarness:
    """A harness of another benchmark: its own command, resolved when the log says OK."""

    applies_test_patch: bool = False

    def command(self, task: Task) -> str:
        return f"run-benchmark-tests {task.instance_id}"

    def score(self, task: Task, log: str) -> Verdict:
        status = {"FAIL_TO_PASS": {"success": [], "failure": []}}
        status["FAIL_TO_PASS"]["success" if "OK" in log else "failure"].append("suite")
        return Verdict(status, "OK" in log)


@pytest.mark.parametrize(
    "log, status", [("suite OK\n", "resolved"), ("suite FAIL\n", "unresolved")]
)
def test_a_harness_decides_how_tests_run_and_how_their_log_is_scored(log, status):
    def respond(cmd: str) -> tuple[int | None, str]:
        return (0, log) if "run-benchmark-tests" in cmd else repository()(cmd)

    factory = ScriptedFactory(respond)
    result = grade_patch(make_task(), PATCH, runtime_factory=factory, harness=MarkerHarness())
    assert result.status == status
    assert factory.made[0].commands[-1] == "timeout -k 5 300 bash -c 'run-benchmark-tests calc-1'"
    assert result.test_log.endswith(f"$ run-benchmark-tests calc-1\n{log}")


def test_harness_for_picks_by_layout_and_expected_status_map():
    assert isinstance(harness_for(make_task()), PytestHarness)
    assert isinstance(harness_for(make_task(layout="swebench")), SwebenchHarness)
    r2e = make_task(expected_output_json={"test_add": "PASSED", "test_mul": "FAILED"})
    assert isinstance(harness_for(r2e), R2EHarness)
    log = PASSING_LOG.replace(
        "PASSED tests/test_calc.py::test_mul", "FAILED tests/test_calc.py::test_mul"
    )
    verdict = R2EHarness().score(r2e, log)
    assert verdict.resolved and verdict.tests_status["PASS_TO_PASS"]["success"] == [
        "test_add",
        "test_mul",
    ]
    assert not PytestHarness().score(make_task(), log).resolved


HARNESS_SECTIONS = (
    "diff --git a/run_tests.sh b/run_tests.sh\n--- a/run_tests.sh\n+++ b/run_tests.sh\n"
    "@@ -1 +1 @@\n-pytest -rA r2e_tests\n+echo PASSED\n"
    "diff --git a/.venv/bin/python b/.venv/bin/python\nnew file mode 100755\n"
    "--- /dev/null\n+++ b/.venv/bin/python\n@@ -0,0 +1 @@\n+#!/bin/sh\n"
    "diff --git a/r2e_tests/test_1.py b/r2e_tests/test_1.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/r2e_tests/test_1.py\n@@ -0,0 +1 @@\n+def test_x(): pass\n"
)


def test_harness_files_never_enter_the_graded_patch_of_an_r2e_gym_task():
    code = "diff --git a/calc.py b/calc.py\n" + PATCH + "\n"
    task = make_task(layout="r2egym", expected_output_json={"test_add": "PASSED"})
    factory = ScriptedFactory(repository())
    grade_patch(task, HARNESS_SECTIONS + code, runtime_factory=factory)
    assert factory.made[0].files[grading.PATCH_FILE] == code.encode()
    # R2E-Gym images bring their tests: no test patch is applied, run_tests.sh runs /r2e_tests.
    assert not any("deepswe_test.patch" in cmd for cmd in factory.made[0].commands)
    assert "bash /testbed/run_tests.sh" in factory.made[0].commands[-1]
    plain = "--- a/run_tests.sh\n+++ b/run_tests.sh\n@@ -1 +1 @@\n-a\n+b\n" + PATCH + "\n"
    assert without_paths(plain, ["run_tests.sh"]) == PATCH + "\n"
    assert without_paths(code, ["calc"]) == code  # a path, not a prefix of a name


def test_swebench_row_without_eval_script_gets_one_of_swebench_shape():
    task = make_task(layout="swebench", repo="pydata/xarray", version="0.12")
    script = SwebenchHarness().command(task)
    lines = script.splitlines()
    assert lines[:4] == [
        "#!/bin/bash",
        "set -uxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
    ]
    start = lines.index(": '>>>>> Start Test Output'")
    assert lines[start + 1 : start + 4] == [
        "pytest -rA tests/test_calc.py",
        "SWEBENCH_TEST_EXIT_CODE=$?",  # swebench's make_test_spec records the exit code
        ": '>>>>> End Test Output'",
    ]
    assert f"git checkout {task.base_commit} tests/test_calc.py" in lines


def test_swebench_4_eval_scripts_for_rows_without_one():
    """swebench 4.x's per-repository specs (constants/python.py, get_test_directives): Django's
    runtests.py with module labels from the test patch, its locale commands and re-install;
    sympy's bin/test with paths."""
    test_patch = (
        "diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py\n"
        "--- a/tests/auth_tests/test_validators.py\n+++ b/tests/auth_tests/test_validators.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    django = make_task(
        layout="swebench", repo="django/django", version="3.0", test_patch=test_patch
    )
    lines = SwebenchHarness().command(django).splitlines()
    start = lines.index(": '>>>>> Start Test Output'")
    assert lines[start + 1] == (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
        "auth_tests.test_validators"
    )
    assert lines.index("export LC_ALL=en_US.UTF-8") < lines.index("python -m pip install -e .")
    assert "./tests/runtests.py --verbosity 2 auth_tests.test_validators" in (
        SwebenchHarness().command(dataclasses.replace(django, version="1.9"))
    )
    sympy = make_task(layout="swebench", repo="sympy/sympy", version="1.1")
    assert (
        "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose "
        "tests/test_calc.py" in SwebenchHarness().command(sympy).splitlines()
    )
