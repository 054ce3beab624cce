"""R2E-Gym's grading (r2egym/agenthub/runtime/docker.py, _calculate_reward_r2e): the image's
hidden tests at /r2e_tests run through the image's /testbed/run_tests.sh, the log is read with
R2E-Gym's pytest parser, and the task is resolved when the status map equals the row's
`expected_output_json`.

R2E-Gym links /r2e_tests into the repository for the run (run_tests.sh runs
`pytest -rA r2e_tests` from /testbed) and runs with PATH=/root/.venv/bin:... and /root/.venv
linked to /testbed/.venv. It never applies the commit's test diff: the tests are in the image.

Its parser (r2egym/repo_analysis/execution_log_parser.py, parse_log_pytest) reads the lines after
"short test summary info": a line containing PASSED, else FAILED, else ERROR gives that status to
the node id without its file part, "::" joined by "." ("TestDates.test_iso_week"), cut at " - ";
XFAIL, XPASS and SKIPPED lines are not recorded. Its comparison strips ANSI colours and " - ..."
from both maps' keys, requires the same number of entries, and every non-empty key of the run's
map to be expected with the same status. One deliberate difference: the section ends at pytest's
session footer, so text printed after the session cannot add entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deepswe_jax.env.grading.harness import (
    Verdict,
    default_test_cmd,
    empty_tests_status,
    summary_lines,
)
from deepswe_jax.env.layouts import R2E_PATH
from deepswe_jax.env.task_record import Task

R2E_STATUSES = ("PASSED", "FAILED", "ERROR")  # in the order R2E-Gym's parser tests them
RUN_TESTS_CMD = (
    "ln -sfn /testbed/.venv /root/.venv; "
    "rm -rf /testbed/r2e_tests && ln -s /r2e_tests /testbed/r2e_tests && "
    f"PATH={R2E_PATH} bash /testbed/run_tests.sh"
)
_ANSI_COLOUR = re.compile(r"\x1b\[\d+m")  # R2E-Gym's decolor_dict_keys


def r2e_status_map(log: str) -> dict[str, str]:
    """{test name: PASSED | FAILED | ERROR} of a run_tests.sh log, as R2E-Gym parses it."""
    statuses: dict[str, str] = {}
    for line in summary_lines(log):
        for status in R2E_STATUSES:
            if status in line:
                name = ".".join(line.split("::")[1:])
                statuses[name if status == "PASSED" else name.split(" - ")[0]] = status
                break
    return statuses


def r2e_key(name: str) -> str:
    """A status-map key as R2E-Gym compares it: colours stripped, cut at " - "."""
    return _ANSI_COLOUR.sub("", name).split(" - ")[0]


def r2e_matches(observed: dict[str, str], expected: dict[str, str]) -> bool:
    """R2E-Gym's comparison of a run's status map with `expected_output_json`."""
    observed = {r2e_key(k): v for k, v in observed.items()}
    expected = {r2e_key(k): v for k, v in expected.items()}
    if len(observed) != len(expected):
        return False
    return all(not k or (k in expected and expected[k] == v) for k, v in observed.items())


@dataclass(frozen=True)
class R2EHarness:
    """R2E-Gym's exact status map (see the module docstring); PASS_TO_PASS lists the expected
    tests whose status matched / did not.

    In R2E-Gym images (layout r2egym) the tests come with the image and run through its
    run_tests.sh; a task of another layout graded by an expected map gets its test_patch applied
    by the grader and runs `task.test_cmd` (default: pytest -rA on the whole suite)."""

    applies_test_patch: bool = True

    def command(self, task: Task) -> str:
        if task.test_cmd:
            return task.test_cmd
        return RUN_TESTS_CMD if task.layout == "r2egym" else default_test_cmd(())

    def score(self, task: Task, log: str) -> Verdict:
        observed = r2e_status_map(log)
        expected = task.expected_output_json or {}
        keyed = {r2e_key(k): v for k, v in observed.items()}
        tests_status = empty_tests_status()
        for name, status in sorted((r2e_key(k), v) for k, v in expected.items()):
            key = "success" if keyed.get(name) == status else "failure"
            tests_status["PASS_TO_PASS"][key].append(name)
        return Verdict(tests_status, r2e_matches(observed, expected))
