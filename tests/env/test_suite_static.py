"""Static checks of the shipped task suite (tasks/tasks.jsonl); no Docker, no test runs.

The suite is verified by running tests in tasks/build_suite.py and, in containers, by
launch/validate_tasks.py; these checks catch a stale or hand-edited tasks.jsonl fast.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from deepswe_jax.env.docker.images import commit_tree
from deepswe_jax.env.tasks import Task, is_test_path, load_tasks

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
TASKS_FILE = TASKS_DIR / "tasks.jsonl"
HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks(TASKS_FILE)


def repo_name(task: Task) -> str:
    return task.repo.split("/", 1)[1]


def patched_files(patch: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/\S+$", patch, re.MULTILINE)


def diff_problems(patch: str) -> list[str]:
    """What is malformed in a unified git diff: missing headers, hunk sizes that disagree."""
    if not patch.startswith("diff --git a/"):
        return ["does not start with 'diff --git a/'"]
    problems = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE)[1:]:
        lines = section.splitlines()
        if not any(line.startswith("--- ") for line in lines) or not any(
            line.startswith("+++ ") for line in lines
        ):
            problems.append(f"{lines[0]}: no ---/+++ file header")
        index = next((i for i, line in enumerate(lines) if HUNK_HEADER.match(line)), len(lines))
        if index == len(lines):
            problems.append(f"{lines[0]}: no hunk")
        while index < len(lines):
            old_count, new_count = (
                int(n) if n else 1 for n in HUNK_HEADER.match(lines[index]).groups()
            )
            index += 1
            while index < len(lines) and (old_count > 0 or new_count > 0):
                line = lines[index]
                if line.startswith("\\"):
                    index += 1
                    continue
                if line[:1] in (" ", ""):
                    old_count, new_count = old_count - 1, new_count - 1
                elif line[0] == "-":
                    old_count -= 1
                elif line[0] == "+":
                    new_count -= 1
                else:
                    break
                index += 1
            if old_count or new_count:
                problems.append(f"{lines[0]}: hunk line counts disagree with its header")
                break
            while index < len(lines) and lines[index].startswith("\\"):
                index += 1
            if index < len(lines) and not HUNK_HEADER.match(lines[index]):
                problems.append(f"{lines[0]}: unexpected line {lines[index]!r} after a hunk")
                break
    return problems


def test_suite_size(tasks):
    assert len(tasks) >= 24
    assert len({task.repo for task in tasks}) >= 6
    assert min(Counter(task.repo for task in tasks).values()) >= 4


def test_instance_ids_unique_and_named_after_repo(tasks):
    ids = [task.instance_id for task in tasks]
    assert len(ids) == len(set(ids))
    for task in tasks:
        assert re.fullmatch(rf"{re.escape(repo_name(task))}-\d+", task.instance_id)


def test_rows_point_at_shipped_repositories(tasks):
    for task in tasks:
        name = repo_name(task)
        assert task.repo == f"deepswe/{name}"
        assert task.image == f"deepswe/{name}:base"
        assert Path(task.source) == TASKS_DIR / "repos" / name
        assert (Path(task.source) / "tests").is_dir()
        assert task.version and task.created_at and task.problem_statement.strip()


def test_patches_are_well_formed_diffs(tasks):
    for task in tasks:
        for name, patch in (("patch", task.patch), ("test_patch", task.test_patch)):
            assert diff_problems(patch) == [], f"{task.instance_id} {name}"


def test_gold_patch_touches_no_tests_and_test_patch_only_tests(tasks):
    for task in tasks:
        gold_files, test_files = patched_files(task.patch), patched_files(task.test_patch)
        assert gold_files and not any(is_test_path(path) for path in gold_files), task.instance_id
        assert test_files and all(is_test_path(path) for path in test_files), task.instance_id


def test_test_lists(tasks):
    for task in tasks:
        assert task.FAIL_TO_PASS, task.instance_id
        assert not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS), task.instance_id
        test_files = set(patched_files(task.test_patch))
        for node in task.FAIL_TO_PASS:
            assert node.split("::")[0] in test_files, f"{task.instance_id}: {node}"
        for node in task.PASS_TO_PASS:
            assert (Path(task.source) / node.split("::")[0]).is_file(), (
                f"{task.instance_id}: {node}"
            )


def test_base_commits_match_repositories_and_patches_apply(tasks, tmp_path):
    by_repo: dict[str, list[Task]] = {}
    for task in tasks:
        by_repo.setdefault(task.source, []).append(task)
    for source, repo_tasks in by_repo.items():
        checkout = tmp_path / Path(source).name
        sha = commit_tree(source, checkout)
        assert {task.base_commit for task in repo_tasks} == {sha}, (
            f"{source} changed since tasks.jsonl was built; run python tasks/build_suite.py"
        )
        for task in repo_tasks:
            for name in ("patch", "test_patch"):
                diff_file = tmp_path / f"{task.instance_id}.{name}.diff"
                diff_file.write_text(getattr(task, name))
                result = subprocess.run(
                    ["git", "apply", "--check", str(diff_file)],
                    cwd=checkout,
                    env=GIT_ENV,
                    capture_output=True,
                    text=True,
                )
                assert result.returncode == 0, f"{task.instance_id} {name}: {result.stderr}"


def test_rows_match_specs_and_readme(tasks):
    rows = {task.instance_id: task for task in tasks}
    spec_ids = set()
    for spec_file in sorted((TASKS_DIR / "specs").glob("*.py")):
        for spec in runpy.run_path(str(spec_file))["TASKS"]:
            instance_id = f"{spec_file.stem}-{spec['number']}"
            spec_ids.add(instance_id)
            assert instance_id in rows, f"{instance_id} missing; run python tasks/build_suite.py"
            assert rows[instance_id].problem_statement.strip() == spec["problem_statement"].strip()
    assert spec_ids == set(rows)
    readme = (TASKS_DIR / "README.md").read_text()
    for instance_id in rows:
        assert f"| {instance_id} |" in readme


def test_diff_problems_detects_bad_hunks():
    good = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert diff_problems(good) == []
    assert diff_problems(good.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,2 @@")) != []
    assert diff_problems("--- a/x.py\n+++ b/x.py\n") != []
