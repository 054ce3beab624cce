"""Training runs from a config: the trainer, the rollout sampler, and RL, SFT and verifier
training with every part built here and handed to the library loop.

    train(config, workdir)                          # GRPO++ (rl.loop.train), launch/train.py
    train_sft(config, workdir, trajectories)        # SFT (rl.sft.train_sft), launch/train_sft.py
    train_verifier(config, workdir, trajectories, problem_statements)   # launch/train_verifier.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment.checks import (
    check_sft_config,
    check_train_config,
    check_verifier_config,
)
from deepswe_jax.experiment.env import load_task_list, make_env_pool, prepare_task_images
from deepswe_jax.experiment.model import (
    abstract_model,
    device_mesh,
    initial_params,
    load_tokenizer,
    sharding_rules,
)
from deepswe_jax.experiment.settings import (
    checkpoint_settings,
    episode_settings,
    loop_settings,
    lora_config,
    loss_settings,
    optimizer_settings,
    sft_optimizer_settings,
    sft_settings,
    verifier_settings,
)
from deepswe_jax.model import Qwen3ForCausalLM
from deepswe_jax.model.lora import LoRAParam, apply_lora
from deepswe_jax.parallel import make_mesh
from deepswe_jax.parallel.distributed import host_copy
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.rl import loop, sft
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import learning_rate_schedule, make_optimizer
from deepswe_jax.rl.run_directory import RunDirectory
from deepswe_jax.rl.train_step import Trainer, TrainState
from deepswe_jax.sampling.base import Sampler
from deepswe_jax.verify import verifier_training
from deepswe_jax.verify.verifier import VerifierPrompt

if TYPE_CHECKING:
    from deepswe_jax.env.pool import EnvPool

# What a Trainer optimizes: GRPO++ on rollouts, or the NLL of SFT data / verifier answers.
OBJECTIVES = ("grpo", "sft", "verifier")


def make_trainer(
    config: ml_collections.ConfigDict,
    mesh: jax.sharding.Mesh,
    rules: Rules,
    *,
    objective: str = "grpo",
    model: Qwen3ForCausalLM | None = None,
) -> Trainer:
    """The jitted, sharded train step of `objective` for config.model on `mesh`.

    'grpo': AdamW of config.rl, GRPO++ settings (`loss_settings`). 'sft': AdamW of config.sft
    (cosine decay with sft.cosine_decay), NLL scored at temperature 1 (SFT fits the model's own
    distribution, whatever temperature the sampler later uses). 'verifier': AdamW of config.rl,
    NLL; only LoRA adapters train when `model` has them. model: the network whose structure
    trains (default: config.model's policy, abstract).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
    head = {
        "logprob_chunk": config.rl.logprob_chunk,
        "loss_position_buckets": config.rl.loss_position_buckets,
    }
    optimizer, loss, loss_fn = {
        "grpo": (optimizer_settings(config.rl), loss_settings(config), None),
        "sft": (
            sft_optimizer_settings(config),
            LossSettings(**head, temperature=1.0),
            sft.NegativeLogLikelihoodLoss(),
        ),
        "verifier": (
            optimizer_settings(config.rl),
            LossSettings(**head),
            sft.NegativeLogLikelihoodLoss(),
        ),
    }[objective]
    return Trainer(
        abstract_model(config) if model is None else model,
        make_optimizer(optimizer),
        loss,
        mesh=mesh,
        rules=rules,
        peak_flops_per_device=config.rl.peak_flops_per_device,
        learning_rate=learning_rate_schedule(optimizer),
        loss_fn=loss_fn,
        trainable=LoRAParam if objective == "verifier" and lora_config(config) else nnx.Param,
        # RL and SFT batches hold one trajectory per row, so attention may take sequence
        # lengths (cuDNN); verifier batches stay packable.
        packed_rows=objective == "verifier",
    )


def make_sampler(
    config: ml_collections.ConfigDict,
    model: Qwen3ForCausalLM,
    mesh: jax.sharding.Mesh,
    rules: Rules,
    seed: int,
) -> Sampler:
    """The sampler of config.sampler.kind for the policy `model`, with room for
    agent.max_prompt_tokens + agent.max_context tokens per sequence:

    'jax': an in-process JaxSampler serving `model`'s weights on `mesh` (config.sampler.max_batch
    rows; with config.sampler.paged, a pool of max_cache_tokens in pages, else as many full rows
    as max_cache_tokens allows), computing in config.sampler.dtype. 'vllm': an in-process vLLM
    engine per config.sampler.* for config.model's architecture; its weights arrive with the first
    `sync_weights` (the RL loop publishes them before the first rollout; `serving_sampler` syncs
    `model`'s).
    """
    sampler = config.sampler
    max_len = config.agent.max_prompt_tokens + config.agent.max_context
    if sampler.kind == "vllm":
        from deepswe_jax.sampling.vllm_engine import VLLMSettings
        from deepswe_jax.sampling.vllm_sampler import VLLMSampler

        settings = VLLMSettings(
            max_model_len=max_len,
            max_batch=sampler.max_batch,
            dtype=sampler.dtype,
            device=sampler.device,
            gpu_memory_utilization=sampler.gpu_memory_utilization,
            kv_cache_bytes=sampler.kv_cache_bytes,
            tensor_parallel_size=sampler.tensor_parallel_size,
            sleep=sampler.sleep,
            seed=seed,
        )
        return VLLMSampler(
            abstract_model(config),
            settings,
            hf_dir=sampler.hf_dir,
            processes_per_engine=sampler.processes_per_engine,
        )
    if sampler.kind != "jax":
        raise ValueError(
            f"config.sampler.kind={sampler.kind!r}; use 'jax' (in-process) or 'vllm'; scripted "
            "samplers are passed to experiment.train(..., sampler=...)"
        )
    if sampler.processes_per_engine != 1:
        raise ValueError(
            "config.sampler.processes_per_engine applies to kind='vllm'; JaxSampler runs one "
            "sampler per process (set it to 1)"
        )
    from deepswe_jax.sampling.jax_sampler import JaxSampler

    dtype = jnp.dtype(sampler.dtype)
    if dtype != model.dtype:
        # A copy computing (and caching keys and values) in the sampler's dtype; its weights
        # stay in param_dtype and each matmul casts them, as the trainer's compute does.
        model = nnx.merge(*nnx.split(model))
        model.dtype = dtype
    return JaxSampler(
        model,
        max_batch=sampler.max_batch,
        max_cache_len=max_len,
        max_cache_tokens=sampler.max_cache_tokens or None,
        prefix_caching=sampler.prefix_caching,
        paged=sampler.paged,
        paged_attention=sampler.paged_attention,
        mesh=mesh,
        rules=rules,
        seed=seed,
    )


def serving_sampler(
    config: ml_collections.ConfigDict,
    model: Qwen3ForCausalLM,
    mesh: jax.sharding.Mesh,
    rules: Rules,
    seed: int,
) -> Sampler:
    """`make_sampler`, serving `model`'s weights from the start whatever the kind (evaluation,
    a sampler process): a vLLM engine gets them by one sync."""
    sampler = make_sampler(config, model, mesh, rules, seed)
    if config.sampler.kind == "vllm":
        sampler.sync_weights(nnx.state(model, nnx.Param))
    return sampler


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


def train(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    *,
    sampler: Sampler | None = None,
    env_pool: EnvPool | None = None,
    tasks: Sequence[Task] | None = None,
    show_progress: bool = True,
) -> TrainState:
    """Runs (or resumes) GRPO++ training of `config` in `workdir` (rl.loop.train); returns the
    final state.

    sampler / env_pool / tasks: use these instead of the ones config describes (tests pass a
    ScriptedSampler and an in-memory pool); the caller closes what it passes. The rollout
    sampler runs on the training mesh, or with several processes on each process's devices.
    The config, tasks, tokenizer and environments (task images) are checked before `workdir`
    is created, so a run that cannot start leaves nothing behind.
    """
    episode = episode_settings(config)  # refuses bad agent settings before anything starts
    tasks = list(tasks) if tasks is not None else load_task_list(config)
    tokenizer = load_tokenizer(config)
    check_train_config(config, tasks, sampler_given=sampler is not None)
    rules = sharding_rules(config)
    trainer = make_trainer(config, device_mesh(config), rules)
    with contextlib.ExitStack() as stack:
        if env_pool is None:  # before the model loads: a missing Docker engine fails fast
            pool = make_env_pool(config, run_label=f"train-{Path(workdir).resolve().name}")
            stack.callback(lambda: asyncio.run(pool.close()))
            prepare_task_images(pool, tasks)  # missing images: fail before any rollout
            env_pool = pool
        run_dir = stack.enter_context(
            RunDirectory(
                workdir,
                config.to_dict(),
                checkpoint_settings(config),
                model_config=config.model.to_dict(),
            )
        )

        def rollout_sampler(params: nnx.State, seed: int) -> Sampler:
            if sampler is not None:
                return sampler
            mesh = trainer.mesh
            if config.sampler.kind == "jax" and jax.process_count() > 1:
                # Each process samples on its own devices, from a whole copy (a collective).
                params = host_copy(params)
                mesh = make_mesh(1, -1, 1, devices=jax.local_devices())
            built = make_sampler(config, nnx.merge(trainer.graphdef, params), mesh, rules, seed)
            stack.callback(built.close)
            return built

        return loop.train(
            run_dir=run_dir,
            trainer=trainer,
            initial_params=lambda: initial_params(config, trainer.mesh, rules),
            make_sampler=rollout_sampler,
            env_pool=env_pool,
            tasks=tasks,
            tokenizer=tokenizer,
            episode=episode,
            settings=loop_settings(config),
            show_progress=show_progress,
        )


def train_sft(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    trajectories: Sequence[Trajectory],
) -> TrainState:
    """Fine-tunes config.model (from config.init_from) on `trajectories` for config.sft.num_steps
    optimizer steps in `workdir` (rl.sft.train_sft; resumes); returns the final state. The
    config is checked (`check_sft_config`) before the work directory is created."""
    check_sft_config(config, num_trajectories=len(trajectories))
    with RunDirectory(
        workdir, config.to_dict(), checkpoint_settings(config), model_config=config.model.to_dict()
    ) as run_dir:
        rules = sharding_rules(config)
        trainer = make_trainer(config, device_mesh(config), rules, objective="sft")
        return sft.train_sft(
            run_dir=run_dir,
            trainer=trainer,
            initial_params=lambda: initial_params(config, trainer.mesh, rules),
            trajectories=trajectories,
            settings=sft_settings(config),
        )


def verifier_model(
    config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh, rules: Rules
) -> Qwen3ForCausalLM:
    """The verifier to train: config.init_from (or random init) on `mesh`, with LoRA adapters
    when config.verifier.lora_rank > 0."""
    graphdef, _ = nnx.split(abstract_model(config), nnx.Param)
    model = nnx.merge(graphdef, initial_params(config, mesh, rules))
    lora = lora_config(config)
    if lora is not None:
        apply_lora(model, lora, rngs=nnx.Rngs(config.seed + 1))
    return model


def train_verifier(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    trajectories: Sequence[Trajectory],
    problem_statements: Mapping[str, str],
) -> dict:
    """Trains, evaluates and saves a verifier (verify.verifier_training) of config.verifier;
    returns the summary. The config and `workdir` are checked (`check_verifier_config`) before
    anything is built or written."""
    check_verifier_config(config, workdir)
    settings = verifier_settings(config)
    prompt = VerifierPrompt(
        load_tokenizer(config), max_prompt_tokens=config.verifier.max_prompt_tokens
    )
    data = verifier_training.verifier_data(trajectories, problem_statements, prompt, settings)
    rules = sharding_rules(config)
    mesh = device_mesh(config)
    model = verifier_model(config, mesh, rules)
    trainer = make_trainer(config, mesh, rules, objective="verifier", model=model)
    return verifier_training.train_verifier(
        workdir,
        trainer,
        nnx.state(model, nnx.Param),
        prompt,
        data,
        settings,
        model_config=config.model.to_dict(),
        tokenizer_dir=config.tokenizer,
        compute_dtype=config.compute_dtype,
    )
