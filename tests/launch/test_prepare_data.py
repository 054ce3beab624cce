"""launch/prepare_data.py: DeepSWE's training set from a local R2E-Gym-Subset, without the
repositories SWE-bench Verified evaluates, and the image list the cluster pre-pulls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from deepswe_jax.env.tasks import TaskFormatError, load_tasks
from deepswe_jax.env.training_data import (
    SWE_BENCH_VERIFIED_REPOS,
    in_swebench_verified,
    training_set,
)

REPO = Path(__file__).resolve().parents[2]


def r2e_gym_row(repo: str, commit: str) -> dict:
    """A row of R2E-Gym-Subset's shape (its columns; parsed_commit_content as JSON text)."""
    old, new = "def f():\n    return 1\n", "def f():\n    return 2\n"
    parsed = {
        "old_commit_hash": commit * 40,
        "new_commit_hash": commit.upper() * 40,
        "commit_date": "2021-06-01T00:00:00",
        "file_diffs": [
            {
                "header": {"file": {"path": f"{repo}/core.py"}},
                "old_file_content": old,
                "new_file_content": new,
            },
            {
                "header": {"file": {"path": "tests/test_core.py"}},
                "old_file_content": "",
                "new_file_content": "def test_f():\n    assert True\n",
            },
        ],
    }
    return {
        "repo_name": repo,
        "docker_image": f"namanjain12/{repo}_final:{commit.upper() * 40}",
        "commit_hash": commit.upper() * 40,
        "parsed_commit_content": json.dumps(parsed),
        "execution_result_content": "{}",
        "modified_files": [f"{repo}/core.py"],
        "relevant_files": [f"{repo}/core.py"],
        "problem_statement": f"[ISSUE]\nf() of {repo} returns 1\n[/ISSUE]",
        "expected_output_json": json.dumps({"test_f": "PASSED"}),
        "prompt": "",
    }


def test_prepare_data_drops_swebench_verified_repositories_and_lists_images(tmp_path):
    rows = [
        r2e_gym_row("pandas", "a"),
        r2e_gym_row("sympy", "b"),
        r2e_gym_row("pandas", "c"),
        r2e_gym_row("aiohttp", "d"),
        r2e_gym_row("sympy", "e"),
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "subset.parquet")
    out = tmp_path / "deepswe"
    result = subprocess.run(
        [
            sys.executable,
            "launch/prepare_data.py",
            f"--r2e_gym={tmp_path / 'subset.parquet'}",
            f"--out_dir={out}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "kept 3 tasks from 2 repositories" in result.stdout
    assert "dropped 2 tasks of repositories in SWE-bench Verified:\n  sympy: 2" in result.stdout

    tasks = load_tasks(out / "train.jsonl")
    assert [t.repo for t in tasks] == ["pandas", "pandas", "aiohttp"]
    assert {t.layout for t in tasks} == {"r2egym"}
    assert tasks[0].expected_output_json == {"test_f": "PASSED"}
    assert tasks[0].problem_statement == "\nf() of pandas returns 1\n"
    images = (out / "images.txt").read_text().splitlines()
    assert images == [t.image for t in tasks]

    manifests = tmp_path / "k8s"
    subprocess.run(
        [
            sys.executable,
            "launch/k8s_manifests.py",
            f"--images={out / 'images.txt'}",
            f"--out_dir={manifests}",
            "--image_prefix=reg.io/",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    daemonsets = yaml.safe_load_all((manifests / "30-prepull-daemonsets.yaml").read_text())
    pulled = [
        c["image"] for d in daemonsets for c in d["spec"]["template"]["spec"]["initContainers"]
    ]
    assert pulled == ["reg.io/" + image for image in images]


def test_swebench_verified_repositories_match_r2e_gym_bare_names():
    assert len(SWE_BENCH_VERIFIED_REPOS) == 12
    assert in_swebench_verified("sympy") and in_swebench_verified("sympy/sympy")
    assert in_swebench_verified("Django") and not in_swebench_verified("pandas")
    assert not in_swebench_verified("orange3") and not in_swebench_verified("pillow")


def test_a_bad_row_is_named():
    bad = {**r2e_gym_row("pandas", "a"), "expected_output_json": None}
    with pytest.raises(TaskFormatError, match=r"row 1 \(R2E-Gym.*expected_output_json"):
        training_set([r2e_gym_row("numpy", "f"), bad])
