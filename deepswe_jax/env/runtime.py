"""What an episode and the grader need of one task environment, whatever runs it.

    runtime = factory(task.image, run_label="train-1")    # a RuntimeFactory: unstarted runtime
    with runtime:                                         # start ... close
        runtime.call_tool("file_editor", {"command": "view", "path": "/testbed"}, timeout=90)
        runtime.run("pytest -q", timeout=300)
        patch = runtime.diff(task.base_commit)

`Runtime` and `RuntimeFactory` are the protocols; `docker_runtime.DockerRuntime` (a container
whose PID 1 is the tool server) and `k8s_runtime.K8sRuntime` (a pod, one exec per command)
implement them on `ExecRuntime`, which holds what they share: `run`, `call_tool` and `diff`
built on one primitive, `_execute(Command, timeout)`, plus the context manager, the idempotent
`close` and the exit cleanup (see `ownership`). `prepare_runtime` readies an agent's runtime for
its image's layout (`layouts`).
"""

from __future__ import annotations

import abc
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from deepswe_jax.env.layouts import DIFF_EXCLUDE_FILE, Layout, LayoutError, prepare_script
from deepswe_jax.env.ownership import LIVE_RUNTIMES, install_exit_cleanup
from deepswe_jax.env.tools import tool_argv

TESTBED = "/testbed"
# Output kept per command (head and tail halves); the agent sees far less after wrapping.
DEFAULT_MAX_OUTPUT = 2_000_000
# How long after a command's deadline the host waits for the runtime to kill it and answer.
SERVER_GRACE_S = 30.0
# Python bytecode caches are never part of the agent's patch.
DIFF_EXCLUDES = ("**/__pycache__/**", "**/*.pyc", "**/.pytest_cache/**")
PATCH_FILE = "/tmp/.deepswe_patch.diff"
PREPARE_TIMEOUT_S = 120.0
# The largest patch taken from an episode or graded (config.env.max_patch_bytes).
DEFAULT_MAX_PATCH_BYTES = 4 << 20
# Exit status of git_diff_script when the changed files or the patch pass the cap.
PATCH_TOO_LARGE_EXIT = 3


class MissingImageError(RuntimeError):
    """The task image is not present locally (Docker) or cannot be pulled (Kubernetes)."""


class EnvironmentUnavailableError(RuntimeError):
    """The container died or stopped answering; the episode cannot go on."""


class GitDiffError(RuntimeError):
    """`git diff` failed in the environment (e.g. the agent deleted /testbed/.git)."""


class PolicyLimitError(RuntimeError):
    """The policy ran into a limit of its own environment (a patch past the cap, the
    container's disk or memory exhausted): a wrong answer scored 0 and trained on, never an
    infrastructure error."""


class PatchTooLargeError(PolicyLimitError):
    """The changed files or the patch are larger than the patch cap (max_patch_bytes)."""


class ResourceLimitError(PolicyLimitError):
    """The environment's processes exhausted its disk (bytes or files) or memory limit."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command: exit status (None when it timed out or could not start),
    stdout and stderr merged (head and tail kept when longer than the limit), wall time."""

    exit_code: int | None
    output: str
    timed_out: bool
    duration_s: float


class Runtime(Protocol):
    """One task environment (a container, a pod): /testbed holds the repository at its base
    commit and the tools are installed. Methods block; they are safe to call from threads.
    Runtimes compare and hash by identity."""

    name: str

    def start(self) -> None:
        """Create the environment and wait until it answers. Raises MissingImageError when
        the task image is missing, EnvironmentUnavailableError when it does not come up."""
        ...

    def run(
        self,
        cmd: str,
        *,
        timeout: float,
        workdir: str = TESTBED,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """`bash -c cmd` in `workdir`, everything it started killed at `timeout` seconds."""
        ...

    def call_tool(self, name: str, args: Mapping[str, object], *, timeout: float) -> ExecResult:
        """Tool `name` (file_editor, execute_bash, search, finish/submit) with R2E-Gym args."""
        ...

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` at absolute `path` (parent folders are created)."""
        ...

    def read_file(self, path: str) -> bytes:
        """The bytes at absolute `path`; raises FileNotFoundError etc."""
        ...

    def diff(
        self,
        base_commit: str,
        *,
        repo: str = TESTBED,
        timeout: float = 120.0,
        max_bytes: int = DEFAULT_MAX_PATCH_BYTES,
    ) -> str:
        """Everything changed under `repo` since `base_commit`, as a git patch; raises
        GitDiffError when git fails, PatchTooLargeError past `max_bytes`."""
        ...

    def close(self) -> None:
        """Remove the environment (idempotent, safe from any thread or a signal handler)."""
        ...


class RuntimeFactory(Protocol):
    """Makes unstarted runtimes of one backend with shared settings, and removes the stale ones
    (what EnvPool and the grader take; e.g. `DockerRuntimeFactory`, `K8sPodFactory`)."""

    def __call__(self, image: str, *, run_label: str) -> Runtime: ...

    def remove_stale(self, run_labels: tuple[str, ...] = ()) -> list[str]:
        """Remove runtimes of dead creators on this host and of `run_labels`; their names."""
        ...


def git_diff_script(base_commit: str, max_bytes: int = DEFAULT_MAX_PATCH_BYTES) -> str:
    """Bash script, run in the repository, that writes to PATCH_FILE everything changed since
    `base_commit` (new files included via a throwaway index; .gitignore'd files, DIFF_EXCLUDES
    and the paths listed in layouts.DIFF_EXCLUDE_FILE left out; binary changes in git's
    binary format). Exits PATCH_TOO_LARGE_EXIT, before git reads them, when the changed
    files hold more than `max_bytes` (apparent sizes), and when the patch is larger."""
    excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in DIFF_EXCLUDES)
    git = "git -c safe.directory='*' -c core.quotepath=false"
    too_large = f"exit {PATCH_TOO_LARGE_EXIT}"
    return (
        "set -e\n"
        f"rm -rf {PATCH_FILE}\n"  # whatever the agent left there (a link to /dev/zero, a FIFO)
        'index="$(mktemp)"; spec="$(mktemp)"\n'
        'trap \'rm -f "$index" "$spec"\' EXIT\n'
        'cp .git/index "$index" 2>/dev/null || rm -f "$index"\n'
        f"printf '%s\\0' . {excludes} > \"$spec\"\n"
        f"if [ -f {DIFF_EXCLUDE_FILE} ]; then\n"
        "  while IFS= read -r -d '' p; do\n"
        '    if [ -n "$p" ]; then printf \':(exclude,literal)%s\\0\' "${p%/}"; fi\n'
        f'  done < {DIFF_EXCLUDE_FILE} >> "$spec"\n'
        "fi\n"
        'mapfile -d "" -t specs < "$spec"\n'
        "total=0\n"
        f"while IFS= read -r -d '' entry; do\n"
        '  p="${entry:3}"\n'
        '  if [ -f "$p" ] && [ ! -L "$p" ]; then total=$((total + $(stat -c %s -- "$p"))); fi\n'
        f'  if [ $total -gt {max_bytes} ]; then echo "changed files hold over {max_bytes} '
        f'bytes"; {too_large}; fi\n'
        f'done < <({git} status --porcelain=v1 -z --untracked-files=all --no-renames -- "${{specs[@]}}")\n'
        f'GIT_INDEX_FILE="$index" {git} add -A --pathspec-from-file="$spec" --pathspec-file-nul\n'
        f'GIT_INDEX_FILE="$index" {git} diff --cached --binary --no-color --no-ext-diff '
        f"--src-prefix=a/ --dst-prefix=b/ {shlex.quote(base_commit)} > {PATCH_FILE}\n"
        f'size=$(stat -c %s {PATCH_FILE}); if [ "$size" -gt {max_bytes} ]; then '
        f'echo "the patch has $size bytes, over {max_bytes}"; {too_large}; fi\n'
    )


@dataclass(frozen=True)
class Command:
    """One command for `ExecRuntime._execute`: `argv` run in `cwd`, or, when `tool` is set,
    the installed tool `tool` with arguments `argv`. Output keeps its first and last
    `max_output // 2` bytes."""

    argv: tuple[str, ...]
    cwd: str = TESTBED
    max_output: int = DEFAULT_MAX_OUTPUT
    tool: str | None = None


class ExecRuntime(abc.ABC):
    """A Runtime whose commands, tool calls and diffs go through one primitive, `_execute`.

    Subclasses implement `start`, `_execute`, `write_file`, `read_file` and `_remove` (delete
    the container or pod), and call `_register()` when starting, so the environment is
    removed at exit (see `ownership`)."""

    def __init__(self, image: str, *, run_label: str, name: str):
        self.image = image
        self.run_label = run_label
        self.name = name
        self.ready_s: float | None = None
        self._close_lock = threading.Lock()
        self._closed = False
        install_exit_cleanup()

    def __enter__(self) -> ExecRuntime:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def _execute(self, command: Command, timeout: float) -> ExecResult:
        """Run `command`; at `timeout` seconds kill everything it started (then exit_code None,
        timed_out True). Raises EnvironmentUnavailableError when the environment is gone."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str) -> None: ...

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def _remove(self) -> None:
        """Delete the container or pod (called once, by `close`)."""

    def _where(self) -> str:
        """The environment in error messages."""
        return self.name

    def _register(self) -> None:
        install_exit_cleanup()
        LIVE_RUNTIMES.add(self)

    def run(
        self,
        cmd: str,
        *,
        timeout: float,
        workdir: str = TESTBED,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run `cmd` with `bash -c` in `workdir`; everything it started is killed at `timeout`
        seconds (then exit_code is None and timed_out True). Output keeps its first and last
        `max_output // 2` bytes."""
        return self._execute(Command(("bash", "-c", cmd), workdir, max_output), timeout)

    def call_tool(self, name: str, args: Mapping[str, object], *, timeout: float) -> ExecResult:
        """Run tool `name` (file_editor, execute_bash, search, finish/submit) with R2E-Gym
        parameters, e.g. {"command": "view", "path": "/testbed"}; values are passed verbatim."""
        return self._execute(Command(tuple(tool_argv(name, args)), tool=name), timeout)

    def diff(
        self,
        base_commit: str,
        *,
        repo: str = TESTBED,
        timeout: float = 120.0,
        max_bytes: int = DEFAULT_MAX_PATCH_BYTES,
    ) -> str:
        """Everything changed under `repo` since `base_commit`, as a git patch.

        New files are included (staged into a throwaway index, so the repository's own
        index is untouched); .gitignore'd files and Python bytecode caches are not.
        Binary changes use git's binary patch format. Bytes that are not UTF-8 are kept
        as surrogate escapes (`write_file` writes them back unchanged).

        Raises:
          GitDiffError: git failed (no repository at `repo`, unknown base commit, ...).
          PatchTooLargeError: the changed files (apparent sizes) or the patch pass `max_bytes`.
        """
        script = git_diff_script(base_commit, max_bytes)
        result = self.run(script, timeout=timeout, workdir=repo or TESTBED)
        if result.exit_code == PATCH_TOO_LARGE_EXIT:
            raise PatchTooLargeError(f"{self._where()}: {result.output.strip()[-300:]}")
        if result.exit_code != 0:
            reason = "timed out" if result.timed_out else f"exit code {result.exit_code}"
            raise GitDiffError(
                f"git diff against {base_commit} in {self._where()}:{repo} failed ({reason}): "
                f"{result.output[-2000:]}"
            )
        return self.read_file(PATCH_FILE).decode("utf-8", "surrogateescape")

    def close(self) -> None:
        """Remove the environment (idempotent, safe from any thread or a signal handler).

        A request in flight in another thread fails with EnvironmentUnavailableError."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        LIVE_RUNTIMES.discard(self)
        self._remove()


def prepare_runtime(runtime: Runtime, layout: Layout) -> None:
    """Set up a started agent runtime for `layout` (`layouts.prepare_script`; a no-op for
    layouts without set-up).

    Raises:
      LayoutError: the set-up or the activation failed; the message has their output.
    """
    if not layout.needs_preparing:
        return
    result = runtime.run(prepare_script(layout), timeout=PREPARE_TIMEOUT_S)
    if result.exit_code != 0:
        reason = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        raise LayoutError(
            f"preparing the {layout.name} layout in {runtime.name} failed ({reason}); does the "
            f"image have that layout? (activation: {layout.activate or 'none'}) "
            f"output: {result.output[-2000:]}"
        )
