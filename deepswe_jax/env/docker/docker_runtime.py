"""One task container (a `runtime.Runtime`): start it, run commands and tools in it, take the
agent's patch, remove it; `DockerRuntimeFactory` makes them for EnvPool and the grader.

The container's PID 1 is a small stdlib tool server (`tools/tool_server.py`); the host
attaches to its stdin/stdout once and exchanges one JSON frame per request (`docker_channel`),
so a tool call costs a fork inside the container instead of a `docker exec` (a process start
in the container runtime plus three API round trips). Timeouts are enforced inside the
container: at the deadline the server SIGKILLs every process of the command's session (and
after every command, whatever else it left running), then answers. If the server itself
stops answering, the host gives up `SERVER_GRACE_S` after the deadline and reports the
environment as unavailable.

Containers have no network, memory/CPU/pids limits, a disk limit (`disk_limit`: Docker's
`--storage-opt size=` where the storage driver supports it, else enforced by the tool server:
see `DISK_LIMIT_MODES`; either way the host also measures the writable layer after every
command and while one runs, `disk_limits`, and kills the container past the limit), and the
run and owner labels of `ownership` (plus deepswe.pid);
containers still alive at interpreter exit or on SIGTERM are removed (`docker_api` removes the
stale ones of dead creators).
"""

from __future__ import annotations

import base64
import itertools
import logging
import os
import re
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions

from deepswe_jax.env.docker import disk_limits
from deepswe_jax.env.docker.disk_limits import DISK_LIMIT_MODES
from deepswe_jax.env.docker.docker_api import remove_stale_containers, retry_transient
from deepswe_jax.env.docker.docker_channel import ServerChannel
from deepswe_jax.env.docker.hosts import default_client
from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL, owner_label
from deepswe_jax.env.runtime import (
    SERVER_GRACE_S,
    TESTBED,
    Command,
    EnvironmentUnavailableError,
    ExecResult,
    ExecRuntime,
    MissingImageError,
    ResourceLimitError,
)
from deepswe_jax.env.tools import install_archive, server_command

logger = logging.getLogger(__name__)

PID_LABEL = "deepswe.pid"
READY_TIMEOUT_S = 60.0
# The largest file read_file takes from a container (one frame holds it).
MAX_READ_BYTES = 64 << 20


def _container_name(run_label: str) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_label)[:40] or "run"
    return f"deepswe-{safe}-{uuid.uuid4().hex[:8]}"


class DockerRuntime(ExecRuntime):
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
        disk_limit: str = "",
        disk_limit_mode: str = "auto",
        name: str | None = None,
    ):
        """disk_limit: bytes the container may write ('10g', '64m'; '' for no limit), applied
        as `disk_limit_mode` says (DISK_LIMIT_MODES)."""
        super().__init__(image, run_label=run_label, name=name or _container_name(run_label))
        if disk_limit_mode not in DISK_LIMIT_MODES:
            raise ValueError(
                f"disk_limit_mode={disk_limit_mode!r} is not one of {DISK_LIMIT_MODES} "
                "(config.env.disk_limit_mode)"
            )
        self.mem_limit = mem_limit
        self.nano_cpus = nano_cpus
        self.pids_limit = pids_limit
        self.disk_limit = disk_limit
        self.disk_limit_mode = disk_limit_mode
        # How the disk limit was applied: "storage_opt", "tool_server" or "" (none).
        self.disk_limit_applied = ""
        self._disk_limit_bytes = docker.utils.parse_bytes(disk_limit) if disk_limit else 0
        # Why the container was stopped for exhausting its disk or memory ("" while it was not).
        self._limit_error = ""
        self._client = client
        self._container = None
        self._channel: ServerChannel | None = None
        self._secret = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._request_ids = itertools.count(1)

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
                "(or deepswe_jax.env.docker.images.ensure_task_image(task)) to build it"
            ) from None
        self._register()
        self._container = retry_transient(self._create, f"creating {self.name}")
        if self._closed:  # closed (Ctrl-C, pool shutdown) while the engine was creating it
            self._remove()
            raise EnvironmentUnavailableError(f"{self.name} was closed while it started")
        try:
            retry_transient(
                lambda: self._container.put_archive("/", install_archive()),
                f"installing tools in {self.name}",
            )
            self._channel = ServerChannel(self.client.api, self._container.id, self._secret)
            retry_transient(self._container.start, f"starting {self.name}")
            self._channel.send_secret()
            self._container.reload()  # GraphDriver's paths, for disk_limits
            self._request({"op": "ping"}, deadline_s=READY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        self.ready_s = time.monotonic() - started

    def _create(self) -> Any:
        """Creates the container with the disk limit of `disk_limit_mode`."""
        container, self.disk_limit_applied = disk_limits.create_with_disk_limit(
            self._create_with, self.client.api.base_url, self.disk_limit, self.disk_limit_mode
        )
        return container

    def _create_with(self, storage_opt: dict[str, str] | None, server_args: list[str]) -> Any:
        try:
            return self.client.containers.create(
                self.image,
                entrypoint=server_command(server_args),
                storage_opt=storage_opt,
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
            if self._limit_error:
                raise ResourceLimitError(self._limit_error)
            if self._closed or self._container is None:
                raise EnvironmentUnavailableError(f"container {self.name} is not running")
            if self._channel is None:
                self._channel = self._reattach()
            request_id = next(self._request_ids)
            deadline = time.monotonic() + deadline_s
            try:
                self._channel.send({**message, "id": request_id})
                while True:
                    response = self._receive_watching_disk(deadline)
                    if response.get("id") == request_id:
                        self._check_disk()
                        return response
            except TimeoutError:
                self._drop_channel()
                raise EnvironmentUnavailableError(
                    f"the tool server of {self.name} did not answer within {deadline_s:.0f}s"
                ) from None
            except (EOFError, OSError, ValueError) as e:
                stderr = self._channel.stderr_tail.decode(errors="replace") if self._channel else ""
                self._drop_channel()
                if self._oom_killed():
                    self._limit_error = (
                        f"the processes of {self.name} exhausted its memory limit "
                        f"({self.mem_limit}) and it stopped"
                    )
                    raise ResourceLimitError(self._limit_error) from None
                raise EnvironmentUnavailableError(
                    f"lost the tool server of {self.name} ({e}); {self._describe_state()}"
                    + (f"; server stderr: {stderr}" if stderr else "")
                ) from None

    def _receive_watching_disk(self, deadline: float) -> dict[str, Any]:
        """The next frame; with a disk limit, the writable layer is measured every
        disk_limits.POLL_S meanwhile (ResourceLimitError once past it)."""
        if not self._disk_limit_bytes:
            return self._channel.receive(deadline)
        while True:
            poll_at = time.monotonic() + disk_limits.POLL_S
            try:
                return self._channel.receive(min(deadline, poll_at))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
            self._check_disk()

    def _check_disk(self) -> None:
        """Kill the container when its writable layer holds more than the disk limit."""
        if not self._disk_limit_bytes:
            return
        self._limit_error = disk_limits.over_limit(
            self._container, self.client.api, self._disk_limit_bytes, self.disk_limit
        )
        if not self._limit_error:
            return
        self._drop_channel()
        try:
            self._container.kill()
        except docker.errors.APIError:
            pass  # already stopped; close() removes it
        raise ResourceLimitError(self._limit_error)

    def _oom_killed(self) -> bool:
        """Whether the container stopped because its memory limit was reached."""
        try:
            self._container.reload()
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return False
        state = self._container.attrs.get("State", {})
        return bool(state.get("OOMKilled")) and not state.get("Running")

    def _drop_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _reattach(self) -> ServerChannel:
        """A new channel after a broken one, if the container still runs."""
        state = self._describe_state()
        if "running" not in state:
            raise EnvironmentUnavailableError(f"container {self.name} is not running: {state}")
        return ServerChannel(self.client.api, self._container.id, self._secret)

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

    def _execute(self, command: Command, timeout: float) -> ExecResult:
        started = time.monotonic()
        if command.tool is None:
            message = {"op": "run", "argv": list(command.argv)}
        else:
            message = {"op": "tool", "name": command.tool, "args": list(command.argv)}
        message.update(cwd=command.cwd, max_output=command.max_output, timeout=timeout)
        response = self._request(message, deadline_s=timeout + SERVER_GRACE_S)
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

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` to absolute `path` in the container (parent folders are created)."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        response = self._request(
            {"op": "write", "path": path, "data": base64.b64encode(data).decode("ascii")},
            deadline_s=SERVER_GRACE_S + len(data) / 1e6,
        )
        _raise_file_error(response, path)

    def read_file(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> bytes:
        """The bytes of the regular file at absolute `path` in the container (a link, FIFO or
        device is refused); raises FileNotFoundError etc., OSError(EFBIG) past `max_bytes`."""
        request = {"op": "read", "path": path, "max_bytes": max_bytes}
        response = self._request(request, deadline_s=SERVER_GRACE_S * 2)
        _raise_file_error(response, path)
        return base64.b64decode(response["data"])

    def _remove(self) -> None:
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


@dataclass(frozen=True)
class DockerRuntimeFactory:
    """Makes DockerRuntimes on one engine with shared limits (a `runtime.RuntimeFactory`):
    `client` None is the local engine (`hosts.default_client`)."""

    client: docker.DockerClient | None = None
    mem_limit: str = "1g"
    nano_cpus: int = 1_000_000_000
    pids_limit: int = 256
    disk_limit: str = ""
    disk_limit_mode: str = "auto"

    def __call__(self, image: str, *, run_label: str) -> DockerRuntime:
        return DockerRuntime(
            image,
            run_label=run_label,
            client=self.client,
            mem_limit=self.mem_limit,
            nano_cpus=self.nano_cpus,
            pids_limit=self.pids_limit,
            disk_limit=self.disk_limit,
            disk_limit_mode=self.disk_limit_mode,
        )

    def remove_stale(self, run_labels: tuple[str, ...] = ()) -> list[str]:
        """Remove containers of dead creators and of `run_labels` (remove_stale_containers)."""
        return remove_stale_containers(self.client, run_labels=run_labels)


def _raise_file_error(response: Mapping[str, Any], path: str) -> None:
    if "error" not in response:
        return
    if response.get("errno") is not None:
        raise OSError(response["errno"], f"{response['message']} (in the container)", path)
    raise EnvironmentUnavailableError(f"file operation on {path} failed: {response['message']}")
