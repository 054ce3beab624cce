"""A Runtime and a RuntimeFactory in memory (env.runtime's protocols), for tests of the code
above the runtimes (grading steps, the env pool) without Docker or Kubernetes.

Each command's result comes from `respond(cmd) -> (exit code, output)` (exit code None: timed
out); commands, tool calls and written files are recorded. The grader's environment probe gets
a small standard library, and a test run asked for a result record (harness.RECORD_VARIABLE)
leaves one with the outcomes its output's -rA summary shows, as tools/pytest_record.py would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from deepswe_jax.env.grading.harness import RECORD_VARIABLE, parse_pytest_summary
from deepswe_jax.env.grading.verdict_guards import PROBE_MARK
from deepswe_jax.env.runtime import (
    DEFAULT_MAX_OUTPUT,
    TESTBED,
    EnvironmentUnavailableError,
    ExecResult,
)

PROBE_ANSWER = PROBE_MARK + '\n{"names": ["json", "os", "pprint", "pytest"], "roots": {"": []}}\n'

Respond = Callable[[str], tuple[int | None, str]]


def succeed(cmd: str) -> tuple[int | None, str]:
    return 0, ""


@dataclass(eq=False)  # hashable by identity, as the pool keys runtimes
class ScriptedRuntime:
    image: str
    run_label: str
    respond: Respond = succeed
    name: str = "scripted"
    patch: str = ""
    start_error: BaseException | None = None
    commands: list[str] = field(default_factory=list)
    tool_calls: list[tuple[str, dict]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    started: bool = False
    closes: int = 0

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        self.started = True

    def _check_running(self) -> None:
        if not self.started or self.closes:
            raise EnvironmentUnavailableError(f"{self.name} is not running")

    def run(
        self,
        cmd: str,
        *,
        timeout: float,
        workdir: str = TESTBED,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        self._check_running()
        self.commands.append(cmd)
        if PROBE_MARK in cmd:
            return ExecResult(0, PROBE_ANSWER, False, 0.0)
        exit_code, output = self.respond(cmd)
        if record := re.match(rf"{RECORD_VARIABLE}=(\S+) ", cmd):
            outcomes = parse_pytest_summary(output)
            self.files[record[1]] = json.dumps({"outcomes": outcomes, "replaced": []}).encode()
        return ExecResult(exit_code, output, exit_code is None, 0.0)

    def call_tool(self, name: str, args: Mapping[str, object], *, timeout: float) -> ExecResult:
        self._check_running()
        self.tool_calls.append((name, dict(args)))
        return ExecResult(0, f"{name} ran", False, 0.0)

    def write_file(self, path: str, data: bytes | str) -> None:
        self._check_running()
        self.files[path] = data.encode() if isinstance(data, str) else data

    def read_file(self, path: str) -> bytes:
        self._check_running()
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def diff(
        self, base_commit: str, *, repo: str = TESTBED, timeout: float = 120.0, max_bytes: int = 0
    ) -> str:
        self._check_running()
        return self.patch

    def close(self) -> None:
        self.closes += 1


@dataclass
class ScriptedFactory:
    """Makes ScriptedRuntimes; `start_errors` are raised by the first starts, one each."""

    respond: Respond = succeed
    patch: str = ""
    start_errors: list[BaseException] = field(default_factory=list)
    made: list[ScriptedRuntime] = field(default_factory=list)
    stale_removals: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, image: str, *, run_label: str) -> ScriptedRuntime:
        runtime = ScriptedRuntime(
            image,
            run_label,
            self.respond,
            name=f"scripted-{len(self.made)}",
            patch=self.patch,
            start_error=self.start_errors.pop(0) if self.start_errors else None,
        )
        self.made.append(runtime)
        return runtime

    def remove_stale(self, run_labels: tuple[str, ...] = ()) -> list[str]:
        self.stale_removals.append(run_labels)
        return []
