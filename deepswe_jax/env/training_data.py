"""DeepSWE's training set: R2E-Gym-Subset without the repositories SWE-bench Verified evaluates.

DeepSWE-Preview trained on R2E-Gym-Subset rows and, "to avoid data contamination", left out
problems from repositories that SWE-bench Verified also uses, such as sympy (DeepSWE blog post,
"Dataset Curation"). `training_set(rows)` does that: it reads each row as a Task (R2E-Gym's
dialect, layout r2egym; `tasks.task_from_row` checks it), drops the rows whose repository is one
of SWE_BENCH_VERIFIED_REPOS, and counts kept and dropped rows per repository.
`launch/prepare_data.py` writes the kept tasks and the image list for the cluster's pre-pull.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deepswe_jax.env.tasks import Task, TaskFormatError, task_from_row

# The 12 repositories of SWE-bench Verified's 500 instances (princeton-nlp/SWE-bench_Verified,
# `repo` column), owner/name as SWE-bench writes them.
SWE_BENCH_VERIFIED_REPOS = frozenset(
    {
        "astropy/astropy",
        "django/django",
        "matplotlib/matplotlib",
        "mwaskom/seaborn",
        "pallets/flask",
        "psf/requests",
        "pydata/xarray",
        "pylint-dev/pylint",
        "pytest-dev/pytest",
        "scikit-learn/scikit-learn",
        "sphinx-doc/sphinx",
        "sympy/sympy",
    }
)


def repository_name(repo: str) -> str:
    """The bare repository name, lower case: "sympy/sympy" and R2E-Gym's "sympy" -> "sympy"."""
    return repo.rsplit("/", 1)[-1].strip().lower()


def in_swebench_verified(repo: str) -> bool:
    """Whether `repo` (owner/name or R2E-Gym's bare name) is one SWE-bench Verified uses."""
    return repository_name(repo) in {repository_name(r) for r in SWE_BENCH_VERIFIED_REPOS}


@dataclass
class TrainingSet:
    """The kept tasks, in row order, and the rows kept / dropped per repository."""

    tasks: list[Task] = field(default_factory=list)
    kept: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)

    @property
    def images(self) -> list[str]:
        """Each kept task's image once, in row order."""
        return list(dict.fromkeys(task.image for task in self.tasks))

    def summary(self) -> str:
        lines = [f"kept {len(self.tasks)} tasks from {len(self.kept)} repositories:"]
        lines += [f"  {repo}: {count}" for repo, count in sorted(self.kept.items())]
        lines.append(
            f"dropped {sum(self.dropped.values())} tasks of repositories in SWE-bench Verified:"
        )
        lines += [f"  {repo}: {count}" for repo, count in sorted(self.dropped.items())]
        return "\n".join(lines)


def training_set(
    rows: Iterable[Mapping[str, Any]],
    *,
    progress: Callable[[int], None] | None = None,
    progress_every: int = 500,
) -> TrainingSet:
    """DeepSWE's training set of R2E-Gym-Subset rows (see the module docstring).

    Raises:
      TaskFormatError: a row is malformed (the message names it) or two kept rows share an
        instance id.
    """
    result = TrainingSet()
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        if progress is not None and index and index % progress_every == 0:
            progress(index)
        task = task_from_row(row, index=index)
        if in_swebench_verified(task.repo):
            result.dropped[task.repo] += 1
            continue
        if task.instance_id in seen:
            raise TaskFormatError(
                f"rows {seen[task.instance_id]} and {index} share instance_id "
                f"{task.instance_id!r}; instance ids must be unique"
            )
        seen[task.instance_id] = index
        result.kept[task.repo] += 1
        result.tasks.append(task)
    return result
