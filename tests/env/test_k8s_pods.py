"""K8sRuntime's pods against `FakeCoreV1Api` (tests/env/k8s_fakes.py): the pod's manifest,
retries and backoff of the API calls, the watch until the pod runs, and the removal of stale
pods by label.
"""

from __future__ import annotations

import socket
import subprocess

import pytest
from kubernetes import client as k8s

from deepswe_jax.env.k8s import k8s_pods
from deepswe_jax.env.k8s.k8s_pods import POD_INIT, K8sPodSettings, remove_stale_pods
from deepswe_jax.env.k8s.k8s_runtime import ClusterAccessError, K8sRuntime
from deepswe_jax.env.ownership import LIVE_RUNTIMES, OWNER_LABEL, RUN_LABEL, owner_label
from deepswe_jax.env.runtime import EnvironmentUnavailableError, MissingImageError
from deepswe_jax.env.tools import python_command
from tests.env.k8s_fakes import (
    NAMESPACE,
    FakeCoreV1Api,
    Sleeps,
    api_error,
    make_runtime,
    pod_status,
    running_status,
    waiting_status,
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
    terminated = k8s.V1ContainerStateTerminated(
        exit_code=127, reason="Error", message="python3: not found"
    )
    failed = pod_status("Failed", k8s.V1ContainerState(terminated=terminated))
    api = FakeCoreV1Api(statuses=[failed])
    with pytest.raises(EnvironmentUnavailableError, match="exit code 127"):
        make_runtime(api).start()


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
