"""./run.sh's refusals before any set-up (no virtualenv, no apt, no Docker): a typo in the
command word, with the usage (`./run.sh --config.seed=1` means `main` with that argument), and a
disk without room for the set-up, with what to free."""

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_sh(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """./run.sh with its virtualenv and run directory under tmp_path (neither should appear)."""
    env = {
        **os.environ,
        "DEEPSWE_VENV": str(tmp_path / "venv"),
        "DEEPSWE_RUN": str(tmp_path / "run"),
        **env,
    }
    return subprocess.run(
        ["bash", str(REPO_ROOT / "run.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # hang guard only
    )


def test_an_unknown_command_prints_the_usage_before_any_set_up(tmp_path):
    result = run_sh(tmp_path, "tset", "-k", "learning")
    assert result.returncode == 2
    assert "usage: ./run.sh [main|test]" in result.stderr
    assert "./run.sh --config.seed=1" in result.stderr
    assert result.stdout == ""  # no "== docker engine", no "== python environment"
    assert not (tmp_path / "venv").exists() and not (tmp_path / "run").exists()


def test_a_disk_without_room_for_the_set_up_is_refused_before_it_starts(tmp_path):
    # Stop 34's CI: pip failed halfway through .venv with "[Errno 28] No space left on device"
    # (old clones had filled the disk). run.sh now refuses first and says what to free.
    # A petabyte: more than any disk here has.
    result = run_sh(tmp_path, "test", "-k", "nothing", DEEPSWE_NEED_FREE_GB=str(10**9))
    assert result.returncode == 1
    assert "GB free on the disk holding" in result.stderr
    assert "needs about 1000000000 GB" in result.stderr
    assert "docker system prune" in result.stderr
    assert result.stdout == ""  # nothing of the set-up ran
    assert not (tmp_path / "venv").exists() and not (tmp_path / "run").exists()
