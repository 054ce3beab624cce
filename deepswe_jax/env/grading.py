"""Grade a patch by running the task's tests in a fresh container (SWE-bench semantics).

Steps, all in a new container from `task.image` (never the agent's container):

1. apply the patch with `git apply`, falling back to `patch --batch --fuzz=5 -p1`;
   failure -> status `apply_failed`;
2. discard the patch's changes to everything that decides how tests run, so a
   patch cannot edit, delete or skip the tests it is graded on: files in
   `test_patch`, files of the FAIL_TO_PASS / PASS_TO_PASS node ids, test files
   (`tasks.is_test_path`: under tests/, test_*.py, *_test.py, conftest.py),
   pytest configuration at any depth (pytest.ini, tox.ini, setup.cfg,
   pyproject.toml, pytest.toml) and top-level names that would shadow pytest
   under `python3 -m pytest` (pytest.py, _pytest/, pluggy/, sitecustomize.py)
   go back to the base commit, new ones are deleted. A fix that must change
   setup.cfg or pyproject.toml is therefore graded without that change;
3. apply `test_patch`;
4. run the selected tests (`python3 -m pytest -rA` on the node ids, or
   `task.test_cmd`) under a timeout and parse the `-rA` short summary:
   PASSED / XFAIL pass; FAILED / ERROR / XPASS / missing fail.

The container is a DockerRuntime on the local engine (or `client`'s), or a runtime made by
`runtime_factory` (the EnvPool's backend, e.g. `k8s_runtime.K8sPodFactory` pods).

Resolved = every FAIL_TO_PASS and PASS_TO_PASS test passes; for R2E-Gym tasks
(`expected_output_json`), the parsed status map must equal it exactly.
Not prevented: library code that monkeypatches pytest internals when the tests
import it (the tests run in the same process as the code under test).
"""

from __future__ import annotations

import functools
import re
import shlex
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from deepswe_jax.env.docker_runtime import DockerRuntime
from deepswe_jax.env.tasks import TEST_DIR_NAMES, Task, is_test_path

if TYPE_CHECKING:
    from deepswe_jax.env.pool import RuntimeFactory

DEFAULT_TIMEOUT = 300.0
PASSING = frozenset({"PASSED", "XFAIL"})
SUMMARY_STATUSES = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS", "SKIPPED")
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
PYTEST_ENTRY = (
    "import os, sys, pytest; code = pytest.main(sys.argv[1:]); "
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(int(code))"
)
STATUSES = ("resolved", "unresolved", "apply_failed", "timeout", "infra_error", "empty_patch")
PATCH_FILE = "/tmp/deepswe_model.patch"
TEST_PATCH_FILE = "/tmp/deepswe_test.patch"
PROTECTED_LIST_FILE = "/tmp/deepswe_protected_paths"

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$")
_SESSION_FOOTER = re.compile(
    r"^=+ .*\b(passed|failed|error|errors|skipped|deselected|xfailed|xpassed|warnings?|no tests ran)\b.* =+$"
)


def _empty_tests_status() -> dict[str, dict[str, list[str]]]:
    return {
        key: {"success": [], "failure": []}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")
    }


@dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one patch.

    status: 'resolved' | 'unresolved' | 'apply_failed' | 'timeout' | 'infra_error' | 'empty_patch'.
    tests_status: SWE-bench layout {FAIL_TO_PASS: {success: [...], failure: [...]}, PASS_TO_PASS, ...};
      in R2E-Gym mode PASS_TO_PASS lists the expected tests whose status matched / did not.
    test_log: combined output of the grading commands (patch application and test run).
    error: what went wrong, for 'infra_error' and 'timeout'.
    """

    instance_id: str
    status: str
    reward: float
    patch_successfully_applied: bool
    resolved: bool
    tests_status: dict[str, dict[str, list[str]]] = field(default_factory=_empty_tests_status)
    test_log: str = ""
    duration_s: float = 0.0
    patch_exists: bool = True
    patch_is_none: bool = False
    error: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown grading status {self.status!r}; expected one of {STATUSES}")

    @property
    def infra_error(self) -> bool:
        """True when grading failed for reasons that say nothing about the patch."""
        return self.status == "infra_error"

    def to_report(self) -> dict[str, dict[str, Any]]:
        """SWE-bench per-instance report.json: {instance_id: {patch_is_None, ..., tests_status}}."""
        return {
            self.instance_id: {
                "patch_is_None": self.patch_is_none,
                "patch_exists": self.patch_exists,
                "patch_successfully_applied": self.patch_successfully_applied,
                "resolved": self.resolved,
                "tests_status": self.tests_status,
            }
        }


def parse_pytest_summary(log: str) -> dict[str, str]:
    """Per-test status from the `-rA` short test summary of a pytest log.

    Only lines between the last "short test summary info" header and the session
    footer count, so test output that imitates summary lines is ignored. A test
    reported twice (e.g. PASSED then ERROR in teardown) keeps its failing status.

    Returns:
      {node id: 'PASSED' | 'FAILED' | 'ERROR' | 'XFAIL' | 'XPASS'}; skipped tests
      are not listed (their summary lines name a file location, not a node id).
    """
    statuses: dict[str, str] = {}
    for line in _summary_lines(log):
        status, _, rest = line.partition(" ")
        if status not in SUMMARY_STATUSES or status == "SKIPPED" or not rest:
            continue
        node_id = _strip_message(rest)
        if statuses.get(node_id) not in ("FAILED", "ERROR"):
            statuses[node_id] = status
    return statuses


def _summary_lines(log: str) -> list[str]:
    lines = [line.rstrip("\r") for line in _strip_ansi(log).splitlines()]
    start = None
    for i, line in enumerate(lines):
        if _SUMMARY_HEADER.match(line):
            start = i + 1
    if start is None:
        return []
    end = len(lines)
    for i in range(start, len(lines)):
        if _SESSION_FOOTER.match(lines[i]):
            end = i
            break
    return lines[start:end]


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _strip_message(rest: str) -> str:
    """The node id of a summary line's remainder: everything before the first " - "
    that lies outside the parametrization brackets."""
    depth = 0
    for i, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        elif depth == 0 and rest.startswith(" - ", i):
            return rest[:i]
    return rest


def r2e_status_map(log: str) -> dict[str, str]:
    """Test statuses keyed the way R2E-Gym keys `expected_output_json`: the node id
    without its file part, "::" replaced by "." (e.g. "TestDates.test_iso_week")."""
    return {
        ".".join(node_id.split("::")[1:]): status
        for node_id, status in parse_pytest_summary(log).items()
    }


def _normalize_r2e(statuses: dict[str, str]) -> dict[str, str]:
    return {_strip_ansi(name).split(" - ")[0]: status for name, status in statuses.items()}


def default_test_cmd(test_ids: Iterable[str]) -> str:
    """pytest with `-rA` on the given node ids (quoted for the shell).

    Runs like `python3 -m pytest` (the repository root first on sys.path) but
    leaves with `os._exit`, so code under test cannot print a fake summary after
    the real one from an atexit handler or a lingering thread.
    """
    ids = " ".join(shlex.quote(test_id) for test_id in sorted(set(test_ids)))
    return f"python3 -c {shlex.quote(PYTEST_ENTRY)} -rA --color=no -p no:cacheprovider {ids}"


def patch_paths(patch: str) -> set[str]:
    """Repository-relative paths a unified diff touches (old and new names)."""
    paths = set()
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                paths.add(name.split("/", 1)[1] if "/" in name else name)
    return paths


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


def _apply_cmd(patch_file: str) -> str:
    return (
        f"git apply --verbose {patch_file} || "
        f"(echo 'git apply failed; trying patch --fuzz=5' && patch --batch --fuzz=5 -p1 -i {patch_file})"
    )


def _changed_paths(status_z: str) -> list[str]:
    """Paths from `git status --porcelain -z --no-renames` output ("XY path\\0")."""
    return [entry[3:] for entry in status_z.split("\0") if len(entry) > 3]


def grade_patch(
    task: Task,
    patch: str | None,
    *,
    client: Any = None,
    runtime_factory: RuntimeFactory | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    run_label: str = "grading",
    skip_empty: bool = True,
    mem_limit: str = "2g",
) -> GradeResult:
    """Grade `patch` on `task` in a fresh container from `task.image`.

    Args:
      task: the task; its image must exist where the grading runs (local Docker:
        `images.ensure_task_image`; a K8sPodFactory: pullable by the cluster).
      patch: unified diff against the base commit (None or "" = no change).
      client: docker client (default: from the environment).
      runtime_factory: grade in a runtime it makes instead of a local Docker container
        (e.g. `k8s_runtime.K8sPodFactory`, `EnvPool.runtime_factory`); not with `client`.
      timeout: seconds for the test run; exceeding it gives status 'timeout'.
      run_label: value of the `deepswe.run` label on the grading container.
      skip_empty: when True an empty patch returns 'empty_patch' at once; when
        False the tests still run (used to check that a task is not solved by
        doing nothing) and the status is 'unresolved' or 'resolved'.
      mem_limit: memory limit of the Docker grading container (a runtime_factory's
        runtimes have the factory's limits).

    Returns:
      GradeResult; reward 1.0 only if resolved. Runtime failures (Docker, pods) give
      'infra_error' (not a wrong answer) instead of raising. Raises ValueError for
      `client` and `runtime_factory` together.
    """
    if client is not None and runtime_factory is not None:
        raise ValueError(
            "grade_patch got both a Docker client and a runtime_factory; pass `client` to "
            "grade in a Docker container on that engine, or `runtime_factory` to grade in the "
            "runtimes it makes (e.g. Kubernetes pods), not both"
        )
    started = time.monotonic()
    is_empty = patch is None or not patch.strip()

    def result(
        status: str, *, applied: bool, log: str = "", tests_status=None, error: str = ""
    ) -> GradeResult:
        resolved = status == "resolved"
        return GradeResult(
            instance_id=task.instance_id,
            status=status,
            reward=1.0 if resolved else 0.0,
            patch_successfully_applied=applied,
            resolved=resolved,
            tests_status=tests_status or _empty_tests_status(),
            test_log=log,
            duration_s=time.monotonic() - started,
            patch_exists=not is_empty,
            patch_is_none=patch is None,
            error=error,
        )

    if is_empty and skip_empty:
        return result("empty_patch", applied=False)

    log: list[str] = []
    runtime = None
    try:
        if runtime_factory is not None:
            runtime = runtime_factory(task.image, run_label=run_label)
        else:
            runtime = DockerRuntime(
                task.image, run_label=run_label, client=client, mem_limit=mem_limit
            )
        runtime.start()

        def run(cmd: str, seconds: float = 60.0):
            out = runtime.run(cmd, timeout=seconds)
            log.append(f"$ {cmd}\n{out.output}")
            return out

        if not is_empty:
            runtime.write_file(PATCH_FILE, patch if patch.endswith("\n") else patch + "\n")
            applied = run(_apply_cmd(PATCH_FILE))
            if applied.exit_code != 0:
                return result("apply_failed", applied=False, log="\n".join(log))
            status = run(
                "git status --porcelain=v1 -z --untracked-files=all --ignored=traditional --no-renames"
            )
            explicit = protected_paths(task)
            discard = [
                path for path in _changed_paths(status.output) if is_protected(path, explicit)
            ]
            if discard:
                runtime.write_file(PROTECTED_LIST_FILE, "\0".join(discard) + "\0")
                restored = run(
                    "while IFS= read -r -d '' p; do rm -rf -- \"$p\"; "
                    'if git cat-file -e "HEAD:$p" 2>/dev/null; then git checkout -q HEAD -- "$p"; fi; '
                    f"done < {PROTECTED_LIST_FILE} && echo restored test files: $(tr '\\0' ' ' < {PROTECTED_LIST_FILE})"
                )
                if restored.exit_code != 0:
                    return result(
                        "infra_error",
                        applied=True,
                        log="\n".join(log),
                        error="restoring test files failed",
                    )
        if task.test_patch.strip():
            runtime.write_file(TEST_PATCH_FILE, task.test_patch)
            test_patch_applied = run(f"git apply --verbose {TEST_PATCH_FILE}")
            if test_patch_applied.exit_code != 0:
                return result(
                    "infra_error",
                    applied=True,
                    log="\n".join(log),
                    error=f"test_patch of {task.instance_id} does not apply to its base commit; fix the task",
                )
        test_cmd = task.test_cmd or default_test_cmd(task.FAIL_TO_PASS + task.PASS_TO_PASS)
        tests = runtime.run(
            f"timeout -k 5 {int(timeout)} bash -c {shlex.quote(test_cmd)}", timeout=timeout + 30
        )
        log.append(f"$ {test_cmd}\n{tests.output}")
        if tests.timed_out or tests.exit_code == 124:
            return result(
                "timeout", applied=True, log="\n".join(log), error=f"tests ran past {timeout:.0f} s"
            )
        if task.expected_output_json is not None:
            expected = _normalize_r2e(task.expected_output_json)
            observed = _normalize_r2e(r2e_status_map(tests.output))
            tests_status = _empty_tests_status()
            for name in sorted(expected):
                key = "success" if observed.get(name) == expected[name] else "failure"
                tests_status["PASS_TO_PASS"][key].append(name)
            resolved = observed == expected
        else:
            statuses = parse_pytest_summary(tests.output)
            tests_status = _empty_tests_status()
            for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
                for test_id in getattr(task, group):
                    key = "success" if statuses.get(test_id) in PASSING else "failure"
                    tests_status[group][key].append(test_id)
            resolved = (
                not tests_status["FAIL_TO_PASS"]["failure"]
                and not tests_status["PASS_TO_PASS"]["failure"]
            )
        return result(
            "resolved" if resolved else "unresolved",
            applied=True,
            log="\n".join(log),
            tests_status=tests_status,
        )
    except Exception as e:  # Docker or container failure: say so, never score it as a wrong answer.
        return result(
            "infra_error", applied=False, log="\n".join(log), error=f"{type(e).__name__}: {e}"
        )
    finally:
        if runtime is not None:
            try:
                runtime.close()
            except Exception:  # the result is already decided; a stuck container is reaped by label
                pass


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
