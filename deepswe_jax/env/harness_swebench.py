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

Rows without `eval_script` (datasets from before swebench 5) get a script of the same shape
built here: the conda activation, the reset of the test patch's files, the test patch, and
`task.test_cmd` or `pytest -rA <test files of the test patch>` between the markers, read with
swebench's parser for the repository (MAP_REPO_TO_PARSER_PY). swebench 5 no longer ships the
per-repository specs that older rows relied on, so such a row's per-repository test options
and pre-test commands are not reproduced; repositories whose tests are not pytest's (Django,
sympy) need the row's eval_script and are refused.

swebench is imported on first use (its harness package takes seconds to import).
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import types
from dataclasses import dataclass
from typing import Any

from deepswe_jax.env.harness import Verdict, empty_tests_status
from deepswe_jax.env.tasks import Task

TESTBED = "/testbed"
ACTIVATE = ("source /opt/miniconda3/bin/activate", "conda activate testbed")
DEFAULT_TEST_CMD = "pytest -rA"
# How swebench's pytest-family parsers are named; other parsers read other runners' output.
PYTEST_PARSERS = frozenset(
    {"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2", "parse_log_matplotlib"}
)
_DIFF_TARGET = re.compile(r"^\+\+\+ b/(.*?)(?:\t.*)?$", re.MULTILINE)


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


def directives(test_patch: str) -> list[str]:
    """The files a test patch writes, without data files (swebench's NON_TEST_EXTS)."""
    non_test = tuple(_swebench().constants.NON_TEST_EXTS)
    return [path for path in _DIFF_TARGET.findall(test_patch) if not path.endswith(non_test)]


def legacy_eval_script(task: Task) -> str:
    """An eval script of swebench's shape for a row that has none (see the module docstring).

    Raises:
      SwebenchRowError: the repository's tests are not pytest's and the row has no test_cmd.
    """
    sw = _swebench()
    parser = task.log_parser or legacy_log_parser(task)
    if parser not in PYTEST_PARSERS and not task.test_cmd:
        raise SwebenchRowError(
            f"{task.instance_id} ({task.repo}) has no eval_script, and {task.repo}'s tests do "
            f"not run under pytest (swebench reads them with {parser}); load the swebench >= 5 "
            "dataset, whose rows carry eval_script, log_parser and eval_type (e.g. "
            "SWE-bench/SWE-bench_Verified), or give the row a test_cmd"
        )
    modified = sw.swebench_utils.get_modified_files(task.test_patch) if task.test_patch else []
    reset = f"git checkout {task.base_commit} {' '.join(modified)}" if modified else "true"
    if task.test_cmd:
        test_command = task.test_cmd
    else:
        test_command = " ".join([DEFAULT_TEST_CMD, *directives(task.test_patch)])
    lines = [*ACTIVATE, f"cd {TESTBED}", f"git config --global --add safe.directory {TESTBED}"]
    lines += [f"git -c core.fileMode=false diff {task.base_commit}", reset]
    if task.test_patch.strip():
        delimiter = sw.swebench_utils.generate_heredoc_delimiter(task.test_patch)
        lines.append(f"git apply -v - <<'{delimiter}'\n{task.test_patch}\n{delimiter}")
    lines += [
        f": '{sw.constants.START_TEST_OUTPUT}'",
        test_command,
        f": '{sw.constants.END_TEST_OUTPUT}'",
        reset,
    ]
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *lines]) + "\n"


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
