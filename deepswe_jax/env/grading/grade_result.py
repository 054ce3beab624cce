"""The outcome of grading one patch (`grading.grade_patch`), in SWE-bench's report terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepswe_jax.env.grading.harness import TestsStatus, empty_tests_status
from deepswe_jax.env.tasks import Task

STATUSES = (
    "resolved",
    "unresolved",
    "apply_failed",
    "timeout",
    "infra_error",
    "empty_patch",
    "patch_refused",
    "patch_too_large",
)


@dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one patch.

    status: 'resolved' | 'unresolved' | 'apply_failed' | 'timeout' | 'infra_error' | 'empty_patch'
      | 'patch_refused' | 'patch_too_large'.
    tests_status: SWE-bench layout {FAIL_TO_PASS: {success: [...], failure: [...]}, PASS_TO_PASS, ...};
      in R2E-Gym mode PASS_TO_PASS lists the expected tests whose status matched / did not.
    test_log: combined output of the grading commands (patch application and test run).
    error: what went wrong, for 'infra_error' and 'timeout'.
    report: the benchmark's own report.json entry of the test log when its harness made one
      (swebench's get_eval_report for SWE-bench rows).
    suspected_forgery: the log said resolved and the result record did not (status
      'unresolved', reward 0; `to_report` keeps the log's verdict, SWE-bench's semantics).
    """

    instance_id: str
    status: str
    reward: float
    patch_successfully_applied: bool
    resolved: bool
    tests_status: TestsStatus = field(default_factory=empty_tests_status)
    test_log: str = ""
    duration_s: float = 0.0
    patch_exists: bool = True
    patch_is_none: bool = False
    error: str = ""
    report: dict | None = None
    suspected_forgery: bool = False

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown grading status {self.status!r}; expected one of {STATUSES}")

    @property
    def infra_error(self) -> bool:
        """True when grading failed for reasons that say nothing about the patch."""
        return self.status == "infra_error"

    def to_report(self) -> dict[str, dict[str, Any]]:
        """SWE-bench per-instance report.json (swebench's get_eval_report fields):
        {instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
        infra_failure[, tests_status]}}; tests_status only when the tests ran and were scored
        (not for an empty, unapplied or timed-out patch). A harness's own report is used as is."""
        if self.report is not None:
            return {self.instance_id: self.report}
        entry: dict[str, Any] = {
            "patch_is_None": self.patch_is_none,
            "patch_exists": self.patch_exists,
            "patch_successfully_applied": self.patch_successfully_applied,
            "resolved": self.resolved or self.suspected_forgery,
            "infra_failure": self.infra_error,
        }
        if self.error:  # swebench's key for why (a timeout too); the grader knows, not guesses
            entry["infra_failure_reason"] = self.error
        if self.status in ("resolved", "unresolved"):
            entry["tests_status"] = self.tests_status
        return {self.instance_id: entry}


def policy_limit_grade(task: Task, error: Exception) -> GradeResult:
    """The grade of an episode whose patch could not be taken because it passed the patch cap
    (runtime.PatchTooLargeError): 'patch_too_large', reward 0."""
    return GradeResult(
        instance_id=task.instance_id,
        status="patch_too_large",
        reward=0.0,
        patch_successfully_applied=False,
        resolved=False,
        error=str(error),
    )
