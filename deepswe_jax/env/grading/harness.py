"""How a task's tests are run and how their log is read: the grader's test harness.

`grading.grade_patch` prepares the repository (patch applied, test files restored, test_patch
applied unless the harness applies it itself), runs `harness.command(task)` under a timeout and
scores the output with `harness.score(task, log)`. Three harnesses, picked per task by
`grading.harness_for`:

  PytestHarness    our tasks (layout deepswe): `python3 -m pytest -rA` on the FAIL_TO_PASS and
                   PASS_TO_PASS node ids (or `task.test_cmd`); resolved when every one of them
                   is PASSED or XFAIL in the `-rA` short summary (FAILED / ERROR / XPASS /
                   missing fail).
  SwebenchHarness  SWE-bench / SWE-Gym rows (layout swebench): the row's eval script, log
                   parser and report, all from the swebench package (`harness_swebench`).
  R2EHarness       R2E-Gym rows (`expected_output_json`): the image's /r2e_tests through its
                   run_tests.sh, R2E-Gym's status map, compared with the expected map exactly
                   (`harness_r2egym`).

A benchmark with its own way of running tests or its own log format is a new Harness.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from deepswe_jax.env.task_record import Task
from deepswe_jax.env.tools import PYTEST_RECORD_PATH

PASSING = frozenset({"PASSED", "XFAIL"})
SUMMARY_STATUSES = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS", "SKIPPED")
# The repository goes from the front of sys.path to its end, then tools/pytest_record.py runs.
PYTEST_ENTRY = (
    "import os, sys; del sys.path[0]; sys.path.append(os.getcwd()); "
    f"exec(compile(open({PYTEST_RECORD_PATH!r}).read(), {PYTEST_RECORD_PATH!r}, 'exec'))"
)
# The variable naming the path of the result record (tools/pytest_record.py).
RECORD_VARIABLE = "DEEPSWE_RECORD"
TESTS_STATUS_GROUPS = ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$")
_SESSION_FOOTER = re.compile(
    r"^=+ .*\b(passed|failed|error|errors|skipped|deselected|xfailed|xpassed|warnings?|no tests ran)\b.* =+$"
)

TestsStatus = dict[str, dict[str, list[str]]]


def empty_tests_status() -> TestsStatus:
    """SWE-bench's tests_status with no tests: {FAIL_TO_PASS: {success: [], failure: []}, ...}."""
    return {key: {"success": [], "failure": []} for key in TESTS_STATUS_GROUPS}


@dataclass(frozen=True)
class Verdict:
    """What a test log says about a task: SWE-bench's tests_status and whether it is resolved;
    `report` is the benchmark's own per-instance report of that log when its harness makes one
    (swebench's get_eval_report), which `GradeResult.to_report` then returns as is."""

    tests_status: TestsStatus
    resolved: bool
    report: dict | None = None


class Harness(Protocol):
    """How a task's tests run (`command`, a bash command run in /testbed) and how their output
    is scored (`score`). `applies_test_patch`: the command applies `task.test_patch` itself (or
    runs tests that need none), so the grader does not."""

    applies_test_patch: bool

    def command(self, task: Task) -> str: ...

    def score(self, task: Task, log: str) -> Verdict: ...


def selected_tests_command(task: Task) -> str:
    """`task.test_cmd`, else pytest with `-rA` on its FAIL_TO_PASS and PASS_TO_PASS node ids."""
    return task.test_cmd or default_test_cmd(task.FAIL_TO_PASS + task.PASS_TO_PASS)


@dataclass(frozen=True)
class PytestHarness:
    """SWE-bench semantics over pytest's `-rA` short summary (see the module docstring)."""

    applies_test_patch: bool = False

    def command(self, task: Task) -> str:
        return selected_tests_command(task)

    def score(self, task: Task, log: str) -> Verdict:
        statuses = parse_pytest_summary(log)
        tests_status = empty_tests_status()
        for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            for test_id in getattr(task, group):
                key = "success" if statuses.get(test_id) in PASSING else "failure"
                tests_status[group][key].append(test_id)
        resolved = (
            not tests_status["FAIL_TO_PASS"]["failure"]
            and not tests_status["PASS_TO_PASS"]["failure"]
        )
        return Verdict(tests_status, resolved)


def parse_pytest_summary(log: str) -> dict[str, str]:
    """Per-test status from the `-rA` short test summary of a pytest log.

    Only lines between the last "short test summary info" header and the session
    footer count, so test output that imitates summary lines is ignored. A test
    reported twice (e.g. PASSED then ERROR in teardown) keeps its failing status.

    Returns:
      {node id: 'PASSED' | 'FAILED' | 'ERROR' | 'XFAIL' | 'XPASS'}; skipped tests
      are not listed (their summary lines name a file location, not a node id).
    """
    statuses: dict[str, str] = {}
    for line in summary_lines(log):
        status, _, rest = line.partition(" ")
        if status not in SUMMARY_STATUSES or status == "SKIPPED" or not rest:
            continue
        node_id = _strip_message(rest)
        if statuses.get(node_id) not in ("FAILED", "ERROR"):
            statuses[node_id] = status
    return statuses


def summary_lines(log: str) -> list[str]:
    lines = [line.rstrip("\r") for line in _strip_ansi(log).splitlines()]
    start = None
    for i, line in enumerate(lines):
        if _SUMMARY_HEADER.match(line):
            start = i + 1
    if start is None:
        return []
    end = len(lines)
    for i in range(start, len(lines)):
        if _SESSION_FOOTER.match(lines[i]):
            end = i
            break
    return lines[start:end]


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _strip_message(rest: str) -> str:
    """The node id of a summary line's remainder: everything before the first " - "
    that lies outside the parametrization brackets."""
    depth = 0
    for i, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif depth == 0 and rest.startswith(" - ", i):
            return rest[:i]
    return rest


def default_test_cmd(test_ids: Iterable[str]) -> str:
    """pytest with `-rA` on the given node ids (quoted for the shell).

    Runs like `python3 -m pytest`, but with the repository root last on sys.path (no file of
    it can stand in for a module of the environment), a result record when the grader asks
    for one (`RECORD_VARIABLE`), and leaving with `os._exit`, so code under test cannot print
    a fake summary after the real one from an atexit handler or a lingering thread
    (tools/pytest_record.py).
    """
    ids = " ".join(shlex.quote(test_id) for test_id in sorted(set(test_ids)))
    return f"python3 -c {shlex.quote(PYTEST_ENTRY)} -rA --color=no -p no:cacheprovider {ids}"
