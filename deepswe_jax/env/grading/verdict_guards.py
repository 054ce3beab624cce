"""What keeps the code under test from writing its own verdict (used by `grading.grade_patch`).

1. **Refused patches.** A patch may not add, next to the repository's code on sys.path, a
   module whose top-level name the image's environment already provides (standard library,
   built-ins, installed packages: `pprint.py`, `attr/`, `packaging/`), nor a .pth file or
   package metadata (`*.dist-info`, `*.egg-info`, `*.egg-link`: pytest loads the plugins their
   entry points name). Such a patch is graded `patch_refused` (reward 0). The names come from
   `ENVIRONMENT_PROBE`, run once per image in a grading container (`environment_of`).
2. **A result record** (tools/pytest_record.py): for harnesses that run our pytest entry, the
   grader names a random path outside /testbed; pytest's own reports are written there when
   the session ends. The RL reward needs the log's verdict and the record's to agree
   (`hardened_resolved`); a log that says resolved when the record does not (or is missing,
   or says pytest's reporting functions were replaced) is a suspected forgery, logged.
   SWE-bench reports keep the log's verdict, as the official harness has it.

Not contained: code under test runs in the test process, so code aimed at this recorder (it
can find the record's file descriptor) can still forge it; and a fix that makes a test pass
by cheating its assertions (an object equal to everything) is not a forgery of the log.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from deepswe_jax.env.grading.harness import PASSING, Harness, PytestHarness
from deepswe_jax.env.grading.patches import touched_paths
from deepswe_jax.env.layouts import LAYOUTS
from deepswe_jax.env.runtime import TESTBED, Runtime
from deepswe_jax.env.tasks import Task

logger = logging.getLogger(__name__)

# Prints {"names": importable top-level names, "roots": {sys.path folder of the repository
# (under /testbed, not a site-packages), relative: its entries}} for the tests' python.
ENVIRONMENT_PROBE = r"""
import json, os, pkgutil, sys
testbed = os.path.realpath(os.getcwd())
def repository(p):
    real = os.path.realpath(p or testbed)
    inside = real == testbed or real.startswith(testbed + os.sep)
    return inside and "site-packages" not in real and "dist-packages" not in real
environment = [p for p in sys.path if p and not repository(p)]
names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
names |= {m.name for m in pkgutil.iter_modules(environment)}
roots = {}
for p in sys.path:
    if repository(p) and os.path.isdir(p or testbed):
        rel = os.path.relpath(os.path.realpath(p or testbed), testbed)
        roots["" if rel == "." else rel] = sorted(os.listdir(p or testbed))
print(json.dumps({"names": sorted(names), "roots": roots}))
"""
PROBE_MARK = "--deepswe-environment--"
# New entries of a sys.path folder that change what is imported or which plugins load.
METADATA_SUFFIXES = (".pth", ".dist-info", ".egg-info", ".egg-link")
# Files importable as a module named by the part of their name before the first dot.
MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so")
RECORD_DIR = "/tmp"

_environments: dict[tuple[str, str], Environment] = {}
_environments_lock = threading.Lock()


@dataclass(frozen=True)
class Environment:
    """What the tests' python imports: `names` provided by the environment, and the folders
    of /testbed on its sys.path (relative; "" is /testbed) with the entries each holds at the
    base commit."""

    names: frozenset[str]
    roots: Mapping[str, frozenset[str]]


def probe_command(task: Task) -> str:
    """Bash printing PROBE_MARK, then ENVIRONMENT_PROBE's JSON, in the tests' environment."""
    activate = LAYOUTS[task.layout].activate or "true"
    quoted = ENVIRONMENT_PROBE.replace("'", "'\"'\"'")
    return f"{{ {activate}; }} >/dev/null 2>&1; echo {PROBE_MARK}; python3 -c '{quoted}'"


def environment_of(task: Task, runtime: Runtime | None) -> Environment | None:
    """The environment of `task.image`'s tests: cached per image and layout; probed in
    `runtime` (a started grading runtime at the base commit) when not cached yet, None when
    not cached and no runtime is given. Raises RuntimeError when the probe fails."""
    key = (task.image, task.layout)
    with _environments_lock:
        if key in _environments or runtime is None:
            return _environments.get(key)
    result = runtime.run(probe_command(task), timeout=120, workdir=TESTBED)
    _, _, text = result.output.partition(PROBE_MARK)
    if result.exit_code != 0 or not text.strip():
        raise RuntimeError(f"probing the python of {task.image} failed: {result.output[-2000:]}")
    data = json.loads(text.strip().splitlines()[-1])
    environment = Environment(
        names=frozenset(data["names"]),
        roots={root: frozenset(entries) for root, entries in data["roots"].items()},
    )
    with _environments_lock:
        _environments[key] = environment
    return environment


def refused_paths(patch: str, environment: Environment) -> list[str]:
    """Paths `patch` adds (a name new at its sys.path folder) that would stand in for a module of the environment or add
    import-time metadata (see the module docstring); [] for an acceptable patch."""
    refused = []
    for path in sorted(touched_paths(patch)):
        for root, present in environment.roots.items():
            parts = PurePosixPath(path).parts
            prefix = PurePosixPath(root).parts if root else ()
            if len(parts) <= len(prefix) or parts[: len(prefix)] != prefix:
                continue
            first = parts[len(prefix)]
            if first in present:
                continue
            is_file = len(parts) == len(prefix) + 1
            if is_file and not first.endswith(MODULE_SUFFIXES):
                name = ""  # pytest.ini, README: not importable
            else:
                name = first.split(".")[0] if is_file else first
            if name in environment.names or first.endswith(METADATA_SUFFIXES):
                refused.append(path)
                break
    return refused


def records_results(task: Task, harness: Harness) -> bool:
    """Whether the harness's test command is our pytest entry, which writes a result record."""
    return isinstance(harness, PytestHarness) and not task.test_cmd


def new_record_path() -> str:
    """A fresh path for one grade's result record, outside /testbed."""
    return f"{RECORD_DIR}/deepswe-record-{secrets.token_hex(16)}.json"


def read_record(runtime: Runtime, path: str) -> dict | None:
    """The result record at `path`, None when the run wrote none (or a torn one)."""
    try:
        data = runtime.read_file(path)
    except OSError:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def record_problem(task: Task, record: dict | None) -> str:
    """Why the record does not confirm the tests passed ("" when it does)."""
    if record is None:
        return "the test run wrote no result record (it ended before pytest's session did)"
    if record.get("replaced"):
        return f"pytest's reporting was replaced during the run: {record['replaced']}"
    outcomes = record.get("outcomes") or {}
    failing = [
        test_id
        for test_id in task.FAIL_TO_PASS + task.PASS_TO_PASS
        if outcomes.get(test_id) not in PASSING
    ]
    if failing:
        return f"pytest's reports have these tests not passing: {failing[:5]}"
    return ""


def log_suspected_forgery(task: Task, problem: str) -> None:
    logger.warning(
        "suspected forgery in grading %s: the log says resolved, but %s; reward 0",
        task.instance_id,
        problem,
    )
