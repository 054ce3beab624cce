"""Grade a patch by running the task's tests in a fresh runtime (SWE-bench semantics).

`grade_patch` refuses a patch larger than `max_patch_bytes` (status `patch_too_large`) or one
that adds a module in place of one the image's environment provides, a .pth file or package
metadata (status `patch_refused`, `verdict_guards`); both score 0 and are not infrastructure
errors. It then runs these steps, each a function of its own, in a new runtime from
`task.image` (never the agent's container):

1. `apply_patch`: `git apply`, falling back to `patch --batch --fuzz=5 -p1`;
   failure -> status `apply_failed`. The patch's changes to the layout's harness files
   (`layouts.Layout.harness_paths`: R2E-Gym's run_tests.sh, .venv, r2e_tests) are dropped first;
2. `restore_test_files`: discard the patch's changes (what `git status` shows after the patch
   and did not show before it) to everything that decides how tests
   run, so a patch cannot edit, delete or skip the tests it is graded on: files in
   `test_patch`, files of the FAIL_TO_PASS / PASS_TO_PASS node ids, test files
   (`tasks.is_test_path`: under tests/, test_*.py, *_test.py, conftest.py),
   pytest configuration at any depth (pytest.ini, tox.ini, setup.cfg,
   pyproject.toml, pytest.toml) and top-level names that would shadow pytest
   under `python3 -m pytest` (pytest.py, _pytest/, pluggy/, sitecustomize.py)
   go back to the base commit, new ones are deleted. A fix that must change
   setup.cfg or pyproject.toml is therefore graded without that change;
3. `apply_test_patch`: apply `test_patch` (unless the harness applies it itself);
4. `run_tests`: the harness's test command (`harness.Harness`: how tests are run and how
   their log is read; `harness_for` picks it by the task's layout) under a timeout;
5. `score_tests`: 'timeout' past the limit, else the harness's verdict on the output
   (pytest's `-rA` summary: PASSED / XFAIL pass; FAILED / ERROR / XPASS / missing fail;
   swebench's parser and report for SWE-bench rows; R2E-Gym's status map for R2E-Gym rows).
   Where the test command is our pytest entry, a log that says resolved must agree with the
   run's result record (`verdict_guards`), else the status is 'unresolved' with
   `suspected_forgery` set (the report.json keeps the log's verdict, as SWE-bench has it).

The runtime is made by `runtime_factory` (the EnvPool's backend, e.g. a
`k8s_runtime.K8sPodFactory`), or is a DockerRuntime on the local engine (or `client`'s).

Resolved = every FAIL_TO_PASS and PASS_TO_PASS test passes; for R2E-Gym tasks
(`expected_output_json`), the parsed status map must equal it exactly.
Tests that exhaust the grading container's disk or memory (runtime.PolicyLimitError) score
'unresolved': only failures the patch cannot cause are 'infra_error'.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

from deepswe_jax.env.grading.grade_result import GradeResult
from deepswe_jax.env.grading.harness import (
    RECORD_VARIABLE,
    Harness,
    PytestHarness,
    Verdict,
    empty_tests_status,
)
from deepswe_jax.env.grading.harness_r2egym import R2EHarness
from deepswe_jax.env.grading.harness_swebench import SwebenchHarness
from deepswe_jax.env.grading.patches import is_protected, protected_paths, without_paths
from deepswe_jax.env.grading.verdict_guards import (
    environment_of,
    log_suspected_forgery,
    new_record_path,
    read_record,
    record_problem,
    records_results,
    refused_paths,
)
from deepswe_jax.env.layouts import LAYOUTS
from deepswe_jax.env.runtime import (
    DEFAULT_MAX_PATCH_BYTES,
    ExecResult,
    PolicyLimitError,
    Runtime,
    RuntimeFactory,
)
from deepswe_jax.env.tasks import Task

DEFAULT_TIMEOUT = 300.0
# Memory limit of a Docker grading container (a runtime_factory's runtimes have its limits).
GRADING_MEM_LIMIT = "2g"
PATCH_FILE = "/tmp/deepswe_model.patch"
TEST_PATCH_FILE = "/tmp/deepswe_test.patch"
PROTECTED_LIST_FILE = "/tmp/deepswe_protected_paths"
STATUS_BEFORE_FILE = "/tmp/deepswe_status_before"
GIT_STATUS_CMD = (
    "git status --porcelain=v1 -z --untracked-files=all --ignored=traditional --no-renames"
)
# Deletes each path of PROTECTED_LIST_FILE and checks it out again where HEAD has it.
RESTORE_CMD = (
    "while IFS= read -r -d '' p; do rm -rf -- \"$p\"; "
    'if git cat-file -e "HEAD:$p" 2>/dev/null; then git checkout -q HEAD -- "$p"; fi; '
    f"done < {PROTECTED_LIST_FILE} && echo restored test files: $(tr '\\0' ' ' < {PROTECTED_LIST_FILE})"
)
# Separates the status after the patch from the one before it in CHANGES_CMD's output.
STATUS_MARK = "--deepswe-status-before--"
STATUS_SEPARATOR = f"\0{STATUS_MARK}\0"
CHANGES_CMD = f"{GIT_STATUS_CMD} && printf '\\0{STATUS_MARK}\\0' && cat {STATUS_BEFORE_FILE}"


def harness_for(task: Task) -> Harness:
    """R2EHarness for tasks with `expected_output_json`, SwebenchHarness for the swebench
    layout, else PytestHarness."""
    if task.expected_output_json is not None:
        return R2EHarness(applies_test_patch=task.layout == "r2egym")
    if task.layout == "swebench":
        return SwebenchHarness()
    return PytestHarness()


def _apply_cmd(patch_file: str) -> str:
    return (
        f"{GIT_STATUS_CMD} > {STATUS_BEFORE_FILE} 2>/dev/null; git apply --verbose {patch_file} || "
        f"(echo 'git apply failed; trying patch --fuzz=5' && patch --batch --fuzz=5 -p1 -i {patch_file})"
    )


def _status_entries(status_z: str) -> list[str]:
    """Entries ("XY path") of `git status --porcelain -z --no-renames` output."""
    return [entry for entry in status_z.split("\0") if len(entry) > 3]


def _changed_paths(changes: str) -> list[str]:
    """Paths whose status CHANGES_CMD shows after the patch and not before it."""
    after, _, before = changes.partition(STATUS_SEPARATOR)
    unchanged = set(_status_entries(before))
    return [entry[3:] for entry in _status_entries(after) if entry not in unchanged]


# ---------------------------------------------------------------- the steps


class GradingSession:
    """The grading runtime and the log of the commands run in it (GradeResult.test_log)."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self._entries: list[str] = []

    def run(self, cmd: str, seconds: float = 60.0, *, logged_as: str = "") -> ExecResult:
        """`cmd` in /testbed, logged as "$ <logged_as or cmd>" and its output."""
        result = self.runtime.run(cmd, timeout=seconds)
        self._entries.append(f"$ {logged_as or cmd}\n{result.output}")
        return result

    @property
    def log(self) -> str:
        return "\n".join(self._entries)


def apply_patch(session: GradingSession, patch: str) -> bool:
    """Step 1: whether `patch` applied (git apply, else patch --fuzz=5); records `git status`
    before it, for step 2."""
    session.runtime.write_file(PATCH_FILE, patch if patch.endswith("\n") else patch + "\n")
    return session.run(_apply_cmd(PATCH_FILE)).exit_code == 0


def restore_test_files(session: GradingSession, task: Task) -> bool:
    """Step 2: every path the patch changed that `is_protected` back at the base commit (deleted
    when new there); False when restoring failed. Files that were already there before the
    patch (an image's untracked files, e.g. a .venv) are left alone."""
    changes = session.run(CHANGES_CMD)
    if changes.exit_code != 0:
        return False
    explicit = protected_paths(task)
    discard = [path for path in _changed_paths(changes.output) if is_protected(path, explicit)]
    if not discard:
        return True
    session.runtime.write_file(PROTECTED_LIST_FILE, "\0".join(discard) + "\0")
    return session.run(RESTORE_CMD).exit_code == 0


def apply_test_patch(session: GradingSession, task: Task) -> bool:
    """Step 3: whether `task.test_patch` applied (True when it has none)."""
    if not task.test_patch.strip():
        return True
    session.runtime.write_file(TEST_PATCH_FILE, task.test_patch)
    return session.run(f"git apply --verbose {TEST_PATCH_FILE}").exit_code == 0


def run_tests(
    session: GradingSession, task: Task, harness: Harness, timeout: float, record_path: str = ""
) -> ExecResult:
    """Step 4: the harness's test command, ended by `timeout -k 5` after `timeout` seconds
    (exit code 124; the runtime itself gives up 30 s later); our pytest entry writes its
    result record at `record_path` when given."""
    test_cmd = harness.command(task)
    record = f"{RECORD_VARIABLE}={shlex.quote(record_path)} " if record_path else ""
    return session.run(
        f"{record}timeout -k 5 {int(timeout)} bash -c {shlex.quote(test_cmd)}",
        timeout + 30,
        logged_as=test_cmd,
    )


def score_tests(task: Task, harness: Harness, tests: ExecResult) -> tuple[str, Verdict | None]:
    """Step 5: ('timeout', None) when the run hit its limit, else 'resolved' or 'unresolved'
    with the harness's verdict on the output."""
    if tests.timed_out or tests.exit_code == 124:
        return "timeout", None
    verdict = harness.score(task, tests.output)
    return ("resolved" if verdict.resolved else "unresolved"), verdict


def grade_patch(
    task: Task,
    patch: str | None,
    *,
    client: Any = None,
    runtime_factory: RuntimeFactory | None = None,
    harness: Harness | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    run_label: str = "grading",
    skip_empty: bool = True,
    mem_limit: str = GRADING_MEM_LIMIT,
    max_patch_bytes: int = DEFAULT_MAX_PATCH_BYTES,
) -> GradeResult:
    """Grade `patch` on `task` in a fresh runtime from `task.image` (the module's steps).

    Args:
      task: the task; its image must exist where the grading runs (local Docker:
        `images.ensure_task_image`; a K8sPodFactory: pullable by the cluster).
      patch: unified diff against the base commit (None or "" = no change).
      client: docker client (default: from the environment).
      runtime_factory: grade in a runtime it makes instead of a local Docker container
        (e.g. `k8s_runtime.K8sPodFactory`, `EnvPool.runtime_factory`); not with `client`.
      harness: how the tests run and their log is scored (default: `harness_for(task)`).
      timeout: seconds for the test run; exceeding it gives status 'timeout'.
      run_label: value of the `deepswe.run` label on the grading container.
      skip_empty: when True an empty patch returns 'empty_patch' at once; when
        False the tests still run (used to check that a task is not solved by
        doing nothing) and the status is 'unresolved' or 'resolved'.
      mem_limit: memory limit of the Docker grading container (a runtime_factory's
        runtimes have the factory's limits).
      max_patch_bytes: a larger patch is graded 'patch_too_large' without running anything.

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
    if runtime_factory is None:
        # Imported here: GradeResult (a Trajectory's grade) must load where the docker package
        # is absent (the GPU machine's training and benchmarks).
        from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory

        runtime_factory = DockerRuntimeFactory(client=client, mem_limit=mem_limit)
    harness = harness or harness_for(task)
    started = time.monotonic()
    is_empty = patch is None or not patch.strip()

    def result(
        status: str,
        *,
        applied: bool,
        log: str = "",
        verdict: Verdict | None = None,
        error: str = "",
        suspected_forgery: bool = False,
    ) -> GradeResult:
        resolved = status == "resolved"
        return GradeResult(
            instance_id=task.instance_id,
            status=status,
            reward=1.0 if resolved else 0.0,
            patch_successfully_applied=applied,
            resolved=resolved,
            tests_status=verdict.tests_status if verdict else empty_tests_status(),
            test_log=log,
            duration_s=time.monotonic() - started,
            patch_exists=not is_empty,
            patch_is_none=patch is None,
            error=error,
            report=verdict.report if verdict else None,
            suspected_forgery=suspected_forgery,
        )

    def refusal(environment) -> GradeResult | None:
        refused = refused_paths(patch, environment) if environment is not None else []
        if not refused:
            return None
        error = (
            f"the patch adds {refused[:5]}: a module the environment already provides, a .pth "
            "file or package metadata, which would change what the tests import"
        )
        return result("patch_refused", applied=False, error=error)

    if is_empty and skip_empty:
        return result("empty_patch", applied=False)
    if not is_empty:
        patch = without_paths(patch, LAYOUTS[task.layout].harness_paths)
        size = len(patch.encode("utf-8", "surrogateescape"))
        if size > max_patch_bytes:
            error = f"the patch has {size} bytes, over env.max_patch_bytes={max_patch_bytes}"
            return result("patch_too_large", applied=False, error=error)
        if refused := refusal(environment_of(task, None)):
            return refused

    runtime = None
    session = None
    applied = False  # what report.json says when a later step fails
    try:
        runtime = runtime_factory(task.image, run_label=run_label)
        runtime.start()
        session = GradingSession(runtime)
        if not is_empty:
            if refused := refusal(environment_of(task, runtime)):
                return refused
            if not apply_patch(session, patch):
                return result("apply_failed", applied=False, log=session.log)
            applied = True
            if not restore_test_files(session, task):
                error = "restoring test files failed"
                return result("infra_error", applied=True, log=session.log, error=error)
        if not harness.applies_test_patch and not apply_test_patch(session, task):
            error = (
                f"test_patch of {task.instance_id} does not apply to its base commit; fix the task"
            )
            return result("infra_error", applied=True, log=session.log, error=error)
        record_path = new_record_path() if records_results(task, harness) else ""
        tests = run_tests(session, task, harness, timeout, record_path)
        status, verdict = score_tests(task, harness, tests)
        error = f"tests ran past {timeout:.0f} s" if status == "timeout" else ""
        suspected = False
        if status == "resolved" and record_path:
            if problem := record_problem(task, read_record(runtime, record_path)):
                log_suspected_forgery(task, problem)
                status, error, suspected = "unresolved", f"suspected forgery: {problem}", True
        return result(
            status,
            applied=True,
            log=session.log,
            verdict=verdict,
            error=error,
            suspected_forgery=suspected,
        )
    except PolicyLimitError as e:  # the patch's tests exhausted the container: a wrong answer
        log = session.log if session is not None else ""
        return result("unresolved", applied=True, log=log, error=str(e))
    except Exception as e:  # Docker or container failure: say so, never score it as a wrong answer.
        log = session.log if session is not None else ""
        return result("infra_error", applied=applied, log=log, error=f"{type(e).__name__}: {e}")
    finally:
        if runtime is not None:
            try:
                runtime.close()
            except Exception:  # the result is already decided; a stuck container is reaped by label
                pass
