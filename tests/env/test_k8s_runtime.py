"""K8sRuntime: retries, watch, cleanup and exec/tar logic against the kubernetes client's objects.

No cluster exists here, so `FakeCoreV1Api` stands in for the API server: it records every
call and answers with the client's real model objects (V1Pod, V1PodList, V1EventList,
ApiException), its watch streams real serialized events through `kubernetes.watch.Watch`,
and `kubernetes.stream.stream` (unpatched) hands exec calls to it. Exec sessions either
replay a scripted answer, or run the exact exec command in a Docker container started from
the pod's own manifest (image, command), so the wrapper, the tar transfers, the timeouts
and the diff run for real. A config with env.backend='kubernetes' builds (experiment.
make_env_pool) a pool whose episodes and gradings run in such pods.
`test_real_cluster_end_to_end` runs against a cluster whenever KUBECONFIG points to one.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import select
import socket
import subprocess
import tarfile
import threading
import uuid

import pytest
from kubernetes import client as k8s
from websocket import WebSocketConnectionClosedException

from configs import tiny
from deepswe_jax import experiment
from deepswe_jax.env import k8s_exec, k8s_pods
from deepswe_jax.env.k8s_exec import EXEC_WRAPPER, exec_argv, file_archive, file_from_archive
from deepswe_jax.env.k8s_pods import POD_INIT, K8sPodSettings, remove_stale_pods
from deepswe_jax.env.k8s_runtime import ClusterAccessError, K8sPodFactory, K8sRuntime
from deepswe_jax.env.ownership import LIVE_RUNTIMES, OWNER_LABEL, RUN_LABEL, owner_label
from deepswe_jax.env.placement import FactoryPlacement
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.runtime import EnvironmentUnavailableError, MissingImageError
from deepswe_jax.env.tools import python_command

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


def running_status() -> k8s.V1PodStatus:
    return k8s.V1PodStatus(
        phase="Running",
        container_statuses=[
            k8s.V1ContainerStatus(
                name="env",
                image="x",
                image_id="",
                ready=True,
                restart_count=0,
                state=k8s.V1ContainerState(running=k8s.V1ContainerStateRunning()),
            )
        ],
    )


def waiting_status(reason: str, message: str) -> k8s.V1PodStatus:
    return k8s.V1PodStatus(
        phase="Pending",
        container_statuses=[
            k8s.V1ContainerStatus(
                name="env",
                image="x",
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(
                    waiting=k8s.V1ContainerStateWaiting(reason=reason, message=message)
                ),
            )
        ],
    )


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


# ---------------------------------------------------------------- pod spec


def test_pod_is_isolated_limited_labelled_and_never_restarted():
    api = FakeCoreV1Api()
    runtime = make_runtime(api, mem_limit="2g", cpus=0.5)
    runtime.start()
    pod = api.called("create_namespaced_pod")[0]["body"]
    assert isinstance(pod, k8s.V1Pod) and api.called("create_namespaced_pod")[0]["namespace"] == (
        NAMESPACE
    )
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.automount_service_account_token is False
    container = pod.spec.containers[0]
    assert container.command == python_command(["-c", POD_INIT])
    assert container.resources.limits == container.resources.requests
    assert container.resources.limits["memory"] == "2Gi"
    assert container.resources.limits["cpu"] == "500m"
    assert pod.metadata.labels == {RUN_LABEL: "pytest-k8s", "deepswe.role": "env"}
    assert pod.metadata.annotations[OWNER_LABEL] == owner_label()
    assert runtime in LIVE_RUNTIMES
    runtime.close()
    assert runtime not in LIVE_RUNTIMES


def test_bad_settings_fail_at_construction_with_what_to_do():
    with pytest.raises(ValueError, match="not a valid Kubernetes label value"):
        K8sRuntime("img", run_label="has space", api=FakeCoreV1Api())
    with pytest.raises(ValueError, match="memory limit"):
        K8sRuntime(
            "img", run_label="ok", api=FakeCoreV1Api(), settings=K8sPodSettings(mem_limit="lots")
        )


# ---------------------------------------------------------------- retries


def test_create_retries_409_429_500_with_backoff_then_succeeds():
    api = FakeCoreV1Api()
    api.failures["create_namespaced_pod"] = [
        api_error(409, "AlreadyExists"),
        api_error(429, "TooManyRequests", headers={"Retry-After": "3"}),
        api_error(500, "InternalError"),
    ]
    sleeps = Sleeps()
    runtime = make_runtime(api, sleeps)
    first_name = runtime.name
    runtime.start()
    creates = api.called("create_namespaced_pod")
    assert len(creates) == 4
    assert sleeps == [0.5, 3.0, 2.0]  # doubling backoff, raised to Retry-After for the 429
    # The 409 was for a pod that is not ours: the retry used a fresh name.
    assert runtime.name != first_name and list(api.pods) == [runtime.name]
    runtime.close()
    assert api.pods == {}


def test_create_gives_up_after_repeated_server_errors():
    api = FakeCoreV1Api()
    api.failures["create_namespaced_pod"] = [api_error(503, "ServiceUnavailable")] * 6
    sleeps = Sleeps()
    runtime = make_runtime(api, sleeps)
    with pytest.raises(EnvironmentUnavailableError, match="kept failing: HTTP 503"):
        runtime.start()
    assert len(api.called("create_namespaced_pod")) == 6
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert runtime not in LIVE_RUNTIMES


def test_conflict_on_a_pod_that_is_ours_adopts_it():
    api = FakeCoreV1Api()
    runtime = make_runtime(api)
    api.add_pod(runtime.manifest())  # an earlier create succeeded but its answer was lost
    name = runtime.name
    runtime.start()
    assert runtime.name == name and len(api.called("create_namespaced_pod")) == 1
    runtime.close()


def test_access_errors_are_not_retried_and_say_what_to_fix():
    api = FakeCoreV1Api()
    api.failures["create_namespaced_pod"] = [api_error(403, "Forbidden")]
    sleeps = Sleeps()
    with pytest.raises(ClusterAccessError, match="grant the service account the Role"):
        make_runtime(api, sleeps).start()
    assert sleeps == [] and len(api.called("create_namespaced_pod")) == 1


# ---------------------------------------------------------------- watch until running


def test_watch_follows_the_pod_until_it_runs():
    pulling = waiting_status("ContainerCreating", "")
    api = FakeCoreV1Api(statuses=[pulling, pulling, running_status()])
    runtime = make_runtime(api)
    runtime.start()
    watches = [c for c in api.called("list_namespaced_pod") if c["watch"]]
    assert len(watches) == 3
    assert watches[0]["field_selector"] == f"metadata.name={runtime.name}"
    assert all(isinstance(w["timeout_seconds"], int) for w in watches)
    runtime.close()


def test_an_expired_watch_rereads_the_pod_and_watches_again():
    api = FakeCoreV1Api(expired_watches=1)
    runtime = make_runtime(api)
    runtime.start()
    assert len(api.called("read_namespaced_pod")) == 2  # before the first watch, after the 410
    assert len([c for c in api.called("list_namespaced_pod") if c["watch"]]) == 2
    runtime.close()


def test_watch_timeout_names_the_pod_its_phase_and_events():
    unschedulable = k8s.V1PodStatus(
        phase="Pending",
        conditions=[
            k8s.V1PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message="0/3 nodes are available: 3 Insufficient memory.",
            )
        ],
    )
    event = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name="e1"),
        involved_object=k8s.V1ObjectReference(kind="Pod", name="x"),
        reason="FailedScheduling",
        message="0/3 nodes are available",
    )
    api = FakeCoreV1Api(statuses=[unschedulable], events=[event])
    runtime = make_runtime(api, start_timeout_s=0.3)
    with pytest.raises(EnvironmentUnavailableError) as error:
        runtime.start()
    message = str(error.value)
    assert runtime.name in message and "not running after" in message
    assert "phase Pending" in message and "Insufficient memory" in message
    assert "FailedScheduling" in message
    assert api.called("list_namespaced_event")[0]["field_selector"] == (
        f"involvedObject.name={runtime.name}"
    )
    assert api.pods == {}  # the pod that never ran was deleted


def test_image_pull_backoff_fails_at_once_naming_the_image():
    api = FakeCoreV1Api(statuses=[waiting_status("ImagePullBackOff", "pull access denied")])
    runtime = make_runtime(api, start_timeout_s=600)
    with pytest.raises(MissingImageError) as error:
        runtime.start()
    assert "registry.example/deepswe/tinycalc:base" in str(error.value)
    assert "pull access denied" in str(error.value) and "DaemonSet" in str(error.value)
    assert api.pods == {}


def test_pod_that_stops_while_starting_is_an_environment_error():
    failed = k8s.V1PodStatus(
        phase="Failed",
        container_statuses=[
            k8s.V1ContainerStatus(
                name="env",
                image="x",
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(
                    terminated=k8s.V1ContainerStateTerminated(
                        exit_code=127, reason="Error", message="python3: not found"
                    )
                ),
            )
        ],
    )
    api = FakeCoreV1Api(statuses=[failed])
    with pytest.raises(EnvironmentUnavailableError, match="exit code 127"):
        make_runtime(api).start()


# ---------------------------------------------------------------- exec and files (scripted)


def test_exec_commands_run_under_timeout_kill_in_the_workdir():
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(b"hi\n", exit_status(3))])
    runtime = make_runtime(api)
    runtime.start()
    install = api.called("connect_get_namespaced_pod_exec")[0]
    assert install["stdin"] is True and install["command"][:4] == ["timeout", "-s", "KILL", "30"]
    result = runtime.run("echo hi; exit 3", timeout=7, workdir="/tmp")
    call = api.called("connect_get_namespaced_pod_exec")[1]
    assert call["command"] == ["sh", "-c", EXEC_WRAPPER, "sh", "7.000", "/tmp"] + [
        "bash",
        "-c",
        "echo hi; exit 3",
    ]
    assert "timeout -s KILL" in EXEC_WRAPPER
    assert (call["name"], call["container"], call["stdin"], call["tty"]) == (
        runtime.name,
        "env",
        False,
        False,
    )
    assert (result.exit_code, result.output, result.timed_out) == (3, "hi\n", False)

    runtime.call_tool("file_editor", {"command": "view", "path": "/testbed"}, timeout=90)
    tool = api.called("connect_get_namespaced_pod_exec")[2]["command"]
    # On the first Python found, as the Docker tool server (not the tool's shebang).
    assert tool == exec_argv(
        python_command(["/usr/local/bin/file_editor", "view", "--path=/testbed"]),
        timeout=90,
        workdir="/testbed",
    )
    runtime.close()


def test_sigkill_before_the_deadline_is_not_a_timeout():
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(b"", exit_status(137))])
    runtime = make_runtime(api)
    runtime.start()
    result = runtime.run("kill -9 $$", timeout=60)
    assert (result.exit_code, result.timed_out) == (137, False)
    runtime.close()


def test_exec_without_an_exit_status_is_an_environment_error():
    internal = json.dumps({"status": "Failure", "reason": "InternalError", "message": "boom"})
    api = FakeCoreV1Api(
        exec_answers=[ScriptedExec(), ScriptedExec(b"", b""), ScriptedExec(b"", internal.encode())]
    )
    runtime = make_runtime(api)
    runtime.start()
    with pytest.raises(EnvironmentUnavailableError, match="without a status"):
        runtime.run("true", timeout=5)
    with pytest.raises(EnvironmentUnavailableError, match="boom"):
        runtime.run("true", timeout=5)
    runtime.close()
    with pytest.raises(EnvironmentUnavailableError, match="not running"):
        runtime.run("true", timeout=5)


def test_a_broken_exec_stream_is_an_environment_error():
    broken = WebSocketConnectionClosedException("socket is already closed.")
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(broken=broken)])
    runtime = make_runtime(api)
    runtime.start()
    api.pods.clear()  # e.g. the node went away
    with pytest.raises(EnvironmentUnavailableError, match="the pod no longer exists"):
        runtime.run("sleep 5", timeout=60)
    runtime.close()


def test_files_travel_as_tar_archives_over_exec():
    data = "naïve ✓\n".encode() + bytes(range(256))
    read_back = io.BytesIO()
    with tarfile.open(fileobj=read_back, mode="w") as tar:
        info = tarfile.TarInfo("srv/data.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    api = FakeCoreV1Api(
        exec_answers=[
            ScriptedExec(),
            ScriptedExec(),
            ScriptedExec(read_back.getvalue()),
            ScriptedExec(b"", exit_status(k8s_exec.READ_MISSING)),
        ]
    )
    runtime = make_runtime(api)
    runtime.start()
    runtime.write_file("/srv/new/data.bin", data)
    session = api.exec_sessions[1]
    command = api.called("connect_get_namespaced_pod_exec")[1]["command"]
    assert command[-1] == str(len(session.stdin))  # head -c <archive size> | tar -x
    assert file_from_archive(bytes(session.stdin), "/srv/new/data.bin") == data
    with tarfile.open(fileobj=io.BytesIO(bytes(session.stdin))) as tar:
        assert tar.getnames() == ["srv/new/data.bin"]
    assert runtime.read_file("/srv/data.bin") == data
    with pytest.raises(FileNotFoundError):
        runtime.read_file("/srv/missing")
    runtime.close()


def test_file_archive_round_trip():
    data = b"\x00\xffbinary\n" * 1000
    assert file_from_archive(file_archive("/a/b/c.bin", data), "/a/b/c.bin") == data


# ---------------------------------------------------------------- cleanup by label


def dead_owner() -> str:
    process = subprocess.Popen(["sleep", "30"])
    label = owner_label(process.pid)
    process.kill()
    process.wait()
    return label


def test_remove_stale_pods_by_run_label_and_dead_owner():
    api = FakeCoreV1Api()
    live, other_host = owner_label(), f"not-{socket.gethostname()}:1:1"
    pods = {
        "old-run": ("finished-run", live),
        "dead-owner": ("current", dead_owner()),
        "alive-owner": ("current", live),
        "elsewhere": ("current", other_host),
    }
    for name, (run, owner) in pods.items():
        api.add_pod(
            k8s_pods.pod_manifest(
                name, "img", run_label=run, owner=owner, settings=K8sPodSettings(NAMESPACE)
            )
        )
    api.failures["delete_namespaced_pod"] = [api_error(429, "TooManyRequests")]
    sleeps = Sleeps()
    removed = remove_stale_pods(api, NAMESPACE, run_labels=("finished-run",), sleep=sleeps)
    assert sorted(removed) == ["dead-owner", "old-run"]
    assert sorted(api.pods) == ["alive-owner", "elsewhere"]
    assert api.called("list_namespaced_pod")[0]["label_selector"] == RUN_LABEL
    assert sleeps == [0.5]
    assert all(c["grace_period_seconds"] == 0 for c in api.called("delete_namespaced_pod"))


def test_close_is_idempotent_and_tolerates_a_pod_already_gone():
    api = FakeCoreV1Api()
    runtime = make_runtime(api)
    runtime.start()
    api.pods.clear()  # deleted by someone else (e.g. activeDeadlineSeconds)
    runtime.close()
    runtime.close()
    assert len(api.called("delete_namespaced_pod")) == 1
    unstarted = make_runtime(api)
    unstarted.close()
    assert len(api.called("delete_namespaced_pod")) == 1


# ---------------------------------------------------------------- real commands in a container


@pytest.fixture(scope="module")
def container_api(docker_client):
    return FakeCoreV1Api(docker=docker_client)


@pytest.fixture(scope="module")
def pod(container_api, tiny_task, run_label):
    runtime = K8sRuntime(tiny_task.image, run_label=run_label, api=container_api)
    runtime.start()
    yield runtime
    runtime.close()


def processes(runtime):
    return runtime.run("ps -eo pid=,args=", timeout=TIMEOUT).output


def test_run_merges_output_and_reports_exit_code(pod):
    result = pod.run("echo out; echo err >&2; pwd; exit 3", timeout=TIMEOUT)
    assert (result.exit_code, result.timed_out) == (3, False)
    assert result.output.splitlines() == ["out", "err", "/testbed"]


def test_timeout_kills_the_command_and_its_children(pod):
    result = pod.run("sleep 1001 & sleep 1002", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert "sleep 100" not in processes(pod)


def test_processes_left_in_the_background_are_killed_when_the_command_ends(pod):
    result = pod.run("(sleep 1003; echo late) & echo early", timeout=TIMEOUT)
    assert (result.exit_code, result.output) == (0, "early\n")
    assert "sleep 1003" not in processes(pod)


def test_output_keeps_head_and_tail_within_the_limit(pod):
    result = pod.run("seq 1 200000", timeout=TIMEOUT, max_output=2000)
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("199999\n200000\n")
    assert "bytes of output omitted" in result.output and len(result.output) < 2100


def test_write_and_read_files_byte_exact(pod):
    data = bytes(range(256)) * 4000  # 1 MB, every byte value
    pod.write_file("/tmp/deep/new/dir/blob.bin", data)
    assert pod.read_file("/tmp/deep/new/dir/blob.bin") == data
    pod.write_file("/tmp/text.txt", "héllo\udcff")
    assert pod.read_file("/tmp/text.txt") == "héllo\udcff".encode("utf-8", "surrogateescape")
    with pytest.raises(FileNotFoundError):
        pod.read_file("/tmp/no-such-file")
    with pytest.raises(IsADirectoryError):
        pod.read_file("/tmp/deep")


def test_tools_run_from_the_pod(pod):
    created = pod.call_tool(
        "file_editor",
        {"command": "create", "path": "/tmp/tool_made.py", "file_text": "x = 1\n"},
        timeout=TIMEOUT,
    )
    assert created.exit_code == 0, created.output
    assert pod.read_file("/tmp/tool_made.py") == b"x = 1\n"
    bash = pod.call_tool("execute_bash", {"cmd": "echo via-tool"}, timeout=TIMEOUT)
    assert "via-tool" in bash.output
    slow = pod.call_tool("execute_bash", {"cmd": "sleep 1004"}, timeout=1)
    assert slow.timed_out and "sleep 1004" not in processes(pod)


def test_init_survives_the_agent_killing_everything_and_reaps_orphans(pod):
    pod.run("kill -9 -1; pkill python3; kill -INT 1; kill -TERM 1", timeout=TIMEOUT)
    for _ in range(3):
        pod.run("(sleep 0.1 &) ; true", timeout=TIMEOUT)
    threading.Event().wait(1.5)  # the reaper polls once a second when it has no children
    listing = processes(pod)
    assert "import os, signal, time" in listing.splitlines()[0]
    assert "defunct" not in listing


@pytest.fixture(scope="module")
def image_without_python3_on_path(docker_client, tiny_task):
    """tiny_task's image with its interpreter only at /opt/miniconda3/bin/python3, off PATH (as
    images whose Python lives in an environment): `env python3` and `python3` find nothing."""
    tag = f"deepswe-test/no-python3-on-path:{uuid.uuid4().hex[:8]}"
    dockerfile = (
        f"FROM {tiny_task.image}\n"
        'RUN real="$(readlink -f "$(command -v python3)")" && mkdir -p /opt/miniconda3/bin'
        ' && ln -s "$real" /opt/miniconda3/bin/python3'
        " && rm -f /usr/bin/python3 /usr/local/bin/python3 && ! command -v python3\n"
    )
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    yield tag
    docker_client.images.remove(tag, force=True)


def test_pods_find_python_off_path_for_init_and_tools(
    container_api, image_without_python3_on_path, run_label
):
    """Before: the pod's command was `python3 -c POD_INIT` and tools ran by their
    `#!/usr/bin/env python3` line, so such an image failed where Docker containers work."""
    runtime = K8sRuntime(image_without_python3_on_path, run_label=run_label, api=container_api)
    runtime.start()
    try:
        assert runtime.run("command -v python3 || echo none", timeout=TIMEOUT).output == "none\n"
        init = processes(runtime).splitlines()[0]
        assert "/opt/miniconda3/bin/python3 -c import os, signal, time" in init, init
        created = runtime.call_tool(
            "file_editor",
            {"command": "create", "path": "/tmp/off_path.py", "file_text": "y = 2\n"},
            timeout=TIMEOUT,
        )
        assert created.exit_code == 0, created.output
        assert runtime.read_file("/tmp/off_path.py") == b"y = 2\n"
        found = runtime.call_tool(
            "search", {"search_term": "y = 2", "path": "/tmp"}, timeout=TIMEOUT
        )
        assert "off_path.py" in found.output, found.output
    finally:
        runtime.close()


def test_diff_holds_edits_and_new_files(pod, tiny_task):
    pod.write_file("/testbed/tinycalc/__init__.py", "def add(a, b):\n    return a + b\n")
    pod.write_file("/testbed/NEW.txt", "new file\n")
    patch = pod.diff(tiny_task.base_commit)
    assert "+    return a + b" in patch and "b/NEW.txt" in patch
    assert pod.run("git status --porcelain", timeout=TIMEOUT).output.count("??") == 1


def test_env_pool_runs_episodes_on_the_kubernetes_runtime(container_api, tiny_task, run_label):
    factory = K8sPodFactory(api=container_api, settings=K8sPodSettings(NAMESPACE))

    async def episode():
        async with EnvPool(
            max_envs=1, runtime_factory=factory, build_images=False, run_label=run_label
        ) as pool:
            async with pool.acquire(tiny_task) as env:
                step = await env.step("execute_bash", {"cmd": "echo from-pool"})
                env.runtime.write_file("/testbed/tinycalc/extra.py", "y = 2\n")
                patch = await env.patch()
                name = env.runtime.name
            return step, patch, name, pool.stats

    step, patch, name, stats = asyncio.run(episode())
    assert "from-pool" in step.observation and not step.done and step.exit_code == 0
    assert "b/tinycalc/extra.py" in patch
    assert name not in container_api.pods and stats.released == 1
    listings = [c for c in container_api.called("list_namespaced_pod") if not c["watch"]]
    assert [c["label_selector"] for c in listings] == [RUN_LABEL]  # the pool's stale cleanup


def test_env_pool_grades_in_pods_of_its_kubernetes_factory(container_api, tiny_task, run_label):
    factory = K8sPodFactory(api=container_api, settings=K8sPodSettings(NAMESPACE))
    wrong = tiny_task.patch.replace("+    return a + b", "+    return a * b")  # applies, no fix
    first_pod = len(container_api.called("create_namespaced_pod"))

    async def grade():
        async with EnvPool(
            max_envs=1, runtime_factory=factory, build_images=False, run_label=run_label
        ) as pool:
            return await pool.grade(tiny_task, tiny_task.patch), await pool.grade(tiny_task, wrong)

    gold, unfixed = asyncio.run(grade())
    assert gold.status == "resolved", gold.test_log
    assert unfixed.status == "unresolved" and unfixed.patch_successfully_applied, unfixed.test_log
    assert unfixed.tests_status["FAIL_TO_PASS"]["failure"] == list(tiny_task.FAIL_TO_PASS)
    pods = [call["body"] for call in container_api.called("create_namespaced_pod")[first_pod:]]
    assert [(pod.spec.containers[0].image, pod.metadata.labels[RUN_LABEL]) for pod in pods] == [
        (tiny_task.image, run_label)
    ] * 2
    names = {pod.metadata.name for pod in pods}
    assert names.isdisjoint(container_api.pods)  # each grading pod was deleted afterwards
    test_runs = [
        call["name"]
        for call in container_api.called("connect_get_namespaced_pod_exec")
        if "-rA" in " ".join(call["command"])
    ]
    assert sorted(test_runs) == sorted(names)  # the tests ran in the pods, once each


# ---------------------------------------------------------------- from a config


def kubernetes_config(**settings):
    """configs/tiny.py with env.backend='kubernetes' and `settings` in env.kubernetes."""
    config = tiny.get_config()
    config.env.backend = "kubernetes"
    config.env.kubernetes.update(settings)
    return config


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- {name: local, cluster: {server: "https://local.example:6443"}}
- {name: gpu, cluster: {server: "https://gpu-cluster.example:6443"}}
users:
- {name: trainer, user: {token: not-a-secret}}
contexts:
- {name: local, context: {cluster: local, user: trainer}}
- {name: gpu, context: {cluster: gpu, user: trainer}}
current-context: local
"""


def test_a_configs_kubeconfig_and_context_choose_the_cluster(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    config = kubernetes_config(kubeconfig=str(kubeconfig), context="gpu", namespace="swe")
    factory = experiment.kubernetes_pod_factory(config)
    assert factory.api.api_client.configuration.host == "https://gpu-cluster.example:6443"
    assert factory.settings == K8sPodSettings(namespace="swe", mem_limit="1g", cpus=1.0)
    config.env.kubernetes.context = ""  # the file's current context
    host = experiment.kubernetes_pod_factory(config).api.api_client.configuration.host
    assert host == "https://local.example:6443"
    config.env.kubernetes.kubeconfig = str(tmp_path / "missing")
    with pytest.raises(RuntimeError, match="config.env.kubernetes.kubeconfig"):
        experiment.make_env_pool(config, "pytest-k8s")


def test_a_config_with_backend_kubernetes_runs_episodes_and_grading_in_pods(
    container_api, docker_client, tiny_task, run_label, monkeypatch
):
    """make_env_pool on a config naming a cluster (kubeconfig, context), a registry prefix, a
    node selector and limits: the pool's pods carry them, and episodes and grading run there."""
    config = kubernetes_config(
        kubeconfig="/etc/deepswe/kubeconfig",
        context="gpu",
        namespace=NAMESPACE,
        image_prefix="registry.example/",
        node_selector=("pool=envs",),
        active_deadline_s=3600,
    )
    config.env.update(mem_limit="2g", cpus=0.5)
    clusters = []

    def fake_cluster(kubeconfig: str, context: str):
        clusters.append((kubeconfig, context))
        return container_api

    monkeypatch.setattr(experiment.env, "kubernetes_api", fake_cluster)
    pulled = "registry.example/" + tiny_task.image  # what the nodes would pull
    docker_client.images.get(tiny_task.image).tag(pulled)
    first_pod = len(container_api.called("create_namespaced_pod"))
    first_exec = len(container_api.called("connect_get_namespaced_pod_exec"))
    pool = experiment.make_env_pool(config, run_label, grade_concurrency=1)

    async def episode_and_grade():
        async with pool:
            async with pool.acquire(tiny_task) as env:
                step = await env.step("execute_bash", {"cmd": "echo from-config"})
                await env.step(
                    "file_editor",
                    {
                        "command": "str_replace",
                        "path": "/testbed/tinycalc/__init__.py",
                        "old_str": "return a - b",
                        "new_str": "return a + b",
                    },
                )
                patch = await env.patch()
            return step, await pool.grade(tiny_task, patch)

    try:
        step, grade = asyncio.run(episode_and_grade())
    finally:
        docker_client.images.remove(pulled)
    assert clusters == [("/etc/deepswe/kubeconfig", "gpu")]
    # no Docker engine, no image builds
    assert isinstance(pool.placement, FactoryPlacement) and not pool.build_images
    assert "from-config" in step.observation and step.exit_code == 0
    assert grade.status == "resolved", grade.test_log
    pods = [call["body"] for call in container_api.called("create_namespaced_pod")[first_pod:]]
    assert len(pods) == 2  # the episode's pod, then a fresh one for grading
    for pod in pods:
        container = pod.spec.containers[0]
        assert (pod.metadata.namespace, container.image) == (NAMESPACE, pulled)
        assert pod.spec.node_selector == {"pool": "envs"}
        assert pod.spec.active_deadline_seconds == 3600
        assert container.resources.limits["memory"] == "2Gi"
        assert container.resources.limits["cpu"] == "500m"
    names = {pod.metadata.name for pod in pods}
    assert names.isdisjoint(container_api.pods)  # both deleted
    test_runs = [
        call["name"]
        for call in container_api.called("connect_get_namespaced_pod_exec")[first_exec:]
        if "-rA" in " ".join(call["command"])
    ]
    assert test_runs == [pods[1].metadata.name]  # the grading pod ran the tests


# ---------------------------------------------------------------- a real cluster


@pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="KUBECONFIG is not set: no Kubernetes cluster to run against",
)
def test_real_cluster_end_to_end():
    """Against the cluster in KUBECONFIG, namespace $DEEPSWE_K8S_NAMESPACE (default deepswe),
    image $DEEPSWE_K8S_TEST_IMAGE (default deepswe/base:dev; needs python3, git, coreutils;
    with kind: `kind load docker-image deepswe/base:dev`)."""
    from kubernetes import config

    config.load_kube_config()
    api = k8s.CoreV1Api()
    namespace = os.environ.get("DEEPSWE_K8S_NAMESPACE", "deepswe")
    image = os.environ.get("DEEPSWE_K8S_TEST_IMAGE", "deepswe/base:dev")
    label = f"pytest-{uuid.uuid4().hex[:10]}"
    settings = K8sPodSettings(namespace=namespace, image_pull_policy="IfNotPresent")
    runtime = K8sRuntime(image, run_label=label, api=api, settings=settings)
    try:
        runtime.start()
        assert runtime.run("echo hi; exit 4", timeout=TIMEOUT, workdir="/").exit_code == 4
        slow = runtime.run("sleep 1001 & sleep 1002", timeout=2, workdir="/")
        assert (
            slow.timed_out
            and "sleep 100" not in runtime.run("ps -eo args=", timeout=TIMEOUT, workdir="/").output
        )
        data = bytes(range(256)) * 100
        runtime.write_file("/tmp/x/blob.bin", data)
        assert runtime.read_file("/tmp/x/blob.bin") == data
        setup = runtime.run(
            "mkdir -p /tmp/repo && cd /tmp/repo && git init -q && echo a > f && git add f && "
            "git -c user.name=t -c user.email=t@t commit -qm base && git rev-parse HEAD",
            timeout=TIMEOUT,
            workdir="/",
        )
        base = setup.output.split()[-1]
        runtime.write_file("/tmp/repo/f", "b\n")
        assert "+b" in runtime.diff(base, repo="/tmp/repo")
        tool = runtime.call_tool("execute_bash", {"cmd": "echo tool"}, timeout=TIMEOUT)
        assert "tool" in tool.output
        offline = runtime.run(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"",
            timeout=TIMEOUT,
            workdir="/",
        )
        assert offline.exit_code != 0, "env pods must have no network (apply the NetworkPolicy)"
    finally:
        runtime.close()
    assert remove_stale_pods(api, namespace, run_labels=(label,)) in ([], [runtime.name])
