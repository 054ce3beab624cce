"""R2E-Gym-Subset rows, read as R2E-Gym reads them (r2egym/commit_models/diff_classes.py and
r2egym/agenthub/runtime/docker.py): which files of a commit are tests, how a FileDiff becomes a
patch, and the issue text the agent sees. `tasks.task_from_row` builds the Task."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from deepswe_jax.env.diffs import unified_diff

# R2E-Gym's FileDiff.is_test_file (r2egym/commit_models/diff_classes.py): folders that hold tests.
R2E_TEST_DIR_NAMES = frozenset({"tests", "Tests", "test", "Test"})
# R2E-Gym's get_task_instruction: the issue text between these tags, when present.
R2E_ISSUE_TAGS = re.compile(r"\[ISSUE\](.*)\[/ISSUE\]", re.DOTALL)


class R2ERowError(ValueError):
    """A part of an R2E-Gym row cannot be read (tasks.py names the row and field)."""


def r2e_is_test_file(path: str) -> bool:
    """R2E-Gym's test-file rule (FileDiff.is_test_file), which splits an R2E-Gym commit into
    the gold patch and its tests: `*_test.py`, `test_*` (the path or its file name), or a
    `tests` / `Tests` / `test` / `Test` folder anywhere in the path."""
    parts = path.split("/")
    return (
        path.endswith("_test.py")
        or path.startswith("test_")
        or parts[-1].startswith("test_")
        or any(part in R2E_TEST_DIR_NAMES for part in parts)
    )


def r2e_problem_statement(text: str) -> str:
    """The issue as R2E-Gym shows it: the text inside `[ISSUE] ... [/ISSUE]`, else all of it."""
    match = R2E_ISSUE_TAGS.search(text)
    return match.group(1) if match else text


def r2e_file_diff(file_diff: Any) -> tuple[str, str]:
    """(path, unified diff text) of one R2E-Gym FileDiff, rebuilt from its old/new contents:
    no old content is a new file (R2E-Gym's FileDiff.is_new), a /dev/null side or a "new file" /
    "deleted file" header line says so too.

    Raises:
      R2ERowError: the FileDiff has no path or no content at all."""
    if not isinstance(file_diff, Mapping):
        raise R2ERowError(f"expected an object, got {type(file_diff).__name__}")
    path = None
    header = file_diff.get("header")
    if isinstance(header, Mapping) and isinstance(header.get("file"), Mapping):
        path = header["file"].get("path")
    for key, prefix in (("plus_file", "b/"), ("minus_file", "a/")):
        side = file_diff.get(key)
        if not path and isinstance(side, Mapping) and side.get("path") not in (None, "/dev/null"):
            path = str(side["path"]).removeprefix(prefix)
    if not path:
        raise R2ERowError("no file path (header.file.path)")
    old = file_diff.get("old_file_content")
    new = file_diff.get("new_file_content")
    header_line = str(header.get("misc_line") or "") if isinstance(header, Mapping) else ""
    if _side_is_null(file_diff, "minus_file") or header_line.startswith("new file"):
        old = None
    elif old in ("", "/dev/null") and not header_line.startswith("deleted file"):
        old = None  # R2E-Gym's FileDiff.is_new: no old content means the commit adds the file
    if _side_is_null(file_diff, "plus_file") or header_line.startswith("deleted file"):
        new = None
    if old is None and new is None:
        raise R2ERowError(
            f"({path}): old_file_content and new_file_content are both missing; "
            "the patch cannot be rebuilt"
        )
    return path, unified_diff(path, old, new)


def _side_is_null(file_diff: Mapping[str, Any], key: str) -> bool:
    side = file_diff.get(key)
    return isinstance(side, Mapping) and side.get("path") == "/dev/null"
