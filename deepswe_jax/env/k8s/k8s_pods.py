"""Kubernetes env pods: their settings, their manifest, and the API calls on them that
are not one runtime's (retries, deletion, stale cleanup). `k8s_runtime` runs environments in
them.

`K8sPodSettings` holds every setting of an env pod (namespace, registry prefix, limits, node
selector, deadlines), declared once; `pod_manifest`, `k8s_runtime.K8sRuntime` and
`k8s_runtime.K8sPodFactory` take it.

The pod (`pod_manifest`): one container from the task image whose PID 1 is a tiny
Python reaper (`POD_INIT`: immune to the agent's `kill -9 -1` or `pkill python`, and it
reaps orphans so killed process trees never pile up as zombies); requests equal to
limits (Guaranteed QoS); `restartPolicy: Never`; `activeDeadlineSeconds` as the last
bound on a leaked pod; no service account token; and the label `deepswe.role=env`
that the deny-all NetworkPolicy of launch/k8s selects (pods have no network).

API calls are retried with exponential backoff on 409, 429 (honouring Retry-After),
5xx and connection errors (`retry_api`).

Labels and cleanup follow DockerRuntime: `deepswe.run=<run label>`, and the creator's
identity `<host>:<pid>:<start time>` in the annotation `deepswe.owner` (label values
cannot hold ':'). `remove_stale_pods` deletes pods of dead creators on this host and of
given run labels. When the creator runs in a pod of the same namespace that names itself
in DEEPSWE_POD_NAME, DEEPSWE_POD_UID and DEEPSWE_POD_NAMESPACE (the training Job does, see
launch/k8s), that pod owns the env pods, so the cluster's garbage collector deletes them
with it.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import urllib3.exceptions
from kubernetes import client as k8s

from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL, owner_is_alive
from deepswe_jax.env.runtime import TESTBED
from deepswe_jax.env.tools import python_command

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_NAMESPACE = "deepswe"
CONTAINER_NAME = "env"
# Selected by the deny-all NetworkPolicy (launch/k8s); every env pod carries it.
ROLE_LABEL = "deepswe.role"
ENV_ROLE = "env"
# Set (downward API) in the training Job's pod so env pods get it as their owner.
OWNER_POD_ENV = ("DEEPSWE_POD_NAME", "DEEPSWE_POD_UID", "DEEPSWE_POD_NAMESPACE")
START_TIMEOUT_S = 300.0
# A leaked pod lives at most this long (a DeepSWE episode is <= 5400 s, grading 300 s).
ACTIVE_DEADLINE_S = 4 * 3600
API_TIMEOUT_S = 60.0
TRANSIENT_STATUSES = frozenset({0, 409, 429}) | frozenset(range(500, 600))

# PID 1 of every env pod: reap orphans; SIGINT back to default so only SIGKILL from
# outside the pod (its deletion) ends it.
POD_INIT = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(1)\n"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# ---------------------------------------------------------------- settings and manifest


def memory_quantity(mem_limit: str | int) -> str:
    """A Docker-style memory limit ("1g", "512m", bytes) as a Kubernetes quantity ("1Gi").

    Kubernetes quantities ("2Gi", "500M") pass through unchanged."""
    text = str(mem_limit).strip()
    match = re.fullmatch(r"(\d+)([bkmgBKMG]?)", text)
    if match:
        number, unit = match.groups()
        return number + {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[unit.lower()]
    if re.fullmatch(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)", text):
        return text
    raise ValueError(
        f"memory limit {mem_limit!r} is neither Docker style (1g, 512m) nor a "
        "Kubernetes quantity (1Gi, 512Mi)"
    )


def cpu_quantity(cpus: float) -> str:
    """CPUs as a Kubernetes quantity in millicores: 1.0 -> "1000m"."""
    if cpus <= 0:
        raise ValueError(f"cpus must be positive, got {cpus}")
    return f"{max(1, round(cpus * 1000))}m"


def check_label_value(value: str, what: str) -> str:
    """`value` if it is a valid Kubernetes label value, else a ValueError saying why."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Kubernetes label value (at most 63 characters of "
            "letters, digits, '-', '_', '.', starting and ending with a letter or digit); "
            "choose another"
        )
    return value


@dataclass(frozen=True)
class K8sPodSettings:
    """Every setting of an env pod, checked when made (from config.env.kubernetes and
    config.env's mem_limit and cpus; launch/k8s/README.md's table).

    namespace: where the pods live; the NetworkPolicy of launch/k8s must be applied there.
    image_prefix: put before each task image, e.g. "registry.example.com/" turns
      deepswe/datewise:base into registry.example.com/deepswe/datewise:base (where the images
      were pushed; `launch/k8s_manifests.py --image_prefix` pre-pulls the same names).
    mem_limit, cpus, ephemeral_storage: requests and limits of the pod (equal: Guaranteed
      QoS); mem_limit Docker style ("1g") or a Kubernetes quantity ("1Gi").
    image_pull_policy: the container's imagePullPolicy.
    node_selector: node labels the pods must run on (None: any node).
    start_timeout_s: how long a start waits for the pod to run (scheduling, image pull).
    active_deadline_s: activeDeadlineSeconds, the last bound on a leaked pod.
    """

    namespace: str = DEFAULT_NAMESPACE
    image_prefix: str = ""
    mem_limit: str | int = "1g"
    cpus: float = 1.0
    ephemeral_storage: str = "10Gi"
    image_pull_policy: str = "IfNotPresent"
    node_selector: Mapping[str, str] | None = None
    start_timeout_s: float = START_TIMEOUT_S
    active_deadline_s: int = ACTIVE_DEADLINE_S

    def __post_init__(self):
        self.resources()  # bad limits fail here, not when a pod starts

    def resources(self) -> dict[str, str]:
        """The pod's requests (= limits) as Kubernetes quantities."""
        return {
            "cpu": cpu_quantity(self.cpus),
            "memory": memory_quantity(self.mem_limit),
            "ephemeral-storage": self.ephemeral_storage,
        }


DEFAULT_POD_SETTINGS = K8sPodSettings()


def owner_pod_reference(namespace: str) -> k8s.V1OwnerReference | None:
    """This process's pod as an owner reference, when it runs in a pod of `namespace` that
    names itself in OWNER_POD_ENV (a cross-namespace owner would get env pods deleted)."""
    name, uid, pod_namespace = (os.environ.get(key) for key in OWNER_POD_ENV)
    if not (name and uid and pod_namespace == namespace):
        return None
    return k8s.V1OwnerReference(api_version="v1", kind="Pod", name=name, uid=uid)


def pod_manifest(
    name: str,
    image: str,
    *,
    run_label: str,
    owner: str,
    settings: K8sPodSettings = DEFAULT_POD_SETTINGS,
    owner_reference: k8s.V1OwnerReference | None = None,
) -> k8s.V1Pod:
    """The env pod for one environment (see the module docstring for what each part is for);
    `image` is the full image name (K8sRuntime puts settings.image_prefix before it)."""
    resources = settings.resources()
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=settings.namespace,
            labels={
                RUN_LABEL: check_label_value(run_label, "run label"),
                ROLE_LABEL: ENV_ROLE,
            },
            annotations={OWNER_LABEL: owner},
            owner_references=[owner_reference] if owner_reference else None,
        ),
        spec=k8s.V1PodSpec(
            restart_policy="Never",
            active_deadline_seconds=settings.active_deadline_s,
            automount_service_account_token=False,
            enable_service_links=False,
            termination_grace_period_seconds=0,
            node_selector=dict(settings.node_selector) if settings.node_selector else None,
            containers=[
                k8s.V1Container(
                    name=CONTAINER_NAME,
                    image=image,
                    image_pull_policy=settings.image_pull_policy,
                    command=python_command(["-c", POD_INIT]),
                    working_dir=TESTBED,
                    resources=k8s.V1ResourceRequirements(
                        requests=dict(resources), limits=dict(resources)
                    ),
                )
            ],
        ),
    )


def pod_name(run_label: str) -> str:
    """A fresh DNS-1123 pod name: deepswe-<run label>-<8 hex>."""
    safe = re.sub(r"[^a-z0-9-]+", "-", run_label.lower())[:40].strip("-") or "run"
    return f"deepswe-{safe}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- API calls on pods


def is_transient(error: BaseException) -> bool:
    """Whether an API error is worth retrying: 409, 429, 5xx, connection failures."""
    if isinstance(error, k8s.ApiException):
        return error.status in TRANSIENT_STATUSES
    return isinstance(error, (urllib3.exceptions.HTTPError, ConnectionError))


def _retry_after_s(error: BaseException) -> float:
    headers = getattr(error, "headers", None) or {}
    try:
        return float(headers.get("Retry-After", 0))
    except (TypeError, ValueError):
        return 0.0


def retry_api(
    call: Callable[[], T],
    what: str,
    *,
    attempts: int = 6,
    first_delay_s: float = 0.5,
    max_delay_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, retried with exponential backoff while it fails transiently (`is_transient`);
    the last error is raised after `attempts` tries."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (k8s.ApiException, urllib3.exceptions.HTTPError, ConnectionError) as e:
            if not is_transient(e) or attempt == attempts:
                raise
            wait_s = min(max(delay, _retry_after_s(e)), max_delay_s)
            logger.warning(
                "%s failed (%s); retry %d/%d in %.1fs",
                what,
                short_error(e),
                attempt,
                attempts - 1,
                wait_s,
            )
            sleep(wait_s)
            delay *= 2
    raise AssertionError("unreachable")


def short_error(error: BaseException) -> str:
    if isinstance(error, k8s.ApiException):
        return f"HTTP {error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


def default_core_api() -> k8s.CoreV1Api:
    """A CoreV1Api from the in-cluster service account, else from KUBECONFIG / ~/.kube/config."""
    from kubernetes import config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return k8s.CoreV1Api()


def remove_stale_pods(
    api: k8s.CoreV1Api,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    run_labels: tuple[str, ...] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Delete env pods whose creating process (on this host) is dead, and every env pod of the
    given run labels. Returns the names deleted."""
    pods = retry_api(
        lambda: api.list_namespaced_pod(
            namespace, label_selector=RUN_LABEL, _request_timeout=API_TIMEOUT_S
        ),
        f"listing pods in {namespace}",
        sleep=sleep,
    )
    removed = []
    for pod in pods.items:
        labels = pod.metadata.labels or {}
        owner = (pod.metadata.annotations or {}).get(OWNER_LABEL)
        stale = labels.get(RUN_LABEL) in run_labels or (
            owner is not None and owner_is_alive(owner) is False
        )
        if stale and delete_pod(api, pod.metadata.name, namespace, sleep=sleep):
            removed.append(pod.metadata.name)
    if removed:
        logger.info("removed %d stale deepswe pods from %s", len(removed), namespace)
    return removed


def delete_pod(
    api: k8s.CoreV1Api, name: str, namespace: str, *, sleep: Callable[[float], None] = time.sleep
) -> bool:
    """Delete pod `name` at once (no grace period); False if it was already gone."""
    try:
        retry_api(
            lambda: api.delete_namespaced_pod(
                name,
                namespace,
                grace_period_seconds=0,
                propagation_policy="Background",
                _request_timeout=API_TIMEOUT_S,
            ),
            f"deleting pod {name}",
            sleep=sleep,
        )
    except k8s.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def describe_pod(pod: k8s.V1Pod) -> str:
    """Phase, unmet conditions and container states of a pod, in one line."""
    status = pod.status
    if status is None:
        return "phase unknown"
    parts = [f"phase {status.phase}"]
    for condition in status.conditions or ():
        if condition.status != "True" and (condition.reason or condition.message):
            parts.append(f"{condition.type} {condition.reason}: {condition.message}")
    for container in status.container_statuses or ():
        state = container.state
        if state is None:
            continue
        if state.waiting is not None:
            parts.append(f"waiting {state.waiting.reason}: {state.waiting.message}")
        if state.terminated is not None:
            terminated = state.terminated
            parts.append(
                f"terminated {terminated.reason} (exit code {terminated.exit_code}): "
                f"{terminated.message}"
            )
    return ", ".join(parts)
