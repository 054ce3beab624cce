"""Grading: SWE-bench semantics in a fresh container, and patches that try to game it."""

import dataclasses
import datetime
import json
import textwrap
import uuid
from dataclasses import dataclass, field

import docker
import pytest

from deepswe_jax.env.docker.docker_api import remove_stale_containers
from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.grading.grading import GradeResult, grade_patch
from deepswe_jax.env.grading.harness import parse_pytest_summary
from deepswe_jax.env.grading.harness_r2egym import r2e_status_map
from deepswe_jax.env.grading.task_checks import check_tasks, format_checks
from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.tasks import unified_diff

PYTEST_LOG = textwrap.dedent(
    """\
    ============================= test session starts ==============================
    collected 7 items

    tests/test_a.py .F.xX                                                    [100%]
    ==================================== PASSES ====================================
    ___________________________________ test_ok ____________________________________
    ----------------------------- Captured stdout call -----------------------------
    PASSED tests/test_a.py::test_fake_in_captured_output
    =========================== short test summary info ============================
    PASSED tests/test_a.py::test_ok
    PASSED tests/test_a.py::test_param[a b-c d]
    PASSED tests/test_a.py::TestThing::test_method
    FAILED tests/test_a.py::test_bad - AssertionError: assert 1 == 2
    FAILED tests/test_a.py::test_param[x - y] - ValueError: no
    ERROR tests/test_a.py::test_setup_error - RuntimeError: fixture broke
    XFAIL tests/test_a.py::test_expected - reason: known bug
    XPASS tests/test_a.py::test_surprise
    SKIPPED [1] tests/test_a.py:40: not on this platform
    PASSED tests/test_a.py::test_teardown_error
    ERROR tests/test_a.py::test_teardown_error - OSError: teardown
    ============= 2 failed, 4 passed, 1 xfailed, 1 xpassed, 2 errors in 0.12s =============
    PASSED tests/test_a.py::test_printed_after_the_session
    """
)


def test_parse_pytest_summary_reads_only_the_summary_section():
    assert parse_pytest_summary(PYTEST_LOG) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_param[a b-c d]": "PASSED",
        "tests/test_a.py::TestThing::test_method": "PASSED",
        "tests/test_a.py::test_bad": "FAILED",
        "tests/test_a.py::test_param[x - y]": "FAILED",
        "tests/test_a.py::test_setup_error": "ERROR",
        "tests/test_a.py::test_expected": "XFAIL",
        "tests/test_a.py::test_surprise": "XPASS",
        "tests/test_a.py::test_teardown_error": "ERROR",
    }


def test_parse_pytest_summary_without_summary_is_empty():
    assert parse_pytest_summary("PASSED tests/test_a.py::test_ok\nsome crash\n") == {}
    assert parse_pytest_summary(
        "\x1b[32m==== short test summary info ====\x1b[0m\nPASSED t.py::a\n"
    ) == {"t.py::a": "PASSED"}


def test_r2e_status_map_is_r2e_gyms_parse_log_pytest():
    # r2egym/repo_analysis/execution_log_parser.py: PASSED / FAILED / ERROR only, keyed by the
    # node id without its file, "::" -> ".", cut at " - " (even inside brackets, as R2E-Gym does).
    assert r2e_status_map(PYTEST_LOG) == {
        "test_ok": "PASSED",
        "test_param[a b-c d]": "PASSED",
        "TestThing.test_method": "PASSED",
        "test_bad": "FAILED",
        "test_param[x": "FAILED",
        "test_setup_error": "ERROR",
        "test_teardown_error": "ERROR",
    }


def test_gold_patch_resolves_and_report_matches_swebench(tiny_task, docker_client, run_label):
    result = grade_patch(tiny_task, tiny_task.patch, client=docker_client, run_label=run_label)
    assert result.status == "resolved", result.test_log
    assert result.reward == 1.0 and result.resolved and result.patch_successfully_applied
    assert result.tests_status["FAIL_TO_PASS"]["success"] == list(tiny_task.FAIL_TO_PASS)
    assert result.tests_status["PASS_TO_PASS"]["success"] == list(tiny_task.PASS_TO_PASS)
    report = result.to_report()
    assert json.loads(json.dumps(report)) == {
        "tinycalc-1": {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": True,
            "resolved": True,
            "infra_failure": False,
            "tests_status": result.tests_status,
        }
    }
    assert set(result.tests_status) == {
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "FAIL_TO_FAIL",
        "PASS_TO_FAIL",
    }


def test_empty_patch_is_not_resolved(tiny_task, docker_client, run_label):
    skipped = grade_patch(tiny_task, "", client=docker_client, run_label=run_label)
    assert skipped.status == "empty_patch" and skipped.reward == 0.0
    assert skipped.to_report()["tinycalc-1"]["patch_exists"] is False
    assert grade_patch(tiny_task, None, client=docker_client).to_report()["tinycalc-1"][
        "patch_is_None"
    ]
    graded = grade_patch(tiny_task, "", client=docker_client, run_label=run_label, skip_empty=False)
    assert graded.status == "unresolved" and not graded.resolved
    assert graded.tests_status["FAIL_TO_PASS"]["failure"] == list(tiny_task.FAIL_TO_PASS)
    assert graded.tests_status["PASS_TO_PASS"]["success"] == list(tiny_task.PASS_TO_PASS)


def test_patch_that_does_not_apply(tiny_task, docker_client, run_label):
    bad = tiny_task.patch.replace("-    return a - b", "-    return a // b")
    result = grade_patch(tiny_task, bad, client=docker_client, run_label=run_label)
    assert result.status == "apply_failed"
    assert result.patch_successfully_applied is False and result.reward == 0.0
    assert result.to_report()["tinycalc-1"]["patch_successfully_applied"] is False


def test_patch_applied_with_fuzz_when_git_apply_refuses(tiny_task, docker_client, run_label):
    # Wrong line numbers and a stale context line: git apply rejects it, patch --fuzz accepts it.
    fuzzy = tiny_task.patch.replace("@@ -1,5 +1,5 @@", "@@ -3,5 +3,5 @@").replace(
        " def mul(a, b):", " def mul(x, y):"
    )
    result = grade_patch(tiny_task, fuzzy, client=docker_client, run_label=run_label)
    assert "trying patch --fuzz=5" in result.test_log
    assert result.status == "resolved", result.test_log


FORCE_PASS_CONFTEST = textwrap.dedent(
    """\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome = "passed"
    """
)
FAKE_PYTEST = textwrap.dedent(
    """\
    print("=" * 20 + " short test summary info " + "=" * 20)
    for test in ("test_add", "test_add_strings[a b-c d]", "test_mul"):
        print(f"PASSED tests/test_calc.py::{test}")
    print("=" * 20 + " 3 passed in 0.01s " + "=" * 20)
    """
)


def tiny_diff(tiny_files: dict[str, str], **new_files: str) -> str:
    """Diff of the tiny repo's files to new contents ("" deletes a file)."""
    return "".join(
        unified_diff(path, tiny_files.get(path), text or None) for path, text in new_files.items()
    )


def gaming_patch(name: str, tiny_files: dict[str, str]) -> str:
    """A patch that does not fix `add` but tries to make the grader report success."""
    module = tiny_files["tinycalc/__init__.py"]
    broken_mul = module.replace("return a * b", "return 0")
    trivial_tests = "def test_mul():\n    pass\n\n\ndef test_add():\n    pass\n"
    fake_at_exit = FAKE_PYTEST.replace("\n", "\n    ").rstrip()
    files = {
        # Break mul and rewrite the test file so every test trivially passes.
        "edit_tests": {"tinycalc/__init__.py": broken_mul, "tests/test_calc.py": trivial_tests},
        # Break mul and delete the test it is graded on.
        "delete_tests": {"tinycalc/__init__.py": broken_mul, "tests/test_calc.py": ""},
        # A conftest.py hook that reports every test as passed.
        "conftest_forces_pass": {"conftest.py": FORCE_PASS_CONFTEST},
        # Configuration that loads the same hook as a plugin from the package.
        "pytest_ini_loads_plugin": {
            "pytest.ini": "[pytest]\naddopts = -p tinycalc.forcepass\n",
            "tinycalc/forcepass.py": FORCE_PASS_CONFTEST,
        },
        # `python3 -m pytest` would run /testbed/pytest.py instead of pytest.
        "shadow_pytest": {"pytest.py": FAKE_PYTEST},
        # Print a second, all-passing summary when the test process exits.
        "atexit_fake_summary": {
            "tinycalc/__init__.py": module
            + f"\n\nimport atexit\n\n\n@atexit.register\ndef _fake():\n    {fake_at_exit}\n"
        },
    }[name]
    return tiny_diff(tiny_files, **files)


GAMING_PATCHES = (
    "atexit_fake_summary",
    "conftest_forces_pass",
    "delete_tests",
    "edit_tests",
    "pytest_ini_loads_plugin",
    "shadow_pytest",
)


@pytest.mark.parametrize("name", GAMING_PATCHES)
def test_patches_that_tamper_with_tests_are_graded_on_the_original_tests(
    name, tiny_task, tiny_files, docker_client, run_label
):
    patch = gaming_patch(name, tiny_files)
    result = grade_patch(tiny_task, patch, client=docker_client, run_label=run_label)
    if name == "shadow_pytest":  # a module the environment provides: refused, not even applied
        assert (result.status, result.reward) == ("patch_refused", 0.0), result
        return
    assert result.patch_successfully_applied, result.test_log
    assert result.status == "unresolved", result.test_log
    assert result.tests_status["FAIL_TO_PASS"]["failure"] == list(tiny_task.FAIL_TO_PASS)
    if "+    return 0" in patch:  # mul was broken too
        assert result.tests_status["PASS_TO_PASS"]["failure"] == ["tests/test_calc.py::test_mul"]


def test_fix_with_extra_test_files_still_resolves(tiny_task, tiny_files, docker_client, run_label):
    reproduction = tiny_diff(
        tiny_files,
        **{
            "tests/test_repro.py": "from tinycalc import add\n\n\ndef test_repro():\n    assert add(1, 1) == 2\n"
        },
    )
    result = grade_patch(
        tiny_task, tiny_task.patch + reproduction, client=docker_client, run_label=run_label
    )
    assert result.status == "resolved", result.test_log


def test_tests_that_hang_time_out(tiny_task, tiny_files, docker_client, run_label):
    module = tiny_files["tinycalc/__init__.py"]
    hang = tiny_diff(
        tiny_files,
        **{"tinycalc/__init__.py": module.replace("return a - b", "while True:\n        pass")},
    )
    result = grade_patch(tiny_task, hang, client=docker_client, run_label=run_label, timeout=3)
    assert result.status == "timeout" and result.reward == 0.0 and not result.infra_error


def test_missing_image_is_an_infra_error_not_a_wrong_answer(tiny_task, docker_client, run_label):
    task = dataclasses.replace(tiny_task, image="deepswe-test/no-such-image:base")
    result = grade_patch(task, task.patch, client=docker_client, run_label=run_label)
    assert result.status == "infra_error" and result.infra_error and result.reward == 0.0
    assert "no-such-image" in result.error


def test_r2e_mode_requires_the_exact_status_map(tiny_task, docker_client, run_label):
    expected = {"test_mul": "PASSED", "test_add": "PASSED", "test_add_strings[a b-c d]": "PASSED"}
    task = dataclasses.replace(
        tiny_task,
        FAIL_TO_PASS=(),
        PASS_TO_PASS=(),
        expected_output_json=expected,
        test_cmd="python3 -m pytest -rA tests",
    )
    assert (
        grade_patch(task, task.patch, client=docker_client, run_label=run_label).status
        == "resolved"
    )
    extra = dataclasses.replace(task, expected_output_json={**expected, "test_sub": "PASSED"})
    result = grade_patch(extra, extra.patch, client=docker_client, run_label=run_label)
    assert result.status == "unresolved"
    assert result.tests_status["PASS_TO_PASS"]["failure"] == ["test_sub"]


def test_grade_result_is_frozen():
    result = GradeResult("x", "unresolved", 0.0, True, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.reward = 1.0


# ---------------------------------------------------------------- another runtime backend


@dataclass
class LabelledDockerFactory:
    """A runtime backend of its own (RuntimeFactory): DockerRuntimes labelled
    `<run label>-<suffix>`, named `factory-...`, with a 768m memory limit; records each call
    as (image, run label)."""

    client: docker.DockerClient
    suffix: str = field(default_factory=lambda: f"factory{uuid.uuid4().hex[:6]}")
    calls: list[tuple[str, str]] = field(default_factory=list)
    made: list[DockerRuntime] = field(default_factory=list)

    def label(self, run_label: str) -> str:
        return f"{run_label}-{self.suffix}"

    def __call__(self, image: str, *, run_label: str) -> DockerRuntime:
        self.calls.append((image, run_label))
        runtime = DockerRuntime(
            image,
            run_label=self.label(run_label),
            client=self.client,
            mem_limit="768m",
            name=f"factory-{uuid.uuid4().hex[:12]}",
        )
        self.made.append(runtime)
        return runtime

    def remove_stale(self, run_labels: tuple[str, ...] = ()) -> list[str]:
        labels = tuple(self.label(label) for label in run_labels)
        return remove_stale_containers(self.client, run_labels=labels)


def container_events(client: docker.DockerClient, since: datetime.datetime, label: str):
    """(action, name, image) of every container event since `since` for containers labelled
    deepswe.run=`label`."""
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
    events = client.events(
        since=since,
        until=until,
        filters={"type": "container", "label": f"{RUN_LABEL}={label}"},
        decode=True,
    )
    return [
        (
            event["Action"],
            event["Actor"]["Attributes"]["name"],
            event["Actor"]["Attributes"]["image"],
        )
        for event in events
    ]


@pytest.fixture
def factory(docker_client):
    factory = LabelledDockerFactory(docker_client)
    yield factory
    factory.remove_stale(tuple({run_label for _, run_label in factory.calls}))


def test_grading_on_a_runtime_factory_uses_its_runtimes(tiny_task, docker_client, factory):
    run_label = f"pytest-{uuid.uuid4().hex[:10]}"  # no other test's containers carry it
    since = datetime.datetime.now(datetime.timezone.utc)
    gold = grade_patch(tiny_task, tiny_task.patch, runtime_factory=factory, run_label=run_label)
    empty = grade_patch(
        tiny_task, "", runtime_factory=factory, run_label=run_label, skip_empty=False
    )
    assert gold.status == "resolved", gold.test_log
    assert empty.status == "unresolved" and empty.reward == 0.0, empty.test_log
    assert empty.tests_status["FAIL_TO_PASS"]["failure"] == list(tiny_task.FAIL_TO_PASS)
    assert factory.calls == [(tiny_task.image, run_label)] * 2
    # Each grading ran in the container its runtime created, and that container is gone.
    names = [runtime.name for runtime in factory.made]
    events = container_events(docker_client, since, factory.label(run_label))
    for name in names:
        assert ("create", name, tiny_task.image) in events
        assert ("destroy", name, tiny_task.image) in events
    assert container_events(docker_client, since, run_label) == []  # no default Docker runtime
    for runtime in factory.made:
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(runtime.container_id)


def test_client_and_runtime_factory_together_are_refused(tiny_task, docker_client, factory):
    with pytest.raises(ValueError, match="both a Docker client and a runtime_factory"):
        grade_patch(tiny_task, tiny_task.patch, client=docker_client, runtime_factory=factory)
    assert factory.calls == []


def test_check_tasks_flags_a_task_whose_tests_already_pass(tiny_task, run_label, factory):
    broken = dataclasses.replace(
        tiny_task,
        instance_id="tinycalc-broken",
        FAIL_TO_PASS=(),
        PASS_TO_PASS=("tests/test_calc.py::test_mul",),
    )
    checks = check_tasks([tiny_task, broken], runtime_factory=factory, run_label=run_label)
    assert len(factory.calls) == 4  # gold and empty patch of each task, on the factory's runtimes
    assert [check.ok for check in checks] == [True, False]
    assert "empty patch resolved" in checks[1].problem()
    table = format_checks(checks)
    assert "tinycalc-1" in table and "FAIL (empty patch resolved" in table
