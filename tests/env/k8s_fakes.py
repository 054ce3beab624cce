"""A stand-in for the Kubernetes API server, for the tests of env/k8s/k8s_runtime.py,
env/k8s/k8s_pods.py and env/k8s/k8s_exec.py (test_k8s_pods.py, test_k8s_exec.py,
test_k8s_runtime.py).

No cluster exists here, so `FakeCoreV1Api` stands in for the API server: it records every
call and answers with the client's real model objects (V1Pod, V1PodList, V1EventList,
ApiException), its watch streams real serialized events through `kubernetes.watch.Watch`,
and `kubernetes.stream.stream` (unpatched) hands exec calls to it. Exec sessions either
replay a scripted answer (`ScriptedExec`), or run the exact exec command in a Docker container
started from the pod's own manifest (image, command; `DockerExec`), so the wrapper, the tar
transfers, the timeouts and the diff run for real.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading

from kubernetes import client as k8s

from deepswe_jax.env.k8s.k8s_pods import K8sPodSettings
from deepswe_jax.env.k8s.k8s_runtime import K8sRuntime
from deepswe_jax.env.ownership import RUN_LABEL

NAMESPACE = "deepswe-test"
TIMEOUT = 30
SERIALIZER = k8s.ApiClient()


def api_error(status: int, reason: str = "", headers: dict | None = None) -> k8s.ApiException:
    error = k8s.ApiException(status=status, reason=reason or f"status {status}")
    error.headers = headers
    return error


def exit_status(code: int) -> bytes:
    """What the API server sends on the exec error channel when the command ends."""
    if code == 0:
        return b'{"metadata":{},"status":"Success"}'
    return json.dumps(
        {
            "status": "Failure",
            "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    ).encode()


def pod_status(phase: str, state: k8s.V1ContainerState, ready: bool = False) -> k8s.V1PodStatus:
    """A pod status whose one container ("env") is in `state`."""
    return k8s.V1PodStatus(
        phase=phase,
        container_statuses=[
            k8s.V1ContainerStatus(
                name="env", image="x", image_id="", ready=ready, restart_count=0, state=state
            )
        ],
    )


def running_status() -> k8s.V1PodStatus:
    return pod_status(
        "Running", k8s.V1ContainerState(running=k8s.V1ContainerStateRunning()), ready=True
    )


def waiting_status(reason: str, message: str) -> k8s.V1PodStatus:
    waiting = k8s.V1ContainerStateWaiting(reason=reason, message=message)
    return pod_status("Pending", k8s.V1ContainerState(waiting=waiting))


class WatchResponse:
    """The HTTP response of a watch request: one JSON event per line."""

    def __init__(self, events: list[dict]):
        self._lines = [json.dumps(event).encode() + b"\n" for event in events]
        self.status = 200

    def stream(self, amt=None, decode_content=False):
        yield from self._lines

    def close(self):
        pass

    def release_conn(self):
        pass


class ScriptedExec:
    """An exec session that answers with fixed output and exit status."""

    def __init__(self, stdout: bytes = b"", status: bytes = exit_status(0), broken=None):
        self.channels = {1: stdout, 2: b"", 3: status}
        self.stdin = bytearray()
        self._open = True
        self._broken = broken

    def write_stdin(self, data: bytes) -> None:
        self.stdin += data

    def is_open(self) -> bool:
        return self._open

    def update(self, timeout: float = 0) -> None:
        if self._broken is not None:
            raise self._broken
        self._open = False

    def read_channel(self, channel: int, timeout: float = 0) -> bytes:
        data = self.channels.get(channel, b"")
        self.channels[channel] = b""
        return data

    def close(self) -> None:
        self._open = False


class DockerExec:
    """An exec session running the command with `docker exec` in the pod's container."""

    def __init__(self, container: str, command: list[str], stdin: bool):
        self.proc = subprocess.Popen(
            ["docker", "exec", *(["-i"] if stdin else []), container, *command],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.pipes = {self.proc.stdout.fileno(): 1, self.proc.stderr.fileno(): 2}
        self.channels = {1: bytearray(), 2: bytearray()}
        self._open = True

    def write_stdin(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def is_open(self) -> bool:
        return self._open

    def update(self, timeout: float = 0) -> None:
        ready, _, _ = select.select(list(self.pipes), [], [], timeout)
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if data:
                self.channels[self.pipes[fd]] += data
            else:
                del self.pipes[fd]
        if not self.pipes:
            self.proc.wait()
            self._open = False

    def read_channel(self, channel: int, timeout: float = 0) -> bytes:
        if channel == 3:
            return exit_status(self.proc.returncode) if not self._open else b""
        data = bytes(self.channels[channel])
        self.channels[channel].clear()
        return data

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


class FakeCoreV1Api:
    """The CoreV1Api calls K8sRuntime makes, answered with the client's model objects.

    failures: method name -> errors raised (in order) before the method works.
    statuses: the statuses each created pod goes through, one per watch call (once they
      are used up, the watch ends without events, as a server-side timeout does).
    docker: run each created pod as a Docker container and exec in it for real.
    """

    def __init__(
        self, *, statuses=None, events=(), exec_answers=(), docker=None, expired_watches=0
    ):
        self.api_client = k8s.ApiClient()  # what kubernetes.stream.stream switches to websockets
        self.calls: list[tuple[str, dict]] = []
        self.pods: dict[str, k8s.V1Pod] = {}
        self.failures: dict[str, list[k8s.ApiException]] = {}
        self.statuses = list(statuses if statuses is not None else [running_status()])
        self._statuses_left: dict[str, list[k8s.V1PodStatus]] = {}
        self.events = list(events)
        self.exec_answers = list(exec_answers)
        self.exec_sessions: list = []
        self.docker = docker
        self.expired_watches = expired_watches
        self._version = 0
        self._lock = threading.Lock()

    def _record(self, method: str, **arguments):
        with self._lock:
            self.calls.append((method, arguments))
            pending = self.failures.get(method)
            if pending:
                raise pending.pop(0)

    def called(self, method: str) -> list[dict]:
        return [arguments for name, arguments in self.calls if name == method]

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def add_pod(self, pod: k8s.V1Pod, status: k8s.V1PodStatus | None = None) -> None:
        pod = pod.model_copy(deep=True)
        pod.metadata.resource_version = self._next_version()
        pod.status = status or k8s.V1PodStatus(phase="Pending")
        self.pods[pod.metadata.name] = pod
        self._statuses_left[pod.metadata.name] = list(self.statuses)

    def create_namespaced_pod(self, namespace, body, **kwargs):
        self._record("create_namespaced_pod", namespace=namespace, body=body)
        if body.metadata.name in self.pods:
            raise api_error(409, "AlreadyExists")
        self.add_pod(body)
        if self.docker is not None:
            container = body.spec.containers[0]
            self.docker.containers.run(
                container.image,
                container.command,
                name=body.metadata.name,
                labels={RUN_LABEL: body.metadata.labels[RUN_LABEL]},
                working_dir=container.working_dir,
                network_mode="none",
                mem_limit=container.resources.limits["memory"].replace("Gi", "g"),
                detach=True,
            )
        return self.pods[body.metadata.name]

    def read_namespaced_pod(self, name, namespace, **kwargs):
        self._record("read_namespaced_pod", name=name, namespace=namespace)
        if name not in self.pods:
            raise api_error(404, "NotFound")
        return self.pods[name]

    def list_namespaced_pod(self, namespace, watch=False, **kwargs):
        self._record("list_namespaced_pod", namespace=namespace, watch=watch, **kwargs)
        if not watch:
            selector = kwargs.get("label_selector") or ""
            items = [p for p in self.pods.values() if selector in (p.metadata.labels or {})]
            return k8s.V1PodList(items=items)
        name = kwargs["field_selector"].removeprefix("metadata.name=")
        if self.expired_watches:
            self.expired_watches -= 1
            gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
            return WatchResponse([{"type": "ERROR", "object": gone}])
        statuses = self._statuses_left.get(name)
        if not statuses:
            threading.Event().wait(0.05)  # the server holds a watch open until its timeout
            return WatchResponse([])
        pod = self.pods[name]
        pod.status = statuses.pop(0)
        pod.metadata.resource_version = self._next_version()
        event = {"type": "MODIFIED", "object": SERIALIZER.sanitize_for_serialization(pod)}
        return WatchResponse([event])

    def delete_namespaced_pod(self, name, namespace, **kwargs):
        self._record("delete_namespaced_pod", name=name, namespace=namespace, **kwargs)
        if name not in self.pods:
            raise api_error(404, "NotFound")
        pod = self.pods.pop(name)
        if self.docker is not None:
            self.docker.containers.get(name).remove(force=True)
        return pod

    def list_namespaced_event(self, namespace, **kwargs):
        self._record("list_namespaced_event", namespace=namespace, **kwargs)
        return k8s.CoreV1EventList(items=list(self.events))

    def connect_get_namespaced_pod_exec(self, name, namespace, **kwargs):
        self._record("connect_get_namespaced_pod_exec", name=name, namespace=namespace, **kwargs)
        if name not in self.pods:
            raise api_error(0, "Handshake status 404 Not Found")
        if self.docker is not None:
            session = DockerExec(name, kwargs["command"], kwargs["stdin"])
        else:
            session = self.exec_answers.pop(0) if self.exec_answers else ScriptedExec()
        self.exec_sessions.append(session)
        return session


class Sleeps(list):
    """Records backoff sleeps instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_runtime(api, sleeps=None, **settings) -> K8sRuntime:
    return K8sRuntime(
        "registry.example/deepswe/tinycalc:base",
        run_label="pytest-k8s",
        api=api,
        settings=K8sPodSettings(namespace=NAMESPACE, **settings),
        sleep=sleeps if sleeps is not None else Sleeps(),
    )
