"""Unified diffs built from file contents (git's format, so `git apply` takes them)."""

from __future__ import annotations

import difflib


def unified_diff(path: str, old: str | None, new: str | None) -> str:
    """git-style unified diff of one text file; None content means the file is absent."""
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    if old_lines == new_lines and (old is None) == (new is None):
        return ""
    header = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    elif new is None:
        header.append("deleted file mode 100644\n")
    hunks = []
    for line in difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=3,
    ):
        hunks.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(header + hunks)
