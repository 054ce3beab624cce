"""What a config builds, shared by training, SFT, evaluation, verifiers and samplers: sharding
rules, the policy model and its starting parameters (config.init_from), the tokenizer, the task
list and the environment pool (Docker containers or Kubernetes pods).

    rules = sharding_rules(config)
    params = initial_params(config, make_mesh(...), rules)   # random, HF directory or Orbax
    tokenizer = load_tokenizer(config)
    pool = make_env_pool(config, run_label="eval-run")
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.checkpoint import read_model_config, restore_params, restore_target
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, load_hf_checkpoint
from deepswe_jax.parallel import create_sharded_model, state_shardings
from deepswe_jax.parallel.sharding import Rules

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

    from deepswe_jax.env.k8s_runtime import K8sPodFactory
    from deepswe_jax.env.pool import EnvPool


def sharding_rules(config: ml_collections.ConfigDict) -> Rules:
    """config.sharding_rules as (logical axis, mesh axes) pairs; lists (from a command line or
    JSON) become tuples."""
    return tuple(
        (rule[0], tuple(rule[1]) if isinstance(rule[1], list) else rule[1])
        for rule in config.sharding_rules
    )


def model_factory(config: ml_collections.ConfigDict) -> Callable[[], Qwen3ForCausalLM]:
    """Builds the policy of config.model (seeded by config.seed; dtypes, remat and attention
    kernel from config)."""
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())

    def make_model() -> Qwen3ForCausalLM:
        return Qwen3ForCausalLM(
            model_config,
            rngs=nnx.Rngs(config.seed),
            param_dtype=jnp.dtype(config.param_dtype),
            dtype=jnp.dtype(config.compute_dtype),
            remat=config.remat,
            attention_impl=config.attention,
        )

    return make_model


def _check_model_config(config: ml_collections.ConfigDict, saved: Qwen3Config, source: str) -> None:
    """Raises unless the model saved in `source` has the architecture config.model describes."""
    ours = Qwen3Config.from_hf_dict(config.model.to_dict())
    differing = [
        f"{key}={getattr(ours, key)!r} vs {getattr(saved, key)!r}"
        for key in config.model.keys()
        if getattr(ours, key) != getattr(saved, key)
    ]
    if differing:
        raise ValueError(
            f"config.model differs from the model in {source}: {', '.join(differing)}; set "
            "config.model to that model's config.json fields"
        )


def initial_params(
    config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh, rules: Rules
) -> nnx.State:
    """The policy's starting parameters (nnx.Param state on `mesh`) per config.init_from:
    '' random init, a HF directory (config.json + safetensors), or an Orbax parameters /
    training checkpoint directory."""
    make_model = model_factory(config)
    path = config.init_from
    if not path:
        return nnx.state(create_sharded_model(make_model, mesh, rules), nnx.Param)
    check_init_from(path)
    if os.path.isfile(os.path.join(path, "config.json")):
        _check_model_config(config, Qwen3Config.from_json_file(path), path)
        model = load_hf_checkpoint(
            path,
            dtype=jnp.dtype(config.param_dtype),
            mesh=mesh,
            rules=rules,
            compute_dtype=jnp.dtype(config.compute_dtype),
            remat=config.remat,
        )
        return nnx.state(model, nnx.Param)
    _check_model_config(config, Qwen3Config.from_hf_dict(read_model_config(path), path), path)
    _, abstract_params = nnx.split(nnx.eval_shape(make_model), nnx.Param)
    target = restore_target(abstract_params, state_shardings(abstract_params, mesh, rules))
    return restore_params(path, target)


def check_init_from(path: str) -> None:
    """Raises FileNotFoundError unless config.init_from is '' or a directory."""
    if path and not os.path.isdir(path):
        raise FileNotFoundError(
            f"config.init_from={path!r} is not a directory; give a HF model directory, an Orbax "
            "checkpoint (launch/import_hf.py output) or '' for random init"
        )


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

    backend = config.env.get("backend", "docker")
    if backend not in ENV_BACKENDS:
        raise ValueError(
            f"config.env.backend={backend!r} is not one of {ENV_BACKENDS}; set "
            "--config.env.backend=docker (containers on the local engine or config.env."
            "docker_hosts) or --config.env.backend=kubernetes (pods, config.env.kubernetes.*)"
        )
    options: dict[str, Any] = dict(
        max_envs=config.env.max_envs, run_label=run_label, step_timeout=config.agent.step_timeout
    )
    if grade_concurrency is not None:
        options["grade_concurrency"] = grade_concurrency
    if backend == "kubernetes":
        if config.env.get("docker_hosts"):
            raise ValueError(
                f"config.env.docker_hosts={tuple(config.env.docker_hosts)} is for "
                "backend=docker; clear it (--config.env.docker_hosts='()') to run in pods"
            )
        factory = kubernetes_pod_factory(config)
        return EnvPool(**options, runtime_factory=factory, build_images=False)
    try:
        return EnvPool(
            **options,
            docker_hosts=tuple(config.env.get("docker_hosts", ())),
            envs_per_host=config.env.get("envs_per_host", 0),
            mem_limit=config.env.mem_limit,
            nano_cpus=int(config.env.cpus * 1e9),
            pids_limit=config.env.pids_limit,
            disk_limit=config.env.disk_limit,
            disk_limit_mode=config.env.disk_limit_mode,
        )
    except Exception as error:
        raise RuntimeError(
            f"could not open the Docker environment pool ({error}); episodes run in containers, "
            "so start the Docker engine (check with `docker info`) or set DOCKER_HOST, or run "
            "them in pods (--config.env.backend=kubernetes)"
        ) from error


def kubernetes_pod_factory(config: ml_collections.ConfigDict) -> K8sPodFactory:
    """A K8sPodFactory with config.env.kubernetes's pod settings (the K8sPodSettings fields of
    the same names) and config.env's mem_limit and cpus, talking to the API server of
    `kubernetes_api`."""
    try:
        from deepswe_jax.env.k8s_pods import K8sPodSettings
        from deepswe_jax.env.k8s_runtime import K8sPodFactory
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

    from deepswe_jax.env.k8s_pods import default_core_api

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


def load_tokenizer(config: ml_collections.ConfigDict) -> ChatTokenizer:
    if not config.tokenizer:
        raise ValueError(
            "config.tokenizer is empty; set it to a HF tokenizer directory (the policy's HF "
            "checkpoint, or tests/assets/tokenizer for the tiny model)"
        )
    return ChatTokenizer.from_directory(config.tokenizer)


def apply_jax_memory_settings(config: ml_collections.ConfigDict) -> None:
    """Caps the GPU memory JAX preallocates at config.sampler.jax_memory_fraction (0: JAX's
    default), so a colocated vLLM engine finds the rest free. Only takes effect before JAX
    initializes its backends: call it first thing (launch/train.py does)."""
    fraction = config.sampler.jax_memory_fraction
    if not 0.0 <= fraction < 1.0:
        raise ValueError(
            f"config.sampler.jax_memory_fraction={fraction} must lie in [0, 1) (0 = JAX's default)"
        )
    if fraction:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.3f}"


def prepare_task_images(pool: EnvPool, tasks: Sequence[Task]) -> None:
    """Before any episode: a pool that builds images (Docker) builds the missing task images
    from their `source`, or raises ImageBuildError naming every task whose image is missing and
    cannot be built (instead of each episode failing to start, retried, then given up). A
    Kubernetes pool's nodes pull task images from a registry: nothing to do here."""
    from deepswe_jax.env.images import ensure_task_images

    if pool.build_images:
        ensure_task_images(tasks)


# Config fields an RL run needs above 0 (counts and seconds), and at least 0.
_POSITIVE_FIELDS = (
    "rl.n_rollouts",
    "rl.micro_batch_size",
    "rl.num_iterations",
    "agent.max_steps",
    "agent.max_prompt_tokens",
    "agent.max_context",
    "agent.step_timeout",
    "agent.trajectory_timeout",
    "agent.reward_timeout",
    "sampler.max_batch",
    "env.max_envs",
    "checkpoint.every",
    "checkpoint.keep",
)
_NON_NEGATIVE_FIELDS = ("rl.total_steps", "rl.max_staleness")
SAMPLER_KINDS = ("jax", "vllm")


def check_train_config(
    config: ml_collections.ConfigDict, tasks: Sequence[Task], *, sampler_given: bool = False
) -> None:
    """Raises ValueError naming the first config value an RL run cannot start with (before its
    work directory, model or sampler exist): counts below 1, negative step counts, a
    tasks_per_step the task list cannot fill, an unknown sampler kind (unless `sampler_given`);
    FileNotFoundError for a config.init_from that is not a directory.
    """
    for name in _POSITIVE_FIELDS + _NON_NEGATIVE_FIELDS:
        section, field = name.split(".")
        value = config[section].get(field)
        positive = name in _POSITIVE_FIELDS
        if value is not None and (value <= 0 if positive else value < 0):
            raise ValueError(
                f"config.{name}={value!r} must be {'above' if positive else 'at least'} 0; "
                f"set --config.{name}"
            )
    count = config.rl.tasks_per_step
    if not 0 < count <= len(tasks):
        raise ValueError(
            f"config.rl.tasks_per_step={count} must be between 1 and the number of tasks "
            f"({len(tasks)} in config.env.tasks={config.env.tasks!r}); each task of a step gets "
            "its own rollout group"
        )
    check_init_from(config.init_from)
    if not sampler_given and config.sampler.kind not in SAMPLER_KINDS:
        raise ValueError(
            f"config.sampler.kind={config.sampler.kind!r}; use 'jax' (in-process) or 'vllm' (GPU)"
        )
