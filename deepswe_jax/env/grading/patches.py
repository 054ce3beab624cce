"""Which paths a patch touches, and which of them the grader protects.

`patch_paths` reads the paths of a unified diff; `without_paths` drops the file sections of
a patch that touch given paths (a layout's harness files); `is_protected` says whether a
patch's change to a path is discarded before the tests run (test files, the tests' own files,
pytest configuration, names that would shadow pytest; see `grading.restore_test_files`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from deepswe_jax.env.tasks import TEST_DIR_NAMES, Task, is_test_path

PYTEST_CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
    }
)
# Top-level names that `python3 -m pytest` (cwd first on sys.path) would import instead of the real ones.
SHADOWING_NAMES = frozenset(
    {
        "pytest.py",
        "pytest",
        "_pytest",
        "py.py",
        "pluggy",
        "iniconfig",
        "sitecustomize.py",
        "usercustomize.py",
    }
)


def patch_paths(patch: str) -> set[str]:
    """Repository-relative paths a unified diff touches (old and new names)."""
    paths = set()
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                paths.add(name.split("/", 1)[1] if "/" in name else name)
    return paths


def touched_paths(patch: str) -> set[str]:
    """Every repository-relative path a patch names: ---/+++ lines, `diff --git` headers
    (binary and mode-only sections have no ---/+++), renames and copies; quotes dropped."""
    paths = {path.strip('"') for path in patch_paths(patch)}
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            paths |= {path.strip('"') for path in _git_header_paths(line.replace('"', ""))}
        elif line.startswith(("rename to ", "copy to ")):
            paths.add(line.split(" ", 2)[2].strip().strip('"'))
    return {path for path in paths if path}


def protected_paths(task: Task) -> set[str]:
    """Files that must be at their base (or test_patch) state when the tests run."""
    node_files = {test_id.split("::")[0] for test_id in task.FAIL_TO_PASS + task.PASS_TO_PASS}
    return patch_paths(task.test_patch) | node_files


def is_protected(path: str, explicit: set[str]) -> bool:
    """True if a patch's change to `path` is discarded before the tests run."""
    parts = PurePosixPath(path).parts
    return (
        path in explicit
        or is_test_path(path)
        or any(
            part in TEST_DIR_NAMES for part in parts
        )  # the tests/ folder itself, e.g. replaced by a link
        or (bool(parts) and parts[-1] in PYTEST_CONFIG_NAMES)
        or (bool(parts) and parts[0] in SHADOWING_NAMES)
    )


def without_paths(patch: str, paths: Iterable[str]) -> str:
    """`patch` without the file sections that touch one of `paths` or a path under them."""
    paths = tuple(paths)
    if not paths:
        return patch
    starts_git = any(line.startswith("diff --git ") for line in patch.splitlines())
    sections: list[list[str]] = [[]]
    lines = patch.splitlines(keepends=True)
    for i, line in enumerate(lines):
        new_section = (
            line.startswith("diff --git ")
            if starts_git
            else line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        )
        if new_section and sections[-1]:
            sections.append([])
        sections[-1].append(line)
    kept = []
    for section in sections:
        text = "".join(section)
        touched = patch_paths(text) | _git_header_paths(section[0] if section else "")
        if not any(path == p or path.startswith(p + "/") for path in touched for p in paths):
            kept.append(text)
    return "".join(kept)


def _git_header_paths(line: str) -> set[str]:
    """a/ and b/ paths of a `diff --git a/x b/y` line (binary and mode-only sections have no
    ---/+++ lines)."""
    if not line.startswith("diff --git "):
        return set()
    parts = line[len("diff --git ") :].strip().split(" b/", 1)
    return {part.removeprefix("a/") for part in parts}
