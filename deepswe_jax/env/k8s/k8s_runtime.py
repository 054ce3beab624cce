"""One task environment as a Kubernetes pod (a `runtime.Runtime`, like DockerRuntime).

    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config())
    with K8sRuntime("registry.example/deepswe/datewise:base", run_label="eval-1", api=api) as rt:
        rt.call_tool("file_editor", {"command": "view", "path": "/testbed"}, timeout=90)
        patch = rt.diff(base_commit)

    factory = K8sPodFactory(settings=K8sPodSettings(image_prefix="registry.example/"))
    async with EnvPool(max_envs=512, runtime_factory=factory, build_images=False) as pool:
        ...

The pod and its settings are `k8s_pods`; this module starts it (create, watch until it
runs, install the tools), runs commands in it and deletes it. Every command and file transfer
is one exec over the API server's websocket (`k8s_exec`: the command lines, tar archives and
how a session's output and exit status are read).

API calls are retried (`k8s_pods.retry_api`); a 409 on creating a pod that is already
ours (a create whose answer was lost) adopts that pod, any other 409 retries under a new
name. Pods still held at interpreter exit or on SIGTERM are deleted (`ownership`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3.exceptions
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from websocket import WebSocketException

from deepswe_jax.env.k8s.k8s_exec import (
    READ_IS_DIRECTORY,
    READ_MISSING,
    READ_SCRIPT,
    ExecStatusError,
    exchange,
    exec_argv,
    exec_exit_code,
    file_archive,
    file_from_archive,
    open_exec,
    untar_argv,
)
from deepswe_jax.env.k8s.k8s_pods import (
    API_TIMEOUT_S,
    DEFAULT_POD_SETTINGS,
    K8sPodSettings,
    check_label_value,
    default_core_api,
    delete_pod,
    describe_pod,
    is_transient,
    owner_pod_reference,
    pod_manifest,
    pod_name,
    remove_stale_pods,
    retry_api,
    short_error,
)
from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL, owner_label
from deepswe_jax.env.runtime import (
    SERVER_GRACE_S,
    Command,
    EnvironmentUnavailableError,
    ExecResult,
    ExecRuntime,
    MissingImageError,
)
from deepswe_jax.env.tools import INSTALL_DIR, install_archive, python_command

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Waiting reasons after which the pod will not start by itself.
IMAGE_PULL_FAILURES = frozenset({"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"})
CONFIG_FAILURES = frozenset({"CreateContainerConfigError", "CreateContainerError"})
ACCESS_HINTS = {
    401: "check the credentials in KUBECONFIG (or the pod's service account)",
    403: "grant the service account the Role from `python launch/k8s_manifests.py` "
    "(pods: create/get/list/watch/delete, pods/exec: create/get, events: list)",
    404: "create the namespace first (`kubectl create namespace <name>`, or apply the "
    "manifests from `python launch/k8s_manifests.py`)",
}


class ClusterAccessError(RuntimeError):
    """The Kubernetes API refused this client (credentials, RBAC or a missing namespace)."""


# ---------------------------------------------------------------- the runtime


class K8sRuntime(ExecRuntime):
    """A pod from `image` with the tools installed; same interface as DockerRuntime.

    Args:
      image: the task image (settings.image_prefix is put before it), pullable by the
        cluster's nodes.
      run_label: value of the deepswe.run label (a valid label value).
      api: a kubernetes CoreV1Api (default: `default_core_api()`).
      settings: namespace, limits and the rest of the pod (K8sPodSettings).
      sleep: the backoff sleep (tests pass a recorder).
    Methods are thread-safe; calls to one pod run one at a time.
    """

    def __init__(
        self,
        image: str,
        *,
        run_label: str,
        api: k8s.CoreV1Api | None = None,
        settings: K8sPodSettings = DEFAULT_POD_SETTINGS,
        name: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        check_label_value(run_label, "run label")
        super().__init__(
            settings.image_prefix + image, run_label=run_label, name=name or pod_name(run_label)
        )
        self.settings = settings
        self.namespace = settings.namespace
        self._api = api
        self._sleep = sleep
        self._owner = owner_label()
        self._lock = threading.Lock()
        self._create_attempted = False
        self._created = False

    @property
    def api(self) -> k8s.CoreV1Api:
        if self._api is None:
            self._api = default_core_api()
        return self._api

    def manifest(self) -> k8s.V1Pod:
        """The pod this runtime creates."""
        return pod_manifest(
            self.name,
            self.image,
            run_label=self.run_label,
            owner=self._owner,
            settings=self.settings,
            owner_reference=owner_pod_reference(self.namespace),
        )

    def _where(self) -> str:
        return f"pod {self.name}"

    def _retry(self, call: Callable[[], T], what: str) -> T:
        return retry_api(call, what, sleep=self._sleep)

    # ------------------------------------------------------------ start

    def start(self) -> None:
        """Create the pod, wait until it runs, install the tools.

        Raises:
          MissingImageError: the cluster cannot pull the image.
          EnvironmentUnavailableError: the pod did not run within `start_timeout_s`, failed,
            or the API kept failing transiently.
          ClusterAccessError: the API refused the pod (401, 403 or 404); says what to fix.
        """
        if self._created:
            return
        started = time.monotonic()
        self._register()
        self._create_attempted = True
        try:
            self._retry(self._create_once, f"creating pod {self.name}")
            self._created = True
            self._wait_running(started + self.settings.start_timeout_s)
            self._install_tools()
        except BaseException as e:
            self.close()
            if is_transient(e):
                raise EnvironmentUnavailableError(
                    f"starting pod {self.name} in {self.namespace} kept failing: {short_error(e)}"
                ) from e
            if isinstance(e, k8s.ApiException) and e.status in (401, 403, 404):
                raise ClusterAccessError(
                    f"the API refused pod {self.name} in namespace {self.namespace} "
                    f"({short_error(e)}: {e.body}); {ACCESS_HINTS[e.status]}"
                ) from e
            raise
        self.ready_s = time.monotonic() - started

    def _create_once(self) -> None:
        try:
            self.api.create_namespaced_pod(
                self.namespace, self.manifest(), _request_timeout=API_TIMEOUT_S
            )
        except k8s.ApiException as e:
            if e.status != 409:
                raise
            if self._is_ours(self._read_pod_or_none()):
                return  # an earlier create succeeded but its answer was lost
            self.name = pod_name(self.run_label)
            raise

    def _is_ours(self, pod: k8s.V1Pod | None) -> bool:
        if pod is None:
            return False
        annotations = pod.metadata.annotations or {}
        labels = pod.metadata.labels or {}
        return annotations.get(OWNER_LABEL) == self._owner and labels.get(RUN_LABEL) == (
            self.run_label
        )

    def _read_pod_or_none(self) -> k8s.V1Pod | None:
        try:
            return self._retry(
                lambda: self.api.read_namespaced_pod(
                    self.name, self.namespace, _request_timeout=API_TIMEOUT_S
                ),
                f"reading pod {self.name}",
            )
        except k8s.ApiException as e:
            if e.status == 404:
                return None
            raise

    def _wait_running(self, deadline: float) -> None:
        """Watch the pod until it runs; raise on a failure it cannot recover from or at `deadline`."""
        pod = self._read_pod_or_none()
        while True:
            if pod is None:
                raise EnvironmentUnavailableError(
                    f"pod {self.name} in {self.namespace} was deleted while starting"
                )
            if pod.status is not None and pod.status.phase == "Running":
                return
            self._raise_if_failed(pod)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EnvironmentUnavailableError(
                    f"pod {self.name} in {self.namespace} is not running after "
                    f"{self.settings.start_timeout_s:.0f}s: {describe_pod(pod)}; events: "
                    f"{self._events()}"
                )
            try:
                pod = self._next_pod_state(pod, remaining)
            except k8s.ApiException as e:
                if e.status != 410 and not is_transient(e):  # 410: the watch expired
                    raise
                pod = self._read_pod_or_none()

    def _next_pod_state(self, pod: k8s.V1Pod, remaining_s: float) -> k8s.V1Pod | None:
        """The pod after its next change (None if deleted), or as it is when the watch ends."""
        watcher = k8s_watch.Watch(return_type="V1Pod")
        for event in watcher.stream(
            self.api.list_namespaced_pod,
            self.namespace,
            field_selector=f"metadata.name={self.name}",
            resource_version=pod.metadata.resource_version,
            timeout_seconds=max(1, int(remaining_s)),
            _request_timeout=remaining_s + 10,
        ):
            watcher.stop()
            return None if event["type"] == "DELETED" else event["object"]
        return pod

    def _raise_if_failed(self, pod: k8s.V1Pod) -> None:
        status = pod.status
        if status is None:
            return
        if status.phase in ("Failed", "Succeeded"):
            raise EnvironmentUnavailableError(
                f"pod {self.name} in {self.namespace} stopped while starting: "
                f"{describe_pod(pod)}; events: {self._events()}"
            )
        for container in status.container_statuses or ():
            waiting = container.state.waiting if container.state else None
            if waiting is None:
                continue
            if waiting.reason in IMAGE_PULL_FAILURES:
                raise MissingImageError(
                    f"pod {self.name} in {self.namespace} cannot pull image {self.image} "
                    f"({waiting.reason}: {waiting.message}); events: {self._events()}. Push the "
                    "image to a registry the nodes can reach (with imagePullSecrets if private) "
                    "and pre-pull it with the DaemonSet from `python launch/k8s_manifests.py`"
                )
            if waiting.reason in CONFIG_FAILURES:
                raise EnvironmentUnavailableError(
                    f"pod {self.name} in {self.namespace} cannot start its container "
                    f"({waiting.reason}: {waiting.message}); events: {self._events()}"
                )

    def _events(self) -> str:
        """The pod's latest events as "Reason: message; ..." (for error messages)."""
        try:
            events = self.api.list_namespaced_event(
                self.namespace,
                field_selector=f"involvedObject.name={self.name}",
                _request_timeout=API_TIMEOUT_S,
            ).items
        except (k8s.ApiException, urllib3.exceptions.HTTPError) as e:
            return f"unavailable ({short_error(e)})"
        return "; ".join(f"{e.reason}: {e.message}" for e in events[-8:]) or "none"

    def _install_tools(self) -> None:
        archive = install_archive()
        self._put_archive(archive, what="installing the tools")

    # ------------------------------------------------------------ exec

    def _exec(
        self,
        command: list[str],
        *,
        deadline_s: float,
        stdin: bytes | None = None,
        max_output: int | None = None,
    ) -> tuple[int, bytes | str, str]:
        """Run `command` in the pod; (exit code, stdout, stderr). stdout is text with head and
        tail kept when `max_output` is given, else bytes.

        Raises:
          EnvironmentUnavailableError: the exec could not start or did not end within
            `deadline_s` seconds (the pod is gone or unreachable).
        """
        with self._lock:
            if self._closed or not self._created:
                raise EnvironmentUnavailableError(f"pod {self.name} is not running; call start()")
            deadline = time.monotonic() + deadline_s
            try:
                session = open_exec(
                    self.api,
                    self.name,
                    self.namespace,
                    command,
                    stdin=stdin is not None,
                    sleep=self._sleep,
                )
            except k8s.ApiException as e:
                raise EnvironmentUnavailableError(
                    f"cannot exec in pod {self.name} ({short_error(e)}); {self._describe_state()}"
                ) from None
            try:
                stdout, stderr, status = exchange(
                    session, stdin=stdin, deadline=deadline, max_output=max_output
                )
            except TimeoutError:
                raise EnvironmentUnavailableError(
                    f"exec in pod {self.name} did not end within {deadline_s:.0f}s; "
                    f"{self._describe_state()}"
                ) from None
            except (OSError, WebSocketException) as e:
                raise EnvironmentUnavailableError(
                    f"lost the exec stream of pod {self.name} ({type(e).__name__}: {e}); "
                    f"{self._describe_state()}"
                ) from None
            finally:
                session.close()
        try:
            return exec_exit_code(status), stdout, stderr
        except ExecStatusError as e:
            raise EnvironmentUnavailableError(
                f"exec in pod {self.name} {e}; {self._describe_state()}"
                + (f"; stderr: {stderr[-2000:]}" if stderr else "")
            ) from None

    def _describe_state(self) -> str:
        try:
            pod = self._read_pod_or_none()
        except (k8s.ApiException, urllib3.exceptions.HTTPError) as e:
            return f"pod state unknown ({short_error(e)})"
        return "the pod no longer exists" if pod is None else describe_pod(pod)

    def _put_archive(self, archive: bytes, *, what: str) -> None:
        timeout = SERVER_GRACE_S + len(archive) / 1e6
        status, _, stderr = self._exec(
            untar_argv(len(archive), timeout), deadline_s=timeout + SERVER_GRACE_S, stdin=archive
        )
        if status != 0:
            raise OSError(f"{what} in pod {self.name} failed (exit code {status}): {stderr}")

    # ------------------------------------------------------------ the Runtime interface

    def _execute(self, command: Command, timeout: float) -> ExecResult:
        argv = list(command.argv)
        if command.tool is not None:
            # On the Python the Docker tool server would use, not the tool's `env python3`
            # shebang: an image may have no python3 on PATH (tools.SERVER_PYTHONS).
            argv = python_command([f"{INSTALL_DIR}/{command.tool}", *argv])
        started = time.monotonic()
        exit_code, output, _ = self._exec(
            exec_argv(argv, timeout=timeout, workdir=command.cwd),
            deadline_s=timeout + SERVER_GRACE_S,
            max_output=command.max_output,
        )
        duration_s = time.monotonic() - started
        # 137 = SIGKILL; at or after the deadline that was `timeout -s KILL`.
        timed_out = exit_code == 137 and duration_s >= timeout
        return ExecResult(
            exit_code=None if timed_out else exit_code,
            output=output,
            timed_out=timed_out,
            duration_s=duration_s,
        )

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` to absolute `path` in the pod (parent folders are created)."""
        if not path.startswith("/"):
            raise ValueError(f"write_file needs an absolute path, got {path!r}")
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        self._put_archive(file_archive(path, data), what=f"writing {path}")

    def read_file(self, path: str) -> bytes:
        """The bytes of absolute `path` in the pod; raises FileNotFoundError etc."""
        if not path.startswith("/"):
            raise ValueError(f"read_file needs an absolute path, got {path!r}")
        exit_code, archive, stderr = self._exec(
            ["sh", "-c", READ_SCRIPT, "sh", path], deadline_s=SERVER_GRACE_S * 2
        )
        if exit_code == READ_MISSING:
            raise FileNotFoundError(2, "No such file or directory (in the pod)", path)
        if exit_code == READ_IS_DIRECTORY:
            raise IsADirectoryError(21, "Is a directory (in the pod)", path)
        if exit_code != 0:
            raise OSError(f"reading {path} in pod {self.name} failed: {stderr}")
        return file_from_archive(archive, path)

    def _remove(self) -> None:
        if not self._create_attempted:
            return
        try:
            delete_pod(self.api, self.name, self.namespace, sleep=self._sleep)
        except (k8s.ApiException, urllib3.exceptions.HTTPError) as e:
            logger.warning("could not delete pod %s: %s", self.name, short_error(e))


# ---------------------------------------------------------------- for EnvPool


@dataclass(frozen=True)
class K8sPodFactory:
    """Makes K8sRuntimes with shared settings (a `runtime.RuntimeFactory`):
    `EnvPool(runtime_factory=K8sPodFactory(settings=K8sPodSettings(...)))`.

    `api` defaults to `default_core_api()` (in-cluster service account, else kubeconfig)."""

    api: Any = field(default_factory=default_core_api)
    settings: K8sPodSettings = DEFAULT_POD_SETTINGS

    def __call__(self, image: str, *, run_label: str) -> K8sRuntime:
        return K8sRuntime(image, run_label=run_label, api=self.api, settings=self.settings)

    def remove_stale(self, run_labels: tuple[str, ...] = ()) -> list[str]:
        """Delete pods of dead creators on this host and of `run_labels` (see remove_stale_pods)."""
        return remove_stale_pods(self.api, self.settings.namespace, run_labels=run_labels)
