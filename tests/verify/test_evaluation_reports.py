"""verify.evaluation.reports: the SWE-bench files of one run index from graded trajectories,
in the harness's buckets (swebench.harness.reporting.make_run_report: resolved / unresolved /
empty_patch / error) and its per-instance report.json entries."""

from __future__ import annotations

import dataclasses
import json

import pytest

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.verify.evaluation import reports, summary
from tests.agent.test_trajectory_records import DICT_GRADE_LINE, make_trajectory


def graded(instance_id: str, status: str | None, patch: str = "diff") -> Trajectory:
    """Run 0 of `instance_id`, graded with `status` (None: not graded)."""
    if status is None:
        return make_trajectory(task_id=instance_id, grade=None, reward=0.0, patch=patch)
    resolved = status == "resolved"
    grade = GradeResult(
        instance_id,
        status,
        float(resolved),
        patch_successfully_applied=status in ("resolved", "unresolved"),
        resolved=resolved,
        patch_exists=bool(patch),
        error="docker died" if status == "infra_error" else "",
    )
    return make_trajectory(
        task_id=instance_id,
        grade=grade,
        reward=float(resolved),
        infra_error=status == "infra_error",
        patch=patch,
        # SWE-bench judges the prediction, however the episode that wrote it stopped.
        stop_reason=StopReason.max_steps if status == "resolved" else StopReason.finished,
    )


STATUSES = {
    "a-1": "resolved",
    "b-1": "unresolved",
    "c-1": "empty_patch",
    "d-1": "apply_failed",
    "e-1": "timeout",
    "f-1": "infra_error",
    "h-1": "patch_refused",
    "i-1": "patch_too_large",
    "g-1": None,
}


def test_run_files_put_each_grade_in_the_harness_bucket(tmp_path):
    ids = list(STATUSES)
    trajectories = {
        (i, 0): graded(i, status, "" if status == "empty_patch" else f"diff {i}")
        for i, status in STATUSES.items()
    }
    reports.write_reports(tmp_path, ids, trajectories, 1, "model-x")
    directory = reports.run_directory(tmp_path, 0)
    assert directory.name == "run_00"

    run_report = json.loads((directory / reports.RUN_REPORT_FILE).read_text())
    assert run_report["resolved_ids"] == ["a-1"]  # stopped at max_steps, still resolved
    assert run_report["unresolved_ids"] == ["b-1"]
    assert run_report["empty_patch_ids"] == ["c-1"]
    assert run_report["error_ids"] == ["d-1", "e-1", "f-1", "h-1", "i-1", "g-1"]
    assert run_report["completed_ids"] == ["a-1", "b-1"]
    assert (run_report["submitted_instances"], run_report["schema_version"]) == (9, 2)

    report = json.loads((directory / reports.REPORT_FILE).read_text())
    assert sorted(report) == ids[:-1]  # the ungraded run has no entry
    assert report["a-1"]["resolved"] and "tests_status" in report["a-1"]
    assert not report["c-1"]["patch_exists"] and "tests_status" not in report["c-1"]
    assert report["f-1"]["infra_failure"] and not report["b-1"]["infra_failure"]

    rows = [json.loads(line) for line in (directory / reports.PREDICTIONS_FILE).open()]
    assert rows == [
        {"instance_id": i, "model_name_or_path": "model-x", "model_patch": t.patch}
        for (i, _), t in trajectories.items()
    ]


def test_a_harness_report_is_written_as_it_is(tmp_path):
    """A grade that carries the benchmark's own report (swebench's get_eval_report) is the
    report.json entry; a trajectory read from a file written with a dict grade reports too."""
    old = Trajectory.from_json(DICT_GRADE_LINE)
    harness_entry = {"resolved": False, "patch_exists": True, "tests_status": {"FAIL_TO_PASS": {}}}
    grade = GradeResult("sw-1", "unresolved", 0.0, True, False, report=harness_entry)
    own = make_trajectory(task_id="sw-1", grade=grade, reward=0.0)
    trajectories = {("calc-1", 0): old, ("sw-1", 0): own}
    entries = reports.instance_reports(["calc-1", "sw-1"], trajectories, 0)
    assert entries["calc-1"]["resolved"] and entries["calc-1"]["patch_successfully_applied"]
    assert entries["sw-1"] == harness_entry


def swebench_run_report_keys(tmp_path) -> set[str]:
    """The keys swebench's own make_run_report writes (no Docker client: no container keys)."""
    from swebench.harness.reporting import make_run_report

    predictions = {"x-1": {"instance_id": "x-1", "model_name_or_path": "m", "model_patch": ""}}
    path = make_run_report(predictions, [{"instance_id": "x-1"}], "keys", report_dir=tmp_path)
    return set(json.loads(path.read_text()))


def test_run_report_has_every_key_of_swebench_and_classifies_failures(tmp_path):
    """Every key of swebench 5.0.2's make_run_report; failures are classified by swebench's
    signatures in the grading log (a Docker daemon error: environment; no tests collected:
    ambiguous), and our grader's infra_error counts as an environment failure."""
    trajectories = {(i, 0): graded(i, s, f"diff {i}") for i, s in STATUSES.items() if s}
    nothing_ran = dataclasses.replace(
        trajectories["b-1", 0].grade, test_log="$ pytest\ncollected 0 items\n"
    )
    trajectories["b-1", 0] = dataclasses.replace(trajectories["b-1", 0], grade=nothing_ran)
    daemon = dataclasses.replace(
        trajectories["d-1", 0].grade, test_log="Error response from daemon: no such container"
    )
    trajectories["d-1", 0] = dataclasses.replace(trajectories["d-1", 0], grade=daemon)
    ids = sorted(i for i, _ in trajectories)
    report = reports.run_report(ids, trajectories, 0)
    assert set(report) == swebench_run_report_keys(tmp_path / "swebench")
    assert report["infra_failure_ids"] == ["d-1", "f-1"]
    assert report["ambiguous_failure_ids"] == ["b-1"]
    assert report["failure_reasons"] == {
        "b-1": "no_tests_collected",
        "d-1": "container_unavailable",
        "f-1": "infra_error",
    }
    assert (report["infra_failure_instances"], report["ambiguous_failure_instances"]) == (2, 1)


def test_an_evaluation_with_only_infrastructure_failures_is_an_error():
    """launch/evaluate.py exits 1 (summary.check_some_graded) when no patch got a verdict,
    naming the first failure; one graded pair is enough to report numbers."""
    failed = {(i, 0): graded(i, "infra_error") for i in ("a-1", "b-1")}
    with pytest.raises(RuntimeError, match="every one of the 2 grades.*a-1: docker died"):
        summary.check_some_graded(summary.summarize(["a-1", "b-1"], failed, 1))
    failed["b-1", 0] = graded("b-1", "unresolved")
    summary.check_some_graded(summary.summarize(["a-1", "b-1"], failed, 1))


def test_shards_of_a_predictions_file_merge_without_selectors(tmp_path):
    """Shards evaluated without Best@k selectors (a predictions file has none) merge into the
    run files of the whole task set."""
    from deepswe_jax.env.tasks import load_tasks
    from deepswe_jax.verify.evaluation import shards, store
    from tests.verify.test_evaluation_run import TASKS_FILE

    tasks = load_tasks(TASKS_FILE)[:3]
    identity = {"policy": "predictions", "model_name_or_path": "m", "predictions_sha256": "0"}
    for process_id in (0, 1):
        shard_dir, mine = shards.prepare_shard(
            tasks, tmp_path, process_id, 2, identity=identity, num_runs=1, selectors=(), seed=0
        )
        for task in mine:
            trajectory = dataclasses.replace(graded(task.instance_id, "resolved"), rollout_index=0)
            store.trajectory_store(shard_dir).add(trajectory, trajectory.to_json())
    merged = shards.merge_shards(tmp_path)
    assert merged["num_tasks"] == 3 and merged["pass_at_1"] == 1.0
    run_report = json.loads((tmp_path / "run_00" / reports.RUN_REPORT_FILE).read_text())
    assert run_report["resolved_ids"] == [task.instance_id for task in tasks]
