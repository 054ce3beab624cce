"""One task container: start it, run commands and tools in it, take the agent's patch, remove it.

The container's PID 1 is a small stdlib tool server (`tools/tool_server.py`); the
host attaches to its stdin/stdout once and exchanges one JSON line per request,
so a tool call costs a fork inside the container instead of a `docker exec`
(a process start in the container runtime plus three API round trips). Timeouts
are enforced inside the container: at the deadline the server SIGKILLs every
process of the command's session, then answers. If the server itself stops
answering, the host gives up `SERVER_GRACE_S` after the deadline and reports
the environment as unavailable.

Containers have no network, memory/CPU/pids limits, and labels:
  deepswe.run=<run_label>                 which run created it
  deepswe.owner=<host>:<pid>:<start time> which process created it (see `owner_is_alive`)
Containers still alive at interpreter exit or on SIGTERM are removed.
"""

from __future__ import annotations

import atexit
import base64
import itertools
import json
import logging
import os
import re
import shlex
import signal
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import docker
import docker.errors
import requests.exceptions

from deepswe_jax.env.hosts import default_client
from deepswe_jax.env.tools import SERVER_PATH, install_archive, tool_argv

logger = logging.getLogger(__name__)

RUN_LABEL = "deepswe.run"
OWNER_LABEL = "deepswe.owner"
PID_LABEL = "deepswe.pid"
TESTBED = "/testbed"
# Output kept per command (head and tail halves); the agent sees far less after wrapping.
DEFAULT_MAX_OUTPUT = 2_000_000
# How long after a command's deadline the host waits for the server to kill it and answer.
SERVER_GRACE_S = 30.0
READY_TIMEOUT_S = 60.0
# Python bytecode caches are never part of the agent's patch.
DIFF_EXCLUDES = ("**/__pycache__/**", "**/*.pyc", "**/.pytest_cache/**")
PATCH_FILE = "/tmp/.deepswe_patch.diff"

T = TypeVar("T")


class MissingImageError(RuntimeError):
    """The task image is not present locally."""


class EnvironmentUnavailableError(RuntimeError):
    """The container died or its tool server stopped answering; the episode cannot go on."""


class GitDiffError(RuntimeError):
    """`git diff` failed in the container (e.g. the agent deleted /testbed/.git)."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command: exit status (None when it timed out or could not start),
    stdout and stderr merged (head and tail kept when longer than the limit), wall time."""

    exit_code: int | None
    output: str
    timed_out: bool
    duration_s: float


def git_diff_script(base_commit: str) -> str:
    """Bash script, run in the repository, that writes to PATCH_FILE everything changed since
    `base_commit` (new files included via a throwaway index; .gitignore'd files and
    DIFF_EXCLUDES left out; binary changes in git's binary format). Shared by every runtime."""
    excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in DIFF_EXCLUDES)
    git = "git -c safe.directory='*' -c core.quotepath=false"
    return (
        "set -e\n"
        'index="$(mktemp)"\n'
        "trap 'rm -f \"$index\"' EXIT\n"
        'cp .git/index "$index" 2>/dev/null || rm -f "$index"\n'
        f'GIT_INDEX_FILE="$index" {git} add -A -- . {excludes}\n'
        f'GIT_INDEX_FILE="$index" {git} diff --cached --binary --no-color --no-ext-diff '
        f"--src-prefix=a/ --dst-prefix=b/ {shlex.quote(base_commit)} > {PATCH_FILE}\n"
    )


# ---------------------------------------------------------------- ownership and cleanup


def _process_start_time(pid: int) -> str | None:
    """Start time of `pid` in clock ticks since boot (Linux), "" where /proc is absent, None if dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[19].decode()


def owner_label(pid: int | None = None) -> str:
    """`<hostname>:<pid>:<start time>` of this (or the given) process; pid reuse cannot fake it."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start_time(pid) or ''}"


def owner_is_alive(label: str) -> bool | None:
    """Whether the process named by an owner label is alive; None if it ran on another host."""
    host, _, rest = label.partition(":")
    pid_text, _, start_time = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    current = _process_start_time(int(pid_text))
    return current is not None and (not start_time or not current or current == start_time)


def retry_transient(
    call: Callable[[], T], what: str, *, attempts: int = 5, first_delay_s: float = 0.5
) -> T:
    """Call `call`, retrying with exponential backoff on Docker 5xx and connection errors."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (docker.errors.APIError, requests.exceptions.ConnectionError) as e:
            transient = not isinstance(e, docker.errors.APIError) or e.is_server_error()
            if isinstance(e, docker.errors.NotFound) or not transient or attempt == attempts:
                raise
            logger.warning(
                "%s failed (%s); retry %d/%d in %.1fs", what, e, attempt, attempts, delay
            )
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def remove_stale_containers(
    client: docker.DockerClient | None = None, *, run_labels: tuple[str, ...] = ()
) -> list[str]:
    """Remove containers whose creating process (on this host) is dead, and every container of
    the given run labels. Returns the names removed."""
    client = client or default_client()
    removed = []
    # The low-level listing: no per-container inspect that races with concurrent removals.
    for summary in client.api.containers(all=True, filters={"label": RUN_LABEL}):
        labels = summary.get("Labels") or {}
        owner = labels.get(OWNER_LABEL)
        stale = labels.get(RUN_LABEL) in run_labels or (
            owner is not None and owner_is_alive(owner) is False
        )
        if not stale:
            continue
        name = (summary.get("Names") or [summary["Id"]])[0].lstrip("/")
        try:
            retry_transient(
                lambda i=summary["Id"]: client.api.remove_container(i, force=True, v=True),
                f"removing {name}",
            )
            removed.append(name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: removal already in progress
                raise
    if removed:
        logger.info("removed %d stale deepswe containers", len(removed))
    return removed


# Runtimes (Docker or Kubernetes) that close_all_runtimes removes at exit and on SIGTERM.
LIVE_RUNTIMES: weakref.WeakSet[Any] = weakref.WeakSet()
_CLEANUP_LOCK = threading.Lock()
_atexit_installed = False
_sigterm_installed = False


def close_all_runtimes() -> None:
    """Remove every container this process still holds (in parallel)."""
    runtimes = list(LIVE_RUNTIMES)
    if runtimes:
        with ThreadPoolExecutor(max_workers=min(16, len(runtimes))) as workers:
            list(workers.map(lambda r: r.close(), runtimes))


def install_exit_cleanup() -> None:
    """Remove live containers at interpreter exit and on SIGTERM (then terminate as before).

    The SIGTERM handler can only be set from the main thread; DockerRuntime and EnvPool
    call this when constructed, which is normally there."""
    global _atexit_installed, _sigterm_installed
    with _CLEANUP_LOCK:
        if not _atexit_installed:
            _atexit_installed = True
            atexit.register(close_all_runtimes)
        if _sigterm_installed or threading.current_thread() is not threading.main_thread():
            return
        _sigterm_installed = True
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        close_all_runtimes()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


# ---------------------------------------------------------------- channel to the tool server


class _ServerChannel:
    """The attached stdin/stdout of the tool server: JSON lines in Docker's multiplexed framing."""

    def __init__(self, api: docker.APIClient, container_id: str):
        response_socket = api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        self._response_socket = response_socket
        self._sock: socket.socket = getattr(response_socket, "_sock", response_socket)
        self._raw = bytearray()
        self._stdout = bytearray()
        self.stderr_tail = bytearray()

    def send(self, message: Mapping[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n"
        self._sock.settimeout(SERVER_GRACE_S)
        self._sock.sendall(data)

    def receive(self, deadline: float) -> dict[str, Any]:
        """Next JSON line from the server; raises TimeoutError at `deadline`, EOFError if closed."""
        while True:
            newline = self._stdout.find(b"\n")
            if newline >= 0:
                line = bytes(self._stdout[:newline])
                del self._stdout[: newline + 1]
                return json.loads(line)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(1 << 20)
            except TimeoutError:
                raise
            except OSError as e:
                raise EOFError(str(e)) from e
            if not data:
                raise EOFError("the tool server closed its output")
            self._raw += data
            self._demultiplex()

    def _demultiplex(self) -> None:
        # Each frame: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4 bytes big-endian size.
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                return
            payload = self._raw[8 : 8 + size]
            if self._raw[0] == 2:
                self.stderr_tail = (self.stderr_tail + payload)[-4000:]
            else:
                self._stdout += payload
            del self._raw[: 8 + size]

    def close(self) -> None:
        for closeable in (self._sock, self._response_socket):
            try:
                closeable.close()
            except OSError:
                pass


# ---------------------------------------------------------------- the runtime


def _container_name(run_label: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_label)[:40] or "run"
    return f"deepswe-{safe}-{uuid.uuid4().hex[:8]}"


class DockerRuntime:
    """A container from `image` with the tools installed and a tool server as PID 1.

    Usage:
        with DockerRuntime("deepswe/datewise:base", run_label="eval-1") as rt:
            rt.run("pytest -q", timeout=300)
            rt.call_tool("file_editor", {"command": "view", "path": "/testbed"}, timeout=90)
            patch = rt.diff(base_commit)

    Methods are thread-safe (requests to one container are serialized).
    """

    def __init__(
        self,
        image: str,
        *,
        run_label: str,
        client: docker.DockerClient | None = None,
        mem_limit: str = "1g",
        nano_cpus: int = 1_000_000_000,
        pids_limit: int = 256,
        name: str | None = None,
    ):
        self.image = image
        self.run_label = run_label
        self.name = name or _container_name(run_label)
        self.mem_limit = mem_limit
        self.nano_cpus = nano_cpus
        self.pids_limit = pids_limit
        self._client = client
        self._container = None
        self._channel: _ServerChannel | None = None
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._request_ids = itertools.count(1)
        self._closed = False
        self.ready_s: float | None = None
        install_exit_cleanup()

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = default_client()
        return self._client

    @property
    def container_id(self) -> str:
        if self._container is None:
            raise EnvironmentUnavailableError(
                f"container {self.name} was not started; call start()"
            )
        return self._container.id

    def __enter__(self) -> DockerRuntime:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Create and start the container, install the tools and wait until the server answers.

        Raises:
          MissingImageError: the image is not present locally.
          EnvironmentUnavailableError: the tool server did not come up.
        """
        if self._container is not None:
            return
        started = time.monotonic()
        try:
            retry_transient(lambda: self.client.images.get(self.image), f"looking up {self.image}")
        except docker.errors.ImageNotFound:
            raise MissingImageError(
                f"image {self.image} not found; run `python launch/build_images.py --tasks=...` "
                "(or deepswe_jax.env.images.ensure_task_image(task)) to build it"
            ) from None
        install_exit_cleanup()
        LIVE_RUNTIMES.add(self)
        self._container = retry_transient(self._create, f"creating {self.name}")
        try:
            retry_transient(
                lambda: self._container.put_archive("/", install_archive()),
                f"installing tools in {self.name}",
            )
            self._channel = _ServerChannel(self.client.api, self._container.id)
            retry_transient(self._container.start, f"starting {self.name}")
            self._request({"op": "ping"}, deadline_s=READY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        self.ready_s = time.monotonic() - started

    def _create(self) -> Any:
        try:
            return self.client.containers.create(
                self.image,
                entrypoint=["python3", "-u", SERVER_PATH],
                name=self.name,
                stdin_open=True,
                tty=False,
                network_mode="none",
                mem_limit=self.mem_limit,
                memswap_limit=self.mem_limit,
                nano_cpus=self.nano_cpus,
                pids_limit=self.pids_limit,
                log_config={"type": "none"},
                working_dir=TESTBED,
                labels={
                    RUN_LABEL: self.run_label,
                    OWNER_LABEL: owner_label(),
                    PID_LABEL: str(os.getpid()),
                },
            )
        except docker.errors.APIError as e:
            if (
                e.status_code == 409
            ):  # the name is taken: a create that timed out may have succeeded
                self.name = _container_name(self.run_label)
            raise

    def _request(self, message: dict[str, Any], *, deadline_s: float) -> dict[str, Any]:
        with self._lock:
            if self._closed or self._container is None:
                raise EnvironmentUnavailableError(f"container {self.name} is not running")
            if self._channel is None:
                self._channel = self._reattach()
            request_id = next(self._request_ids)
            deadline = time.monotonic() + deadline_s
            try:
                self._channel.send({**message, "id": request_id})
                while True:
                    response = self._channel.receive(deadline)
                    if response.get("id") == request_id:
                        return response
            except TimeoutError:
                self._drop_channel()
                raise EnvironmentUnavailableError(
                    f"the tool server of {self.name} did not answer within {deadline_s:.0f}s"
                ) from None
            except (EOFError, OSError, ValueError) as e:
                stderr = self._channel.stderr_tail.decode(errors="replace") if self._channel else ""
                self._drop_channel()
                raise EnvironmentUnavailableError(
                    f"lost the tool server of {self.name} ({e}); {self._describe_state()}"
                    + (f"; server stderr: {stderr}" if stderr else "")
                ) from None

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _reattach(self) -> _ServerChannel:
        """A new channel after a broken one, if the container still runs."""
        state = self._describe_state()
        if "running" not in state:
            raise EnvironmentUnavailableError(f"container {self.name} is not running: {state}")
        return _ServerChannel(self.client.api, self._container.id)

    def _describe_state(self) -> str:
        try:
            self._container.reload()
        except docker.errors.NotFound:
            return "the container no longer exists"
        except (docker.errors.APIError, requests.exceptions.RequestException) as e:
            return f"container state unknown ({e})"
        state = self._container.attrs.get("State", {})
        if state.get("Running"):
            return "container running"
        return (
            f"container {state.get('Status')} (exit code {state.get('ExitCode')}, "
            f"OOM killed: {state.get('OOMKilled')})"
        )

    def _execute(self, message: dict[str, Any], timeout: float) -> ExecResult:
        started = time.monotonic()
        response = self._request(
            {**message, "timeout": timeout}, deadline_s=timeout + SERVER_GRACE_S
        )
        if "error" in response:
            raise EnvironmentUnavailableError(
                f"tool server of {self.name} failed: {response['error']}: {response.get('message')}"
            )
        return ExecResult(
            exit_code=response["exit_code"],
            output=response["output"],
            timed_out=response["timed_out"],
            duration_s=time.monotonic() - started,
        )

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
        return self._execute(
            {"op": "run", "argv": ["bash", "-c", cmd], "cwd": workdir, "max_output": max_output},
            timeout,
        )

    def call_tool(self, name: str, args: Mapping[str, object], *, timeout: float) -> ExecResult:
        """Run tool `name` (file_editor, execute_bash, search, finish/submit) with R2E-Gym
        parameters, e.g. {"command": "view", "path": "/testbed"}; values are passed verbatim."""
        return self._execute(
            {
                "op": "tool",
                "name": name,
                "args": tool_argv(name, args),
                "cwd": TESTBED,
                "max_output": DEFAULT_MAX_OUTPUT,
            },
            timeout,
        )

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` to absolute `path` in the container (parent folders are created)."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        response = self._request(
            {"op": "write", "path": path, "data": base64.b64encode(data).decode("ascii")},
            deadline_s=SERVER_GRACE_S + len(data) / 1e6,
        )
        _raise_file_error(response, path)

    def read_file(self, path: str) -> bytes:
        """The bytes of absolute `path` in the container; raises FileNotFoundError etc."""
        response = self._request({"op": "read", "path": path}, deadline_s=SERVER_GRACE_S * 2)
        _raise_file_error(response, path)
        return base64.b64decode(response["data"])

    def diff(self, base_commit: str, *, repo: str = TESTBED, timeout: float = 120.0) -> str:
        """Everything changed under `repo` since `base_commit`, as a git patch.

        New files are included (staged into a throwaway index, so the repository's own
        index is untouched); .gitignore'd files and Python bytecode caches are not.
        Binary changes use git's binary patch format. Bytes that are not UTF-8 are kept
        as surrogate escapes (`write_file` writes them back unchanged).

        Raises:
          GitDiffError: git failed (no repository at `repo`, unknown base commit, ...).
        """
        result = self.run(
            git_diff_script(base_commit), timeout=timeout, workdir=repo if repo else TESTBED
        )
        if result.exit_code != 0:
            reason = "timed out" if result.timed_out else f"exit code {result.exit_code}"
            raise GitDiffError(
                f"git diff against {base_commit} in {self.name}:{repo} failed ({reason}): "
                f"{result.output[-2000:]}"
            )
        return self.read_file(PATCH_FILE).decode("utf-8", "surrogateescape")

    def close(self) -> None:
        """Remove the container (idempotent, safe from any thread or a signal handler).

        A request in flight in another thread fails with EnvironmentUnavailableError."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        LIVE_RUNTIMES.discard(self)
        if self._container is not None:
            try:
                retry_transient(
                    lambda: self._container.remove(force=True, v=True), f"removing {self.name}"
                )
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if e.status_code != 409:  # 409: removal already in progress
                    logger.warning("could not remove container %s: %s", self.name, e)
        if self._lock.acquire(blocking=False):
            try:
                self._drop_channel()
            finally:
                self._lock.release()


def _raise_file_error(response: Mapping[str, Any], path: str) -> None:
    if "error" not in response:
        return
    if response.get("errno") is not None:
        raise OSError(response["errno"], f"{response['message']} (in the container)", path)
    raise EnvironmentUnavailableError(f"file operation on {path} failed: {response['message']}")
