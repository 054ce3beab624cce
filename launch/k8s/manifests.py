"""Kubernetes manifests for running environments (and training) on a cluster.

`launch/k8s_manifests.py` writes them for a task file; `cluster_manifests` is the whole set:

  namespace          where env pods (and the training Job) live
  NetworkPolicy      deny all ingress and egress of pods labelled deepswe.role=env
  ServiceAccount,    deepswe-trainer: may create/watch/delete pods, exec in them and read
  Role, RoleBinding  events, in that namespace only (what K8sRuntime needs)
  DaemonSets         pre-pull the task images on every node: one init container per image
                     (it runs `true` and exits), then a pause container keeps the pod alive
  Job                the training run, as deepswe-trainer, with its pod's name and uid in
                     DEEPSWE_POD_* so env pods are garbage-collected with it

The env pods themselves are made by `deepswe_jax.env.k8s.k8s_pods.pod_manifest`; the
NetworkPolicy only takes effect with a network plugin that enforces policies (Calico,
Cilium, kindnet >= 0.24, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from kubernetes import client as k8s

from deepswe_jax.env.k8s.k8s_pods import (
    DEFAULT_NAMESPACE,
    ENV_ROLE,
    OWNER_POD_ENV,
    ROLE_LABEL,
    K8sPodSettings,
    pod_manifest,
)

APP_LABEL = "app.kubernetes.io/name"
TRAINER_ACCOUNT = "deepswe-trainer"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
PREPULL_RESOURCES = {"cpu": "10m", "memory": "32Mi"}
# Pod fields the trainer learns its own identity from (downward API), in OWNER_POD_ENV order.
OWNER_POD_FIELDS = ("metadata.name", "metadata.uid", "metadata.namespace")


def namespace(name: str = DEFAULT_NAMESPACE) -> k8s.V1Namespace:
    return k8s.V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=k8s.V1ObjectMeta(name=name, labels={APP_LABEL: "deepswe"}),
    )


def deny_all_network_policy(namespace: str = DEFAULT_NAMESPACE) -> k8s.V1NetworkPolicy:
    """No traffic in or out of env pods (exec goes through the kubelet, not the pod network)."""
    return k8s.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=k8s.V1ObjectMeta(name="deepswe-env-deny-all", namespace=namespace),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(match_labels={ROLE_LABEL: ENV_ROLE}),
            policy_types=["Ingress", "Egress"],
        ),
    )


def trainer_rbac(namespace: str = DEFAULT_NAMESPACE) -> list[Any]:
    """ServiceAccount, Role and RoleBinding that let a process run K8sRuntime in `namespace`."""
    metadata = k8s.V1ObjectMeta(name=TRAINER_ACCOUNT, namespace=namespace)
    return [
        k8s.V1ServiceAccount(api_version="v1", kind="ServiceAccount", metadata=metadata),
        k8s.V1Role(
            api_version="rbac.authorization.k8s.io/v1",
            kind="Role",
            metadata=metadata,
            rules=[
                k8s.V1PolicyRule(
                    api_groups=[""],
                    resources=["pods"],
                    verbs=["create", "get", "list", "watch", "delete"],
                ),
                k8s.V1PolicyRule(api_groups=[""], resources=["pods/exec"], verbs=["create", "get"]),
                k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"]),
            ],
        ),
        k8s.V1RoleBinding(
            api_version="rbac.authorization.k8s.io/v1",
            kind="RoleBinding",
            metadata=metadata,
            role_ref=k8s.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name=TRAINER_ACCOUNT
            ),
            subjects=[
                k8s.RbacV1Subject(kind="ServiceAccount", name=TRAINER_ACCOUNT, namespace=namespace)
            ],
        ),
    ]


def prepull_daemonsets(
    images: Sequence[str],
    namespace: str = DEFAULT_NAMESPACE,
    *,
    images_per_daemonset: int = 50,
    node_selector: Mapping[str, str] | None = None,
    image_pull_secrets: Sequence[str] = (),
) -> list[k8s.V1DaemonSet]:
    """DaemonSets that pull `images` (deduplicated, in order) onto every node.

    Each image becomes an init container that runs `true`; init containers run one after
    another, so a node holds every image once the pod is Running. Images are split over
    several DaemonSets so one slow image does not hold up the rest and pod specs stay small."""
    if images_per_daemonset < 1:
        raise ValueError(f"images_per_daemonset must be at least 1, got {images_per_daemonset}")
    unique = list(dict.fromkeys(images))
    if not unique:
        raise ValueError("no images to pre-pull; does the task file list any tasks?")
    daemonsets = []
    for start in range(0, len(unique), images_per_daemonset):
        name = f"deepswe-prepull-{start // images_per_daemonset}"
        labels = {APP_LABEL: "deepswe-prepull", "deepswe.prepull": name}
        init_containers = [
            k8s.V1Container(
                name=f"image-{start + i}",
                image=image,
                image_pull_policy="IfNotPresent",
                command=["true"],
                resources=k8s.V1ResourceRequirements(
                    requests=dict(PREPULL_RESOURCES), limits=dict(PREPULL_RESOURCES)
                ),
            )
            for i, image in enumerate(unique[start : start + images_per_daemonset])
        ]
        daemonsets.append(
            k8s.V1DaemonSet(
                api_version="apps/v1",
                kind="DaemonSet",
                metadata=k8s.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
                spec=k8s.V1DaemonSetSpec(
                    selector=k8s.V1LabelSelector(match_labels=labels),
                    template=k8s.V1PodTemplateSpec(
                        metadata=k8s.V1ObjectMeta(labels=labels),
                        spec=k8s.V1PodSpec(
                            automount_service_account_token=False,
                            node_selector=dict(node_selector) if node_selector else None,
                            image_pull_secrets=[
                                k8s.V1LocalObjectReference(name=secret)
                                for secret in image_pull_secrets
                            ]
                            or None,
                            init_containers=init_containers,
                            containers=[
                                k8s.V1Container(
                                    name="pause",
                                    image=PAUSE_IMAGE,
                                    resources=k8s.V1ResourceRequirements(
                                        requests=dict(PREPULL_RESOURCES),
                                        limits=dict(PREPULL_RESOURCES),
                                    ),
                                )
                            ],
                        ),
                    ),
                ),
            )
        )
    return daemonsets


def training_job(
    name: str,
    image: str,
    command: Sequence[str],
    namespace: str = DEFAULT_NAMESPACE,
    *,
    gpus: int = 0,
    working_dir: str = "/workspace",
    workdir_claim: str | None = None,
    workdir_mount: str = "/runs",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> k8s.V1Job:
    """A Job that runs `command` once (no restarts, no retries: the run resumes from its
    checkpoint when started again) as deepswe-trainer, so it may create env pods, with its
    pod's name and uid in DEEPSWE_POD_* so env pods are garbage-collected with it. The one Job
    builder: the cluster manifests' training Job and launch/sweep.py's Jobs.

    workdir_claim: a PersistentVolumeClaim mounted at `workdir_mount` for checkpoints/logs.
    labels / annotations: added to the Job's metadata (labels to its pod's too)."""
    labels = {APP_LABEL: "deepswe-jax", **(labels or {})}
    env = [
        k8s.V1EnvVar(
            name=variable,
            value_from=k8s.V1EnvVarSource(field_ref=k8s.V1ObjectFieldSelector(field_path=path)),
        )
        for variable, path in zip(OWNER_POD_ENV, OWNER_POD_FIELDS, strict=True)
    ]
    container = k8s.V1Container(
        name="train",
        image=image,
        command=list(command),
        working_dir=working_dir,
        env=env,
        resources=k8s.V1ResourceRequirements(limits={"nvidia.com/gpu": str(gpus)})
        if gpus
        else None,
        volume_mounts=[k8s.V1VolumeMount(name="runs", mount_path=workdir_mount)]
        if workdir_claim
        else None,
    )
    volumes = (
        [
            k8s.V1Volume(
                name="runs",
                persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                    claim_name=workdir_claim
                ),
            )
        ]
        if workdir_claim
        else None
    )
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels=labels,
            annotations=dict(annotations) if annotations else None,
        ),
        spec=k8s.V1JobSpec(
            backoff_limit=0,
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels),
                spec=k8s.V1PodSpec(
                    service_account_name=TRAINER_ACCOUNT,
                    restart_policy="Never",
                    containers=[container],
                    volumes=volumes,
                ),
            ),
        ),
    )


def cluster_manifests(
    images: Sequence[str],
    *,
    namespace_name: str = DEFAULT_NAMESPACE,
    train_image: str = "deepswe-jax:latest",
    train_command: Sequence[str] = (),
    gpus: int = 8,
    workdir_claim: str | None = None,
    images_per_daemonset: int = 50,
    image_pull_secrets: Sequence[str] = (),
) -> dict[str, list[Any]]:
    """{file name: manifests} of everything to apply (numbered in apply order), plus
    reference/env-pod.yaml: what K8sRuntime creates for the first image (not to apply)."""
    if not images:
        raise ValueError("no images: does the task file list any tasks?")
    job = training_job(
        "deepswe-train",
        train_image,
        train_command,
        namespace_name,
        gpus=gpus,
        workdir_claim=workdir_claim,
    )
    example = pod_manifest(
        "deepswe-example-0123abcd",
        images[0],
        run_label="example",
        owner="example-host:1234:5678",
        settings=K8sPodSettings(namespace=namespace_name),
    )
    return {
        "00-namespace.yaml": [namespace(namespace_name)],
        "10-env-network-policy.yaml": [deny_all_network_policy(namespace_name)],
        "20-trainer-rbac.yaml": trainer_rbac(namespace_name),
        "30-prepull-daemonsets.yaml": prepull_daemonsets(
            images,
            namespace_name,
            images_per_daemonset=images_per_daemonset,
            image_pull_secrets=image_pull_secrets,
        ),
        "40-train-job.yaml": [job],
        "reference/env-pod.yaml": [example],
    }


def to_plain(manifest: Any) -> dict[str, Any]:
    """A model object as the JSON/YAML document kubectl takes (camelCase keys, no nulls)."""
    return k8s.ApiClient().sanitize_for_serialization(manifest)


class _BlockStringDumper(yaml.SafeDumper):
    """Writes multi-line strings (scripts) as literal blocks, readable as they run."""


_BlockStringDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    ),
)


def to_yaml(manifests: Sequence[Any]) -> str:
    """Model objects as one multi-document YAML text for `kubectl apply -f`."""
    documents = [to_plain(manifest) for manifest in manifests]
    return yaml.dump_all(documents, Dumper=_BlockStringDumper, sort_keys=False)
