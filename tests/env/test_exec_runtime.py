"""ExecRuntime, what DockerRuntime and K8sRuntime share: run / call_tool / diff as Commands for
one `_execute` primitive, and the idempotent close with exit-cleanup registration. The real
runtimes run these against Docker (test_runtime.py) and pods (test_k8s_runtime.py)."""

from __future__ import annotations

import pytest

from deepswe_jax.env.ownership import LIVE_RUNTIMES
from deepswe_jax.env.runtime import (
    DEFAULT_MAX_OUTPUT,
    PATCH_FILE,
    TESTBED,
    Command,
    ExecResult,
    ExecRuntime,
    GitDiffError,
    git_diff_script,
)


class RecordingRuntime(ExecRuntime):
    """Answers each command with the next of `results`; files live in a dict."""

    def __init__(self, *results: ExecResult):
        super().__init__("img", run_label="r", name="rec-1")
        self.results = list(results)
        self.commands: list[tuple[Command, float]] = []
        self.files: dict[str, bytes] = {}
        self.removed = 0

    def start(self) -> None:
        self._register()

    def _execute(self, command: Command, timeout: float) -> ExecResult:
        self.commands.append((command, timeout))
        return self.results.pop(0)

    def write_file(self, path: str, data: bytes | str) -> None:
        self.files[path] = data.encode() if isinstance(data, str) else data

    def read_file(self, path: str) -> bytes:
        return self.files[path]

    def _remove(self) -> None:
        self.removed += 1


OK = ExecResult(0, "", False, 0.1)


def test_run_and_call_tool_are_commands_for_the_exec_primitive():
    runtime = RecordingRuntime(OK, OK)
    runtime.run("echo hi", timeout=5, workdir="/tmp", max_output=10)
    runtime.call_tool("file_editor", {"command": "view", "path": "/testbed/a.py"}, timeout=9)
    assert runtime.commands == [
        (Command(("bash", "-c", "echo hi"), "/tmp", 10), 5),
        (
            Command(("view", "--path=/testbed/a.py"), TESTBED, DEFAULT_MAX_OUTPUT, "file_editor"),
            9,
        ),
    ]


def test_diff_runs_the_diff_script_in_the_repository_and_reads_the_patch_back():
    runtime = RecordingRuntime(OK)
    runtime.files[PATCH_FILE] = "+caf\udce9\n".encode("utf-8", "surrogateescape")
    assert runtime.diff("abc123", repo="/work/repo") == "+caf\udce9\n"  # bytes kept
    [(command, timeout)] = runtime.commands
    assert command == Command(("bash", "-c", git_diff_script("abc123")), "/work/repo")
    assert timeout == 120.0


@pytest.mark.parametrize(
    "result, reason",
    [
        (ExecResult(128, "fatal: bad revision", False, 0.1), "exit code 128"),
        (
            ExecResult(None, "", True, 120.0),
            "timed out",
        ),
    ],
)
def test_a_failing_diff_says_where_and_why(result, reason):
    runtime = RecordingRuntime(result)
    with pytest.raises(
        GitDiffError, match=f"git diff against abc in rec-1:/testbed failed \\({reason}\\)"
    ):
        runtime.diff("abc")


def test_close_removes_once_and_leaves_the_exit_cleanup():
    with RecordingRuntime() as runtime:
        assert runtime in LIVE_RUNTIMES
    assert runtime.removed == 1 and runtime not in LIVE_RUNTIMES
    runtime.close()
    assert runtime.removed == 1
