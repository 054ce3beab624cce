"""Test-wide setup: 8 fake CPU devices so sharding is tested on this machine, and one JAX
compilation cache for the session.

Many tests run the same programs: launch/ scripts of the tiny config in subprocesses (train,
resume, interrupts, sweep, CLI errors), the same model in several test modules. JAX's
persistent cache (JAX_COMPILATION_CACHE_DIR, inherited by the subprocesses) compiles each
program once per session; a run that finds its programs there skips the compilation (the
executable is the one XLA built for the same program, so results are unchanged). The folder is
new for every session and removed at its end; a cache the user set is left as it is.

The slowest test files run first (`SLOWEST_FIRST`): under pytest-xdist (`./run.sh test` runs
two workers, a file each at a time, in collection order) a long file that starts last keeps one
worker busy alone at the end; started first, it runs beside everything else.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.cpu_devices import xla_flags

# Must happen before JAX initializes its backends (any test module may import jax).
os.environ.setdefault("XLA_FLAGS", xla_flags(8))  # tests/cpu_devices.py: why the timeouts
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="deepswe-tests-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# Both test workers and their subprocesses share that cache. Without a size limit JAX writes an
# entry with a plain write_bytes and reads without a lock, so a process could read another's
# half-written entry ("Error reading persistent compilation cache entry" on stderr, which the
# tests that count a run's stderr lines see); with one, every read and write takes the cache's
# file lock (jax._src.lru_cache). 8 GiB: never reached by a test session.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 << 30))


# Test files of over a minute each on a 2-core machine, longest first (BENCHMARKS.md, "CI time":
# `bench/ci_durations.py` on a run's log gives the current figures).
SLOWEST_FIRST = (
    "tests/launch/test_learning.py",
    "tests/launch/test_train_sft.py",
    "tests/bench/test_soak_interrupts.py",
    "tests/launch/test_mini_swe_agent.py",
    "tests/launch/test_sweep.py",
    "tests/sampling/test_vllm_sampler.py",
    "tests/sampling/test_multihost_vllm.py",
    "tests/bench/test_gpu_bench.py",
    "tests/launch/test_train_vllm.py",
    "tests/verify/test_evaluation_run.py",
    "tests/verify/test_evaluation_shards.py",
    "tests/launch/test_train_main.py",
)
_REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """Moves the files of SLOWEST_FIRST to the front, in its order; the rest keep theirs."""
    missing = [path for path in SLOWEST_FIRST if not (_REPO_ROOT / path).is_file()]
    if missing:
        raise pytest.UsageError(
            f"tests/conftest.py SLOWEST_FIRST names {missing}, which do not exist: a test file "
            "moved or was renamed; update the list"
        )
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}

    def position(item) -> int:
        path = Path(str(item.path)).resolve()
        relative = (
            path.relative_to(_REPO_ROOT).as_posix() if path.is_relative_to(_REPO_ROOT) else ""
        )
        return rank.get(relative, len(rank))

    items.sort(key=position)
