"""The SWE-bench workflow on a Django-shaped row in a SWE-bench-layout image
(tests/env/official_layouts.py): any agent's predictions file graded by
`launch/evaluate.py --predictions`, its report.json entries equal to swebench's own
get_eval_report on the same logs; and an older row without eval_script graded through the eval
script swebench 4.x would have built for it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_report

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.grading.harness_swebench import swebench_spec
from deepswe_jax.env.grading.task_checks import check_task
from deepswe_jax.env.tasks import load_tasks
from tests.env.official_layouts import Row, django_row

REPO_ROOT = Path(__file__).resolve().parents[2]
NOT_A_DIFF = "this is not a diff\n"


@pytest.fixture(scope="module")
def django(docker_client, base_image) -> Row:
    return django_row(docker_client, base_image)


def evaluate(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "launch/evaluate.py", *flags],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_predictions_file_graded_like_the_swebench_harness(django, tmp_path):
    kinds = {"gold": django.task.patch, "wrong": django.wrong_patch, "empty": "", "bad": NOT_A_DIFF}
    tasks = {
        kind: dataclasses.replace(django.task, instance_id=f"django__django-{kind}")
        for kind in kinds
    }
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks.values()))
    # mini-swe-agent's preds.json: an object keyed by instance_id.
    predictions = {
        task.instance_id: {
            "instance_id": task.instance_id,
            "model_name_or_path": "org/agent-v1",
            "model_patch": kinds[kind],
        }
        for kind, task in tasks.items()
    }
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(predictions))
    output_dir = tmp_path / "eval"
    flags = (f"--predictions={preds}", f"--tasks={task_file}", f"--output_dir={output_dir}")
    first = evaluate(*flags)
    assert first.returncode == 0, first.stderr[-3000:]

    run_dir = output_dir / "run_00"
    run_report = json.loads((run_dir / "run_report.json").read_text())
    assert run_report["resolved_ids"] == ["django__django-gold"]
    assert run_report["unresolved_ids"] == ["django__django-wrong"]
    assert run_report["empty_patch_ids"] == ["django__django-empty"]
    assert run_report["error_ids"] == ["django__django-bad"]  # swebench: the patch did not apply
    assert run_report["infra_failure_ids"] == run_report["ambiguous_failure_ids"] == []
    rows = [json.loads(line) for line in (run_dir / "predictions.jsonl").open()]
    assert {row["instance_id"]: row["model_patch"] for row in rows} == {
        t.instance_id: kinds[k] for k, t in tasks.items()
    }
    assert {row["model_name_or_path"] for row in rows} == {"org/agent-v1"}

    report = json.loads((run_dir / "report.json").read_text())
    trajectories = [
        Trajectory.from_json(line) for line in (output_dir / "trajectories.jsonl").open()
    ]
    for trajectory in trajectories:
        if trajectory.patch == "":
            continue  # swebench grades no empty patch (run_report's empty_patch_ids)
        task = next(t for t in tasks.values() if t.instance_id == trajectory.task_id)
        log = tmp_path / f"{task.instance_id}.log"
        script = swebench_spec(task).eval_script
        log.write_text(trajectory.grade.test_log.split(f"$ {script}\n", 1)[-1])
        prediction = predictions[task.instance_id]
        official = get_eval_report(swebench_spec(task), prediction, str(log), True)
        assert report[task.instance_id] == official[task.instance_id], task.instance_id
    assert report["django__django-gold"]["resolved"]
    assert not report["django__django-bad"]["patch_successfully_applied"]

    # Run again: every prediction is graded already, nothing is graded twice.
    again = evaluate(*flags)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((output_dir / "summary.json").read_text())["pairs_run_this_session"] == 0


def test_malformed_predictions_file_is_refused_naming_the_row(tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        '{"instance_id": "a-1", "model_name_or_path": "m", "model_patch": "diff"}\n'
        '{"instance_id": "a-2", "model_name_or_path": "m"}\n'
    )
    refused = evaluate(f"--predictions={preds}", f"--output_dir={tmp_path / 'eval'}")
    assert refused.returncode == 1
    assert "preds.jsonl, line 2: model_patch is missing" in refused.stderr
    assert not (tmp_path / "eval").exists()


def test_django_row_without_eval_script_graded_through_swebench_4_script(django, docker_client):
    """The row as SWE-bench datasets before swebench 5 had it (version, no eval_script,
    log_parser or eval_type): graded by Django's runtests.py with the test patch's labels."""
    row = django.task.to_row()
    for key in ("eval_script", "log_parser", "eval_type"):
        row.pop(key)
    (task,) = load_tasks([dict(row, version="3.0")])
    script = swebench_spec(task).eval_script
    assert "--parallel 1 auth_tests.test_validators\n" in script
    check = check_task(task, client=docker_client)
    assert check.gold.status == "resolved", check.gold.test_log[-3000:]
    assert check.empty.status == "unresolved", check.empty.test_log[-3000:]
    assert check.ok
