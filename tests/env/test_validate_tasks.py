"""launch/validate_tasks.py: every shipped task is solved by its gold patch and not by doing nothing."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TASKS = REPO_ROOT / "tasks" / "tasks.jsonl"


def run_validate(tasks_file: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "launch/validate_tasks.py", f"--tasks={tasks_file}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_every_shipped_task_validates(docker_client):
    assert SHIPPED_TASKS.exists(), f"{SHIPPED_TASKS} is missing; run python tasks/build_suite.py"
    count = sum(1 for line in SHIPPED_TASKS.read_text().splitlines() if line.strip())
    result = run_validate(SHIPPED_TASKS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{count}/{count} tasks ok" in result.stdout, result.stdout


def test_a_task_solved_by_the_empty_patch_fails_validation(tiny_task, tmp_path, docker_client):
    broken = dataclasses.replace(
        tiny_task,
        instance_id="tinycalc-already-passes",
        FAIL_TO_PASS=(),
        PASS_TO_PASS=tiny_task.PASS_TO_PASS,
    )
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(task.to_row()) + "\n" for task in (tiny_task, broken)))
    result = run_validate(tasks_file)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert lines["tinycalc-1"].endswith("ok")
    assert "FAIL (empty patch resolved" in lines["tinycalc-already-passes"]
    assert "1/2 tasks ok" in result.stdout
    assert "failed: tinycalc-already-passes" in result.stderr
