"""SWE-bench grading with the swebench package's own pieces (tested with swebench 5.0.2).

What runs in the container and how its log is read come from swebench; the fresh container,
the patch application, the restoring of test files and the accounting of infrastructure
failures stay ours (`grading.grade_patch`).

- The eval script: since swebench 5 the dataset row carries it (`eval_script`, with the
  repository's test command, the test directives from the test patch and its pre-test
  commands: `source /opt/miniconda3/bin/activate; conda activate testbed; ...`). swebench's
  `make_test_spec` turns the row into a TestSpec whose eval script also records the test
  command's exit code (`record_test_exit_code`); that script is the command we run.
- The log: swebench's `get_eval_report` reads it with the row's `log_parser` (PARSER_REGISTRY:
  Django's runtests output, sympy's bin/test, pytest keyed on the first field after the
  status, ...) between the ">>>>> Start/End Test Output" markers, grades with the row's
  `eval_type`, and decides the resolution (get_resolution_status == RESOLVED_FULL: skipped
  PASS_TO_PASS tests count as kept). Its report is the GradeResult's report.json entry.

Rows without `eval_script` (datasets from before swebench 5) get the script swebench 4.x
built (`make_eval_script_list_py`): the conda activation, the repository's eval commands and
install (`swebench_specs.repo_spec`: Django's locale and re-install, sympy's re-install), the
reset of the test patch's files, the test patch, and the repository's test command with the
test patch's directives (Django's runtests.py module labels, sympy's bin/test paths, pytest
options per repository; `task.test_cmd` replaces it) between the markers, read with swebench's
parser for the repository (MAP_REPO_TO_PARSER_PY). A row that still cannot be graded (a
non-pytest parser swebench 4.x had no spec for, an unknown parser or eval type) is refused
when the task file loads (`check_gradable`).

swebench is imported on first use (its harness package takes seconds to import).
"""

from __future__ import annotations

import functools
import os
import tempfile
import types
from dataclasses import dataclass
from typing import Any

from deepswe_jax.env.grading.harness import Verdict, empty_tests_status
from deepswe_jax.env.grading.swebench_specs import eval_directives, repo_spec
from deepswe_jax.env.task_record import Task

TESTBED = "/testbed"
PYTEST_CMD = "pytest -rA"
ACTIVATE = ("source /opt/miniconda3/bin/activate", "conda activate testbed")
# How swebench's pytest-family parsers are named; other parsers read other runners' output.
PYTEST_PARSERS = frozenset(
    {
        "parse_log_pytest",
        "parse_log_pytest_options",
        "parse_log_pytest_v2",
        "parse_log_matplotlib",
        "parse_log_seaborn",
    }
)


class SwebenchRowError(ValueError):
    """A SWE-bench row cannot be graded as it is (e.g. no eval_script for Django)."""


@functools.cache
def _swebench() -> Any:
    """The swebench modules used here, imported once."""
    import swebench.harness.constants as constants
    import swebench.harness.grading as grading
    import swebench.harness.log_parsers.python as python_parsers
    import swebench.harness.utils as utils
    import swebench.utils as swebench_utils

    return types.SimpleNamespace(
        constants=constants,
        grading=grading,
        python_parsers=python_parsers,
        utils=utils,
        swebench_utils=swebench_utils,
    )


def swebench_instance(task: Task) -> dict[str, Any]:
    """The task as the swebench >= 5 dataset row `make_test_spec` takes (the legacy eval
    script, parser and eval type filled in for rows without them)."""
    sw = _swebench()
    eval_type = task.eval_type or (
        "fail_only" if task.repo in sw.constants.FAIL_ONLY_REPOS else "pass_and_fail"
    )
    return {
        "instance_id": task.instance_id,
        "image": task.image,
        "repo": task.repo,
        "version": task.version,
        "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS),
        "log_parser": task.log_parser or legacy_log_parser(task),
        "eval_type": eval_type,
        "eval_script": task.eval_script or legacy_eval_script(task),
    }


def swebench_spec(task: Task) -> Any:
    """swebench's TestSpec of the task (`swebench.harness.utils.make_test_spec`)."""
    return _swebench().utils.make_test_spec(swebench_instance(task))


def legacy_log_parser(task: Task) -> str:
    """swebench's parser for the repository of a row without `log_parser` (its PARSER_REGISTRY
    name), parse_log_pytest for repositories swebench does not know."""
    parser = _swebench().python_parsers.MAP_REPO_TO_PARSER_PY.get(task.repo)
    return parser.__name__ if parser is not None else "parse_log_pytest"


def legacy_test_command(task: Task) -> str:
    """`task.test_cmd`, else swebench 4.x's test command of the repository (pytest -rA where it
    had no other) followed by the test patch's directives."""
    if task.test_cmd:
        return task.test_cmd
    spec = repo_spec(task.repo, task.version)
    non_test = tuple(_swebench().constants.NON_TEST_EXTS)
    test_cmd = spec.test_cmd if spec is not None else PYTEST_CMD
    return " ".join([test_cmd, *eval_directives(task.repo, task.test_patch, non_test)])


def legacy_eval_script(task: Task) -> str:
    """The eval script swebench 4.x's make_eval_script_list_py built for a row without one
    (see the module docstring).

    Raises:
      SwebenchRowError: swebench 4.x had no spec for the repository, its tests are not
        pytest's, and the row has no test_cmd.
    """
    sw = _swebench()
    parser = task.log_parser or legacy_log_parser(task)
    spec = repo_spec(task.repo, task.version)
    if spec is None and parser not in PYTEST_PARSERS and not task.test_cmd:
        raise SwebenchRowError(
            f"{task.instance_id} ({task.repo}) has no eval_script, and {task.repo}'s tests do "
            f"not run under pytest (swebench reads them with {parser}); load the swebench >= 5 "
            "dataset, whose rows carry eval_script, log_parser and eval_type (e.g. "
            "SWE-bench/SWE-bench_Verified), or give the row a test_cmd"
        )
    modified = sw.swebench_utils.get_modified_files(task.test_patch) if task.test_patch else []
    reset = f"git checkout {task.base_commit} {' '.join(modified)}" if modified else "true"
    lines = [*ACTIVATE, f"cd {TESTBED}", *(spec.eval_commands if spec else ())]
    lines += [f"git config --global --add safe.directory {TESTBED}", f"cd {TESTBED}"]
    lines += ["git status", "git show", f"git -c core.fileMode=false diff {task.base_commit}"]
    lines += [*ACTIVATE, *([spec.install] if spec and spec.install else []), reset]
    if task.test_patch.strip():
        delimiter = sw.swebench_utils.generate_heredoc_delimiter(task.test_patch)
        lines.append(f"git apply -v - <<'{delimiter}'\n{task.test_patch}\n{delimiter}")
    lines += [
        f": '{sw.constants.START_TEST_OUTPUT}'",
        legacy_test_command(task),
        f": '{sw.constants.END_TEST_OUTPUT}'",
        reset,
    ]
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *lines]) + "\n"


def check_gradable(task: Task) -> None:
    """Raises SwebenchRowError, saying what to change, when grading could not run or read
    `task`'s tests: no eval script can be built, or its log_parser or eval_type is unknown."""
    sw = _swebench()
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if task.log_parser and task.log_parser not in PARSER_REGISTRY:
        raise SwebenchRowError(
            f"{task.instance_id}: log_parser {task.log_parser!r} is not one of swebench's "
            f"parsers (swebench.harness.log_parsers.PARSER_REGISTRY, e.g. parse_log_pytest); "
            "fix the row's log_parser or leave it empty to use the repository's"
        )
    eval_types = {member.value for member in sw.constants.EvalType}
    if task.eval_type and task.eval_type not in eval_types:
        raise SwebenchRowError(
            f"{task.instance_id}: eval_type {task.eval_type!r} is not one of "
            f"{sorted(eval_types)}; fix the row's eval_type or leave it empty"
        )
    if not task.eval_script:
        legacy_eval_script(task)


@dataclass(frozen=True)
class SwebenchHarness:
    """SWE-bench grading by the swebench package (see the module docstring)."""

    applies_test_patch: bool = True  # the eval script resets the test files and applies it

    def command(self, task: Task) -> str:
        return swebench_spec(task).eval_script

    def score(self, task: Task, log: str) -> Verdict:
        report = official_report(task, log, patch="(graded)")
        return Verdict(
            report.get("tests_status") or empty_tests_status(), report["resolved"], report
        )


def official_report(task: Task, log: str, *, patch: str | None) -> dict[str, Any]:
    """swebench's `get_eval_report` entry for `task` given the eval script's output `log` and a
    prediction whose model_patch is `patch` (only None or not matters to it)."""
    sw = _swebench()
    prediction = {
        "instance_id": task.instance_id,
        "model_name_or_path": "deepswe",
        "model_patch": patch,
    }
    with tempfile.TemporaryDirectory(prefix="deepswe-swebench-") as scratch:
        log_path = os.path.join(scratch, "test_output.txt")
        with open(log_path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(log)
        report = sw.grading.get_eval_report(
            test_spec=swebench_spec(task),
            prediction=prediction,
            test_log_path=log_path,
            include_tests_status=True,
        )
    return report[task.instance_id]
