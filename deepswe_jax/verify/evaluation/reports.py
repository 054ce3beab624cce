"""The SWE-bench files of an evaluation, one folder per run index:

    run_00/predictions.jsonl  predictions {instance_id, model_name_or_path, model_patch}, what
                              the SWE-bench harness's run_evaluation reads
    run_00/report.json        {instance_id: per-instance report (swebench's get_eval_report
                              fields, `GradeResult.to_report`)}, graded runs only
    run_00/run_report.json    the harness's run report (schema_version 2, every key of
                              swebench 5.0.2's reporting.make_run_report): resolved /
                              unresolved / empty_patch / error ids, and which of the failures
                              look like infrastructure failures (`failure_classification`)

A run counts as resolved when the grader resolved its final patch, however the episode
stopped (`Trajectory.resolved`): what the official harness says of predictions.jsonl.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.verify.evaluation.store import PairKey

PREDICTIONS_FILE = "predictions.jsonl"
REPORT_FILE = "report.json"
RUN_REPORT_FILE = "run_report.json"
# Grading statuses the SWE-bench run report counts as errors (the harness produced no verdict;
# a refused or oversized patch never ran).
ERROR_STATUSES = frozenset(
    {"apply_failed", "timeout", "infra_error", "patch_refused", "patch_too_large"}
)


def run_directory(output_dir: str | os.PathLike, run_index: int) -> Path:
    """output_dir/run_03 for run 3."""
    return Path(output_dir) / f"run_{run_index:02d}"


def pair_category(trajectory: Trajectory) -> str:
    """'resolved' | 'unresolved' | 'empty_patch' | 'error' (SWE-bench run-report buckets)."""
    grade = trajectory.grade
    if grade is None or grade.status in ERROR_STATUSES:
        return "error"
    return grade.status


def failure_classification(trajectory: Trajectory) -> tuple[str, str] | None:
    """(reason, tier) of a failed pair, tier 'environment' or 'ambiguous': swebench's
    `infra_failure.classify_text` on the grading log and error (as make_run_report classifies
    its logs); a grade our grader marked infra_error that no signature matches is
    ('infra_error', 'environment'), since the grader saw the environment fail."""
    from swebench.harness.infra_failure import TIER_ENVIRONMENT, classify_text

    grade = trajectory.grade
    text = "\n".join((grade.test_log, grade.error)) if grade is not None else ""
    classification = classify_text(text)
    if classification is None and trajectory.infra_error:
        return "infra_error", TIER_ENVIRONMENT
    return classification


def predictions(
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    run_index: int,
    model_name: str,
) -> list[dict[str, str]]:
    """SWE-bench prediction rows of one run, in task order."""
    return [
        {
            "instance_id": instance_id,
            "model_name_or_path": model_name,
            "model_patch": trajectories[instance_id, run_index].patch,
        }
        for instance_id in instance_ids
    ]


def instance_reports(
    instance_ids: Sequence[str], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, dict]:
    """{instance_id: SWE-bench report entry} for the graded runs of one run index."""
    reports: dict[str, dict] = {}
    for instance_id in instance_ids:
        grade = trajectories[instance_id, run_index].grade
        if grade is not None:
            reports.update(grade.to_report())
    return reports


def run_report(
    instance_ids: Sequence[str], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, Any]:
    """SWE-bench's run report (schema_version 2) for one run index."""
    ids: dict[str, list[str]] = {"resolved": [], "unresolved": [], "empty_patch": [], "error": []}
    for instance_id in instance_ids:
        ids[pair_category(trajectories[instance_id, run_index])].append(instance_id)
    submitted = list(instance_ids)
    completed = ids["resolved"] + ids["unresolved"]
    reasons: dict[str, str] = {}
    tiers: dict[str, list[str]] = {"environment": [], "ambiguous": []}
    for instance_id in sorted(ids["unresolved"] + ids["error"]):
        classification = failure_classification(trajectories[instance_id, run_index])
        if classification is not None:
            reasons[instance_id] = classification[0]
            tiers[classification[1]].append(instance_id)
    return {
        "total_instances": len(instance_ids),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "infra_failure_instances": len(tiers["environment"]),
        "ambiguous_failure_instances": len(tiers["ambiguous"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(completed),
        "incomplete_ids": [],
        "empty_patch_ids": ids["empty_patch"],
        "submitted_ids": submitted,
        "resolved_ids": ids["resolved"],
        "unresolved_ids": ids["unresolved"],
        "infra_failure_ids": tiers["environment"],
        "ambiguous_failure_ids": tiers["ambiguous"],
        "failure_reasons": reasons,
        "error_ids": ids["error"],
        "schema_version": 2,
    }


def write_reports(
    output_dir: Path,
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    model_name: str,
) -> None:
    """Per run index (every (task, run) finished): predictions.jsonl with `model_name` as
    model_name_or_path, report.json and run_report.json."""
    for run_index in range(num_runs):
        directory = run_directory(output_dir, run_index)
        directory.mkdir(parents=True, exist_ok=True)
        rows = predictions(instance_ids, trajectories, run_index, model_name)
        (directory / PREDICTIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
        reports = instance_reports(instance_ids, trajectories, run_index)
        (directory / REPORT_FILE).write_text(json.dumps(reports, indent=2) + "\n")
        report = run_report(instance_ids, trajectories, run_index)
        (directory / RUN_REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
