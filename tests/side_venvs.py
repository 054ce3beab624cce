"""What the tests that run a peer in a virtualenv of its own (verl, mini-swe-agent, vLLM's CPU
build) do when it is not installed: skip with the command that installs it, except in CI, which
installs each (`./run.sh test`), so that there its absence fails the test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def require_installed(path: Path, install: str) -> None:
    """Returns when `path` exists; otherwise skips (fails under CI=...) naming `install`."""
    if path.exists():
        return
    message = f"{path} is missing; run `{install}`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
