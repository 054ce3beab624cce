"""What a config says about environments: the task list and the env pool (Docker containers
or Kubernetes pods) that episodes, grading and execution checks run in.

    tasks = load_task_list(config)
    pool = make_env_pool(config, run_label="eval-run")
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ml_collections

from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.experiment.settings import docker_settings

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

    from deepswe_jax.env.k8s.k8s_runtime import K8sPodFactory
    from deepswe_jax.env.pool import EnvPool
    from deepswe_jax.env.runtime import RuntimeFactory


ENV_BACKENDS = ("docker", "kubernetes")


def make_env_pool(
    config: ml_collections.ConfigDict, run_label: str, *, grade_concurrency: int | None = None
) -> EnvPool:
    """An EnvPool for config.env.backend with config.env.max_envs and config.agent.step_timeout;
    `grade_concurrency` gradings at once (None: EnvPool's default).

    'docker': containers with config.env's limits on config.env.docker_hosts (default the local
    engine), task images built when missing. 'kubernetes': pods of `kubernetes_pod_factory`
    (episodes and grading), task images pulled from config.env.kubernetes.image_prefix's
    registry.
    """
    from deepswe_jax.env.pool import EnvPool

    backend = config.env.backend
    if backend not in ENV_BACKENDS:
        raise ValueError(
            f"config.env.backend={backend!r} is not one of {ENV_BACKENDS}; set "
            "--config.env.backend=docker (containers on the local engine or config.env."
            "docker_hosts) or --config.env.backend=kubernetes (pods, config.env.kubernetes.*)"
        )
    options: dict[str, Any] = dict(
        max_envs=config.env.max_envs,
        run_label=run_label,
        step_timeout=config.agent.step_timeout,
        max_patch_bytes=config.env.max_patch_bytes,
    )
    if grade_concurrency is not None:
        options["grade_concurrency"] = grade_concurrency
    if backend == "kubernetes":
        if config.env.docker_hosts:
            raise ValueError(
                f"config.env.docker_hosts={tuple(config.env.docker_hosts)} is for "
                "backend=docker; clear it (--config.env.docker_hosts='()') to run in pods"
            )
        factory = kubernetes_pod_factory(config)
        return EnvPool(**options, runtime_factory=factory, build_images=False)
    try:
        return EnvPool(**options, docker_settings=docker_settings(config))
    except Exception as error:
        raise RuntimeError(
            f"could not open the Docker environment pool ({error}); episodes run in containers, "
            "so start the Docker engine (check with `docker info`) or set DOCKER_HOST, or run "
            "them in pods (--config.env.backend=kubernetes)"
        ) from error


def grading_runtime_factory(config: ml_collections.ConfigDict, pool: EnvPool) -> RuntimeFactory:
    """Where checks outside the pool's own grading (execution checks) run: the pool's runtime
    factory (Kubernetes pods), else Docker containers on the local engine with grading's memory
    and config.env's disk limit, as the pool's own gradings."""
    if pool.runtime_factory is not None:
        return pool.runtime_factory
    from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory
    from deepswe_jax.env.grading.grading import GRADING_MEM_LIMIT

    return DockerRuntimeFactory(
        mem_limit=GRADING_MEM_LIMIT,
        disk_limit=config.env.disk_limit,
        disk_limit_mode=config.env.disk_limit_mode,
    )


def kubernetes_pod_factory(config: ml_collections.ConfigDict) -> K8sPodFactory:
    """A K8sPodFactory with config.env.kubernetes's pod settings (the K8sPodSettings fields of
    the same names) and config.env's mem_limit and cpus, talking to the API server of
    `kubernetes_api`."""
    try:
        from deepswe_jax.env.k8s.k8s_pods import K8sPodSettings
        from deepswe_jax.env.k8s.k8s_runtime import K8sPodFactory
    except ImportError as error:
        raise ImportError(
            f"config.env.backend='kubernetes' needs the Kubernetes client ({error}); install it "
            'with `pip install -e ".[k8s]"`'
        ) from error

    settings = config.env.kubernetes
    from_env = dict(
        mem_limit=config.env.mem_limit,
        cpus=config.env.cpus,
        node_selector=node_labels(settings.node_selector) or None,
    )
    names = [field.name for field in dataclasses.fields(K8sPodSettings)]
    pod_settings = K8sPodSettings(  # checked before any API call
        **{name: from_env[name] if name in from_env else settings[name] for name in names}
    )
    return K8sPodFactory(
        api=kubernetes_api(settings.kubeconfig, settings.context), settings=pod_settings
    )


def kubernetes_api(kubeconfig: str, context: str) -> CoreV1Api:
    """A CoreV1Api from the kubeconfig file `kubeconfig` and its `context` ('' for either: the
    default, $KUBECONFIG or ~/.kube/config and its current context); both '': the in-cluster
    service account when running in a pod, else the default kubeconfig."""
    from kubernetes import client
    from kubernetes import config as kube_config

    from deepswe_jax.env.k8s.k8s_pods import default_core_api

    try:
        if not kubeconfig and not context:
            return default_core_api()
        api_client = kube_config.new_client_from_config(
            config_file=kubeconfig or None, context=context or None
        )
    except (kube_config.ConfigException, OSError) as error:
        raise RuntimeError(
            f"could not load Kubernetes credentials ({error}); run in a pod with a service account "
            "(launch/k8s), or set --config.env.kubernetes.kubeconfig=<kubeconfig file> (and "
            ".context=<name>)"
        ) from error
    return client.CoreV1Api(api_client)


def node_labels(pairs: Sequence[str]) -> dict[str, str]:
    """('key=value', ...) as {key: value}; a string without '=' is a ValueError."""
    labels = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not (key and equals):
            raise ValueError(
                f"config.env.kubernetes.node_selector entry {pair!r} is not 'key=value'; write "
                "node labels as e.g. \"('cloud.google.com/gke-nodepool=envs',)\""
            )
        labels[key] = value
    return labels


def load_task_list(config: ml_collections.ConfigDict) -> list[Task]:
    path = Path(config.env.tasks)
    if not path.exists():
        raise FileNotFoundError(
            f"config.env.tasks={str(path)!r} does not exist (relative to {os.getcwd()}); run from "
            "the repository root or pass --config.env.tasks=/path/to/tasks.jsonl"
        )
    return load_tasks(path)


def prepare_task_images(pool: EnvPool, tasks: Sequence[Task]) -> None:
    """Before any episode: a pool that builds images (Docker) builds the missing task images
    from their `source`, or raises ImageBuildError naming every task whose image is missing and
    cannot be built (instead of each episode failing to start, retried, then given up). A
    Kubernetes pool's nodes pull task images from a registry: nothing to do here."""
    from deepswe_jax.env.docker.images import ensure_task_images

    if pool.build_images:
        ensure_task_images(tasks)
