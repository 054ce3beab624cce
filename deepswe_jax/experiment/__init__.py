"""The composition root: the only code that reads a config and builds objects from it.

Library packages (model/, parallel/, env/, sampling/, agent/, rl/, verify/, checkpoint/)
take typed settings (frozen dataclasses) and objects; this package turns an ml_collections
config (configs/common.py declares every field) into them. launch/ scripts, tests and
benchmarks call it; nothing in the library imports it (tests/test_import_rules.py). The
launch scripts' flags go through deepswe_jax.cli, which refuses an override of an undeclared
config field before any work.

    settings.py      config sections -> EpisodeSettings, LoopSettings, OptimizerSettings, ...
    model.py         device mesh, sharding rules, the policy model and its starting
                     parameters (config.init_from), tokenizer, a policy directory's config
    env.py           task list, env pool (Docker containers or Kubernetes pods)
    training.py      trainer, rollout sampler; RL, SFT and verifier training runs
    evaluation.py    evaluation and expert runs
    serving.py       a sampler process's checkpoint follower
    memory_plan.py   bytes per device of a config's training step (launch/plan_memory.py)
    sampler_memory_plan.py
                     bytes per device of a config's sampler, vLLM or JAX
                     (launch/plan_memory.py --sampler)
    checks.py        config checks of SFT, verifier training and evaluation before any work
"""

from deepswe_jax.experiment.checks import (
    check_evaluation_config,
    check_sft_config,
    check_train_config,
    check_verifier_config,
)
from deepswe_jax.experiment.env import (
    ENV_BACKENDS,
    grading_runtime_factory,
    kubernetes_api,
    kubernetes_pod_factory,
    load_task_list,
    make_env_pool,
    node_labels,
    prepare_task_images,
)
from deepswe_jax.experiment.evaluation import (
    load_agent_policy,
    make_scorer,
    run_evaluation,
    run_expert,
)
from deepswe_jax.experiment.model import (
    abstract_model,
    check_init_from,
    device_mesh,
    initial_params,
    load_tokenizer,
    model_factory,
    policy_config,
    sharding_rules,
)
from deepswe_jax.experiment.serving import checkpoint_follower
from deepswe_jax.experiment.settings import (
    agent_interface,
    checkpoint_settings,
    docker_settings,
    episode_settings,
    loop_settings,
    lora_config,
    loss_settings,
    optimizer_settings,
    sft_optimizer_settings,
    sft_settings,
    update_settings,
    verifier_settings,
)
from deepswe_jax.experiment.training import (
    OBJECTIVES,
    apply_jax_memory_settings,
    make_sampler,
    make_trainer,
    serving_sampler,
    train,
    train_sft,
    train_verifier,
    verifier_model,
)

__all__ = [
    "ENV_BACKENDS",
    "OBJECTIVES",
    "abstract_model",
    "check_evaluation_config",
    "check_init_from",
    "check_sft_config",
    "check_train_config",
    "check_verifier_config",
    "prepare_task_images",
    "apply_jax_memory_settings",
    "agent_interface",
    "checkpoint_follower",
    "checkpoint_settings",
    "docker_settings",
    "device_mesh",
    "episode_settings",
    "grading_runtime_factory",
    "initial_params",
    "kubernetes_api",
    "kubernetes_pod_factory",
    "load_agent_policy",
    "load_task_list",
    "load_tokenizer",
    "loop_settings",
    "lora_config",
    "loss_settings",
    "make_env_pool",
    "make_sampler",
    "make_scorer",
    "make_trainer",
    "serving_sampler",
    "model_factory",
    "node_labels",
    "optimizer_settings",
    "policy_config",
    "run_evaluation",
    "run_expert",
    "sft_optimizer_settings",
    "sft_settings",
    "sharding_rules",
    "train",
    "train_sft",
    "train_verifier",
    "update_settings",
    "verifier_model",
    "verifier_settings",
]
