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


ONELINE = REPO_ROOT / "tasks" / "oneline"


def test_the_oneline_family_validates_on_a_sample_and_holds_out_its_names(tmp_path, docker_client):
    """tasks/oneline (issue 15): the main job's training tasks and one held-out task per
    repository resolve with gold and not with the empty patch, on one shared image per repository;
    held-out tasks name functions and files no training task names."""

    def rows(name):
        return [json.loads(line) for line in (ONELINE / name).read_text().splitlines() if line]

    def names(tasks):  # "<repository>-<name>": the name of the function and file the task fixes
        return {row["instance_id"].split("-", 1)[1] for row in tasks}

    train, held_out = rows("train.jsonl"), rows("held_out.jsonl")
    assert not names(train) & names(held_out)
    assert {row["image"] for row in train} == {row["image"] for row in held_out}
    assert len({row["image"] for row in train}) == len({row["repo"] for row in train})

    first_per_repo = {row["repo"]: row for row in reversed(held_out)}
    sample = rows("train_small.jsonl") + list(first_per_repo.values())
    for row in sample:
        row["source"] = str(ONELINE / row["source"])
    tasks_file = tmp_path / "oneline_sample.jsonl"
    tasks_file.write_text("".join(json.dumps(row) + "\n" for row in sample))
    result = run_validate(tasks_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(sample)}/{len(sample)} tasks ok" in result.stdout, result.stdout
