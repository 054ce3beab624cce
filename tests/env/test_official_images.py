"""launch/build_images.py --layout=swebench on a shipped repository (tasks/repos/confini): the
image it builds grades that repository's task as a SWE-bench row, through the eval script
swebench builds for a row without one (conda activation, test patch, pytest -rA)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from deepswe_jax.env.grading.task_checks import check_task
from deepswe_jax.env.tasks import load_tasks

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGE = "deepswe-test/built-confini:swebench"


def test_build_images_layout_swebench_from_a_local_repository(docker_client, base_image, tmp_path):
    shipped = json.loads((REPO_ROOT / "tasks" / "tasks.jsonl").read_text().splitlines()[0])
    built = subprocess.run(
        [
            sys.executable,
            "launch/build_images.py",
            "--layout=swebench",
            f"--repo={REPO_ROOT / 'tasks' / shipped['source']}",
            f"--image={IMAGE}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"/testbed at {shipped['base_commit']}" in built.stdout
    row = {k: v for k, v in shipped.items() if k != "source"}
    # SWE-bench runs only the test patch's files, so its rows list PASS_TO_PASS tests there.
    row["PASS_TO_PASS"] = [
        t for t in row["PASS_TO_PASS"] if f"b/{t.split('::')[0]}" in row["test_patch"]
    ]
    (task,) = load_tasks([dict(row, image=IMAGE)])
    assert task.layout == "swebench" and not task.eval_script
    probe = docker_client.containers.run(
        IMAGE,
        [
            "bash",
            "-c",
            "source /opt/miniconda3/bin/activate; conda activate testbed; "
            "command -v python; git status --porcelain; git rev-parse HEAD",  # a clean checkout,
        ],
        remove=True,
    ).decode()
    assert probe.splitlines() == [
        "/opt/miniconda3/envs/testbed/bin/python",
        shipped["base_commit"],
    ]
    check = check_task(task, client=docker_client)
    assert check.gold.status == "resolved", check.gold.test_log[-3000:]
    assert check.empty.status == "unresolved", check.empty.test_log[-3000:]
