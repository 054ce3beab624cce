"""Execution checks (verify/execution.py) run the repository's tests in the environment of the
image's layout, as the agent's commands and grading do, on the layout images of
tests/env/official_layouts.py. Before: they ran the image's own python3, which lacks the
repository's dependencies (wcwidth in conda's testbed, tomlkit in R2E-Gym's /testbed/.venv),
so no existing test passed at the base commit."""

from __future__ import annotations

import dataclasses

import pytest

from deepswe_jax.verify.execution import layout_test_cmd, regression_tests, score_candidates
from tests.env.test_layouts import rows  # noqa: F401  (the layout images' rows, a fixture)

# The existing tests of each layout image's repository and what its wrong patch breaks.
EXPECTED = {
    "textfmt": (
        ("tests/test_fmt.py::test_pad_single_word", "tests/test_fmt.py::test_pad_wider_than_field"),
        0.5,  # the padding is off by one: test_pad_single_word fails
    ),
    "r2e": (("tests/test_parse.py::test_key_value",), 1.0),  # '; ' vs ';' breaks no old test
}


def test_layout_test_cmd_enters_the_layouts_environment_first():
    assert layout_test_cmd("deepswe", ["t.py"]).startswith("python3 -c ")
    swebench = layout_test_cmd("swebench", ["t.py"])
    assert swebench.index("conda activate testbed") < swebench.index("python3 -c ")
    r2e = layout_test_cmd("r2egym", ["t.py"])
    assert r2e.index("ln -sfn /testbed/.venv /root/.venv") < r2e.index("export PATH=/root/.venv")


@pytest.mark.parametrize("name", ["textfmt", "r2e"])
def test_execution_checks_run_in_the_layouts_environment(name, rows, run_label):  # noqa: F811
    row = rows[name]
    task = dataclasses.replace(row.task, PASS_TO_PASS=())  # the whole suite
    regression = regression_tests(task, run_label=run_label)
    tests, wrong_score = EXPECTED[name]
    assert [node.split("[")[0] for node in regression] == list(tests)
    wrong, unchanged = score_candidates(
        task, [row.wrong_patch, ""], regression=regression, run_label=run_label
    )
    assert wrong.measured and wrong.regression_score == wrong_score, wrong
    assert unchanged.regression_score == 1.0, unchanged
