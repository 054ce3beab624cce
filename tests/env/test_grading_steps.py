"""grade_patch's steps (apply, restore test files, apply test_patch, run, score) driven on an
in-memory Runtime: the commands each step runs, how a failing step decides the status, and a
Harness of its own deciding how tests run and are scored. tests/env/test_grading.py grades the
same way in real containers."""

from __future__ import annotations

import dataclasses
import shlex
import textwrap

import pytest

from deepswe_jax.env import grading
from deepswe_jax.env.grading import GradingSession, grade_patch, restore_test_files
from deepswe_jax.env.harness import PytestHarness, R2EHarness, Verdict, harness_for
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
# git status -z: a new conftest.py, an edited test file, a fix, a new pytest.ini in a subfolder.
CHANGED = "?? conftest.py\0 M tests/test_calc.py\0 M calc.py\0?? pkg/pytest.ini\0"


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


def repository(fail: str = "", test_log: str = PASSING_LOG):
    """respond() of a grading runtime whose step `fail` ('apply', 'restore', 'test_patch',
    'timeout') fails; the test run prints `test_log`."""

    def respond(cmd: str) -> tuple[int | None, str]:
        if cmd.startswith("git apply --verbose /tmp/deepswe_model.patch"):
            return (1, "error: patch failed") if fail == "apply" else (0, "Applied")
        if cmd == grading.GIT_STATUS_CMD:
            return 0, CHANGED
        if cmd == grading.RESTORE_CMD:
            return (1, "checkout failed") if fail == "restore" else (0, "restored")
        if cmd.startswith("git apply --verbose /tmp/deepswe_test.patch"):
            return (1, "does not apply") if fail == "test_patch" else (0, "Applied")
        if cmd.startswith("timeout -k 5"):
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
    assert runtime.commands == [
        grading._apply_cmd(grading.PATCH_FILE),
        grading.GIT_STATUS_CMD,
        grading.RESTORE_CMD,
        f"git apply --verbose {grading.TEST_PATCH_FILE}",
        f"timeout -k 5 60 bash -c {shlex.quote(test_cmd)}",
    ]
    assert runtime.files == {
        grading.PATCH_FILE: (PATCH + "\n").encode(),  # a final newline added
        grading.PROTECTED_LIST_FILE: b"conftest.py\0tests/test_calc.py\0pkg/pytest.ini\0",
        grading.TEST_PATCH_FILE: TEST_PATCH.encode(),
    }
    outputs = ["Applied", CHANGED, "restored", "Applied", PASSING_LOG]
    logged = [grading._apply_cmd(grading.PATCH_FILE), *runtime.commands[1:4], test_cmd]
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
    assert error in result.error and len(factory.made[0].commands) == commands
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
        ["timeout", "-k"],
    ]


def test_restore_only_touches_protected_paths():
    runtime = ScriptedRuntime("img", "r", repository())
    runtime.start()
    assert restore_test_files(GradingSession(runtime), make_task())
    protected = runtime.files[grading.PROTECTED_LIST_FILE].split(b"\0")
    assert b"calc.py" not in protected and b"pkg/pytest.ini" in protected
    clean = ScriptedRuntime("img", "r", lambda cmd: (0, " M calc.py\0"))
    clean.start()
    assert restore_test_files(GradingSession(clean), make_task())
    assert clean.commands == [grading.GIT_STATUS_CMD]  # nothing to restore: no restore command


@dataclasses.dataclass(frozen=True)
class MarkerHarness:
    """A harness of another benchmark: its own command, resolved when the log says OK."""

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


def test_harness_for_picks_r2e_for_an_expected_status_map():
    assert isinstance(harness_for(make_task()), PytestHarness)
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
