"""A task's self-check (launch/validate_tasks.py): its gold patch must resolve it, the empty patch
must not; graded with `grading.grade_patch` in Docker or in a runtime factory's runtimes."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from deepswe_jax.env.grading.grade_result import GradeResult
from deepswe_jax.env.grading.grading import DEFAULT_TIMEOUT, grade_patch
from deepswe_jax.env.runtime import RuntimeFactory
from deepswe_jax.env.tasks import Task


@dataclass(frozen=True)
class TaskCheck:
    """A task's self-check: the gold patch must resolve it, the empty patch must not."""

    instance_id: str
    gold: GradeResult
    empty: GradeResult

    @property
    def ok(self) -> bool:
        return self.gold.resolved and self.empty.status == "unresolved"

    def problem(self) -> str:
        """Why the check failed, in one line ("" when it passed)."""
        if self.gold.infra_error or self.empty.infra_error:
            return f"infra error: {self.gold.error or self.empty.error}"
        if not self.gold.resolved:
            failing = (
                self.gold.tests_status["FAIL_TO_PASS"]["failure"]
                + self.gold.tests_status["PASS_TO_PASS"]["failure"]
            )
            return f"gold patch {self.gold.status}: failing {failing[:3]}"
        if self.empty.status != "unresolved":
            return f"empty patch {self.empty.status}: FAIL_TO_PASS tests pass without a fix"
        return ""


def check_task(
    task: Task,
    *,
    client: Any = None,
    runtime_factory: RuntimeFactory | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    run_label: str = "validate",
) -> TaskCheck:
    """Grade the gold patch and the empty patch of `task` (its image must exist), in Docker on
    `client`'s engine or in runtimes of `runtime_factory` (see grade_patch)."""
    grading = dict(
        client=client, runtime_factory=runtime_factory, timeout=timeout, run_label=run_label
    )
    gold = grade_patch(task, task.patch, **grading)
    empty = grade_patch(task, "", skip_empty=False, **grading)
    return TaskCheck(task.instance_id, gold, empty)


def check_tasks(
    tasks: Iterable[Task],
    *,
    client: Any = None,
    runtime_factory: RuntimeFactory | None = None,
    workers: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    run_label: str = "validate",
) -> list[TaskCheck]:
    """`check_task` for every task on a small thread pool; results in task order."""
    check = functools.partial(
        check_task,
        client=client,
        runtime_factory=runtime_factory,
        timeout=timeout,
        run_label=run_label,
    )
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(check, tasks))


def format_checks(checks: Iterable[TaskCheck]) -> str:
    """A text table: instance id, gold status, empty status, seconds, verdict."""
    rows = [("instance_id", "gold", "empty", "seconds", "check")]
    for check in checks:
        seconds = f"{check.gold.duration_s + check.empty.duration_s:.1f}"
        verdict = "ok" if check.ok else f"FAIL ({check.problem()})"
        rows.append((check.instance_id, check.gold.status, check.empty.status, seconds, verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
        + "  "
        + row[4]
        for row in rows
    )
