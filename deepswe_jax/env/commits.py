"""The deterministic base commit of a source tree: what a task's `base_commit` is for a task
whose repository comes from a local `source` directory (the shipped suite, hidden tasks).

`commit_tree(src, dest)` copies `src` and commits it as the single commit "base" with a fixed
identity, dates and git configuration, so the sha depends only on file contents, names and
modes; `source_commit(src)` is that sha. Task images hold exactly this commit at /testbed
(`images.ensure_task_image`), and loaders derive `base_commit` with it when a row omits it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "deepswe",
    "GIT_AUTHOR_EMAIL": "deepswe@localhost",
    "GIT_COMMITTER_NAME": "deepswe",
    "GIT_COMMITTER_EMAIL": "deepswe@localhost",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}
# Caches that a local test run leaves in a source tree; never part of the base commit.
UNCOMMITTED_NAMES = (".git", "__pycache__", "*.pyc", ".pytest_cache")


class CommitError(RuntimeError):
    """git failed while committing a source tree."""


def git(args: list[str], cwd: Path) -> str:
    """`git args` in `cwd` with no user or system configuration and the fixed identity."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        **GIT_IDENTITY,
    }
    result = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise CommitError(f"git {' '.join(args)} failed in {cwd}: {result.stderr.strip()}")
    return result.stdout


def commit_tree(src: str | os.PathLike, dest: str | os.PathLike) -> str:
    """Copy `src` into `dest` and commit it as the single commit "base"; return its sha.

    The identity (deepswe <deepswe@localhost>), dates (2024-01-01T00:00:00+00:00)
    and git configuration are fixed, so the sha depends only on the file contents,
    names and modes. `.git`, `__pycache__`, `*.pyc` and `.pytest_cache` in `src`
    are not copied. `dest` must not exist or be empty.
    """
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise FileNotFoundError(f"source tree {src} is not a directory")
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"commit_tree destination {dest} is not empty")
    shutil.copytree(
        src,
        dest,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(*UNCOMMITTED_NAMES),
    )
    git(["-c", "init.templateDir=", "init", "-q", "-b", "main"], dest)
    git(["add", "-A"], dest)
    git(["commit", "-q", "--no-verify", "--allow-empty", "-m", "base"], dest)
    return git(["rev-parse", "HEAD"], dest).strip()


def source_commit(src: str | os.PathLike) -> str:
    """The sha `commit_tree(src, ...)` would produce (computed in a scratch directory)."""
    with tempfile.TemporaryDirectory(prefix="deepswe-commit-") as scratch:
        return commit_tree(src, Path(scratch) / "tree")
