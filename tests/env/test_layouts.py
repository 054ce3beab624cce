"""Real task data graded the way the official harnesses grade it, in small images built here
with the official layouts (tests/env/official_layouts.py): SWE-bench rows through the swebench
package's eval script, parser and report (Django runtests, sympy bin/test, pytest ids with
spaces), an R2E-Gym row through /r2e_tests and R2E-Gym's status map, and the agent's tools in
each image's Python environment."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from swebench.harness.constants import APPLY_PATCH_FAIL, EvalType, ResolvedStatus
from swebench.harness.grading import (
    get_eval_report,
    get_eval_tests_report,
    get_logs_eval,
    get_resolution_status,
)
from swebench.harness.utils import make_test_spec

from deepswe_jax.env import r2egym
from deepswe_jax.env.grading.grading import grade_patch
from deepswe_jax.env.grading.harness import PytestHarness
from deepswe_jax.env.grading.harness_swebench import SwebenchHarness
from deepswe_jax.env.grading.patches import patch_paths
from deepswe_jax.env.pool import EnvPool
from tests.env.conftest import TINY_FILES, TINY_GOLD_PATCH, TINY_TEST_PATCH, write_tree
from tests.env.official_layouts import SWEBENCH_ROWS, Row, r2e_row

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows(docker_client, base_image) -> dict[str, Row]:
    makers = {**SWEBENCH_ROWS, "r2e": r2e_row}
    return {name: make(docker_client, base_image) for name, make in makers.items()}


def eval_output(row: Row, test_log: str) -> str:
    """What the eval script printed: the last entry of a grade's log."""
    script = SwebenchHarness().command(row.task)
    return test_log.split(f"$ {script}\n", 1)[1]


def swebench_resolves(row: Row, output: str, tmp_path: Path) -> bool:
    """The swebench package's own verdict on an eval script's output: its TestSpec of the row,
    get_logs_eval (markers, the row's parser), get_eval_tests_report, get_resolution_status."""
    task = row.task
    spec = make_test_spec(
        {
            "instance_id": task.instance_id,
            "image": task.image,
            "repo": task.repo,
            "version": task.version,
            "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
            "PASS_TO_PASS": list(task.PASS_TO_PASS),
            "log_parser": task.log_parser,
            "eval_type": task.eval_type,
            "eval_script": task.eval_script,
        }
    )
    log = tmp_path / "test_output.txt"
    log.write_text(output)
    status_map, found = get_logs_eval(spec, str(log))
    reference = {"FAIL_TO_PASS": spec.FAIL_TO_PASS, "PASS_TO_PASS": spec.PASS_TO_PASS}
    report = get_eval_tests_report(status_map, reference, eval_type=EvalType(spec.eval_type))
    return found and get_resolution_status(report) == ResolvedStatus.FULL.value


@pytest.mark.parametrize("name", sorted(SWEBENCH_ROWS))
def test_swebench_row_graded_by_swebench_eval_script_parser_and_report(
    name, rows, docker_client, run_label, tmp_path
):
    row = rows[name]
    task = row.task
    grading = dict(client=docker_client, run_label=run_label)
    gold = grade_patch(task, task.patch, **grading)
    empty = grade_patch(task, "", skip_empty=False, **grading)
    wrong = grade_patch(task, row.wrong_patch, **grading)

    assert gold.status == "resolved", gold.test_log[-3000:]
    assert empty.status == "unresolved", empty.test_log[-3000:]
    assert wrong.status == "unresolved", wrong.test_log[-3000:]
    assert gold.tests_status["FAIL_TO_PASS"]["success"] == list(task.FAIL_TO_PASS)
    assert empty.tests_status["FAIL_TO_PASS"]["failure"] == list(task.FAIL_TO_PASS)
    for result in (gold, empty, wrong):
        output = eval_output(row, result.test_log)
        assert "+ conda activate testbed" in output and ">>>>> Test Exit Code" in output
        assert swebench_resolves(row, output, tmp_path) is result.resolved
        assert result.to_report()[task.instance_id]["resolved"] is result.resolved
    # Our own pytest reading keeps the whole ids and the runners' output is not pytest's:
    # neither grades these rows (what graded every SWE-bench row before).
    assert not PytestHarness().score(task, eval_output(row, gold.test_log)).resolved


def test_r2e_row_graded_as_r2e_gym_grades_it(rows, docker_client, run_label):
    row = rows["r2e"]
    task = row.task
    assert task.layout == "r2egym" and task.problem_statement.strip() == (
        "Comments starting with ';' are read as keys."
    )
    assert "--- /dev/null\n+++ b/tests/test_comments.py" in task.test_patch  # a new file
    grading = dict(client=docker_client, run_label=run_label)
    gold = grade_patch(task, task.patch, **grading)
    empty = grade_patch(task, "", skip_empty=False, **grading)
    wrong = grade_patch(task, row.wrong_patch, **grading)

    assert gold.status == "resolved", gold.test_log[-3000:]
    assert "XFAIL r2e_tests/test_1.py::test_continuation_line" in gold.test_log  # not recorded
    assert "test_comments" not in gold.test_log  # the commit's test diff is never applied
    assert empty.status == "unresolved" and wrong.status == "unresolved"
    assert empty.tests_status["PASS_TO_PASS"]["failure"] == ["test_semicolon_comment"]


# Where `python` points in the repository's environment, for the agent's commands.
AGENT_PYTHON = {
    "swebench": "/opt/miniconda3/envs/testbed/bin/python",
    "r2egym": "/root/.venv/bin/python",
}


@pytest.mark.parametrize("name", ["django", "sympy", "textfmt", "r2e"])
def test_agent_tools_run_in_the_image_environment_and_the_patch_is_the_edit(name, rows, run_label):
    row = rows[name]

    async def episode():
        async with EnvPool(max_envs=1, run_label=run_label, build_images=False) as pool:
            async with pool.acquire(row.task) as env:
                imported = await env.step(
                    "execute_bash",
                    {"cmd": f'python -c "import {row.dependency}"; command -v python'},
                )
                # The tool server's own environment: the image's python3, not the repository's.
                server = await env.run(f'command -v python3; python3 -c "import {row.dependency}"')
                edited = await env.step(
                    "execute_bash", {"cmd": f"echo '# edited' >> {row.edit_path} && git status"}
                )
                hidden = await env.run("ls /r2e_tests /testbed/run_tests.sh 2>&1; true")
                # R2E-Gym's own tools (the r2egym interface) run with R2E-Gym's PATH: the
                # layout's /root/.venv link makes that the repository's environment too.
                await r2egym.install_tools(env)
                original = await r2egym.call_tool(
                    env, "execute_bash", {"cmd": f'python -c "import {row.dependency}"'}, timeout=60
                )
                return imported, server, edited, hidden, original, await env.patch()

    imported, server, edited, hidden, original, patch = asyncio.run(episode())
    assert imported.exit_code == 0, imported.observation
    assert AGENT_PYTHON[row.task.layout] in imported.observation
    assert server.exit_code != 0 and "ModuleNotFoundError" in server.output
    server_python = server.output.splitlines()[0]
    assert server_python in ("/opt/miniconda3/bin/python3", "/usr/bin/python3"), server.output
    assert edited.exit_code == 0, edited.observation
    assert original.exit_code == 0, original.output
    assert patch_paths(patch) == {row.edit_path}, patch
    assert patch.rstrip().endswith("+# edited")
    if name == "r2e":  # R2E-Gym's set-up: runner moved out of /testbed; hidden tests gone
        assert hidden.output.count("No such file or directory") == 2, hidden.output


def test_report_json_of_empty_and_unapplied_patches_has_swebench_fields(
    rows, docker_client, run_label, tmp_path
):
    task = rows["textfmt"].task
    spec = make_test_spec(
        {
            **{k: getattr(task, k) for k in ("instance_id", "image", "repo", "version")},
            "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
            "PASS_TO_PASS": list(task.PASS_TO_PASS),
            "log_parser": task.log_parser,
            "eval_type": task.eval_type,
            "eval_script": task.eval_script,
        }
    )
    log = tmp_path / "test_output.txt"
    log.write_text(f"{APPLY_PATCH_FAIL}:\nerror: patch failed\n")

    def official(patch: str | None) -> dict:
        prediction = {"instance_id": task.instance_id, "model_patch": patch}
        return get_eval_report(spec, prediction, str(log), include_tests_status=True)

    unapplied = grade_patch(
        task, task.patch.replace("wcswidth", "width_of"), client=docker_client, run_label=run_label
    )
    assert unapplied.status == "apply_failed"
    assert unapplied.to_report() == official("diff")
    none = grade_patch(task, None, client=docker_client)
    assert none.to_report() == official(None)
    empty = grade_patch(task, "", client=docker_client).to_report()[task.instance_id]
    assert set(empty) == set(official(None)[task.instance_id]) and "tests_status" not in empty


def test_hidden_task_row_with_source_and_no_base_commit_validates(tmp_path):
    source = write_tree(tmp_path / "repos" / "tinycalc", TINY_FILES)
    row = {
        "instance_id": "hidden-tinycalc-1",
        "repo": "hidden/tinycalc",
        "problem_statement": "add(2, 3) returns -1 instead of 5.",
        "patch": TINY_GOLD_PATCH,
        "test_patch": TINY_TEST_PATCH,
        "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
        "PASS_TO_PASS": ["tests/test_calc.py::test_mul"],
        "image": "deepswe-test/hidden-tinycalc:base",
        "source": str(source.relative_to(tmp_path)),
    }
    tasks_file = tmp_path / "hidden.jsonl"
    tasks_file.write_text(json.dumps(row) + "\n")
    result = subprocess.run(
        [sys.executable, "launch/validate_tasks.py", f"--tasks={tasks_file}", "--workers=1"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hidden-tinycalc-1" in result.stdout and "1/1 tasks ok" in result.stdout
