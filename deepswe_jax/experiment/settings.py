"""Config sections -> the typed settings the library packages take (one function each)."""

from __future__ import annotations

import ml_collections

from deepswe_jax.agent.interface import (
    DEEPSWE_JAX,
    INTERFACES,
    R2EGYM,
    AgentInterface,
    DeepSweJaxInterface,
)
from deepswe_jax.agent.r2egym import PromptFileError, R2EGymInterface, load_prompts
from deepswe_jax.agent.rollout import EpisodeSettings
from deepswe_jax.env.docker.settings import DockerSettings
from deepswe_jax.model.lora import LoRAConfig
from deepswe_jax.rl.batch import row_length_buckets
from deepswe_jax.rl.loop import LoopSettings, UpdateSettings
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import OptimizerSettings
from deepswe_jax.rl.rollout_correction import RolloutCorrectionSettings
from deepswe_jax.rl.run_directory import CheckpointSettings
from deepswe_jax.rl.sft import SFTSettings
from deepswe_jax.verify.verifier_training import VerifierTrainingSettings


def agent_interface(config: ml_collections.ConfigDict) -> AgentInterface:
    """The interface config.agent.interface names; 'r2egym' reads its prompts from
    config.agent.prompts_file (`agent.r2egym.load_prompts`).

    Raises:
      ValueError: an unknown interface, or a prompts file that is missing (none given
        included) or malformed, naming the setting to change.
    """
    name, prompts_file = config.agent.interface, config.agent.prompts_file
    prompt = config.agent.prompt
    if name == DEEPSWE_JAX:
        if prompts_file:
            raise ValueError(
                f"config.agent.prompts_file={prompts_file!r} is only read by "
                "config.agent.interface='r2egym'; clear it, or set the interface to r2egym"
            )
        return DeepSweJaxInterface(prompt=prompt)
    if name == R2EGYM:
        if prompt != "full":
            raise ValueError(
                f"config.agent.prompt={prompt!r} is a style of our interface only; "
                "'r2egym' shows the prompts of config.agent.prompts_file: set prompt='full'"
            )
        try:
            return R2EGymInterface(load_prompts(prompts_file))
        except PromptFileError as error:
            raise ValueError(f"config.agent.prompts_file={prompts_file!r}: {error}") from None
    raise ValueError(
        f"config.agent.interface={name!r} is not one of {', '.join(INTERFACES)}; "
        "'deepswe_jax' is ours, 'r2egym' R2E-Gym's as DeepSWE-Preview was trained with"
    )


def episode_settings(
    config: ml_collections.ConfigDict, *, agent_runs: bool = True
) -> EpisodeSettings:
    """config.agent's limits and interface and config.sampler's sampling parameters; refuses
    bad agent settings (`agent_interface`). agent_runs=False: for grading fixed patches, where
    no agent runs, so the interface settings are not read (ours stands in)."""
    agent, sampler = config.agent, config.sampler
    return EpisodeSettings(
        max_steps=agent.max_steps,
        max_prompt_tokens=agent.max_prompt_tokens,
        max_context=agent.max_context,
        trajectory_timeout=agent.trajectory_timeout,
        reward_timeout=agent.reward_timeout,
        submit_notice_tokens=agent.submit_notice_tokens,
        temperature=sampler.temperature,
        top_p=sampler.top_p,
        top_k=sampler.top_k,
        interface=agent_interface(config) if agent_runs else DeepSweJaxInterface(),
        seed=config.seed if sampler.seeded_requests else None,
    )


def docker_settings(config: ml_collections.ConfigDict) -> DockerSettings:
    """config.env's Docker hosts and container limits (config.env.cpus as nano-CPUs)."""
    return DockerSettings(
        hosts=tuple(config.env.docker_hosts),
        envs_per_host=config.env.envs_per_host,
        mem_limit=config.env.mem_limit,
        nano_cpus=int(config.env.cpus * 1e9),
        pids_limit=config.env.pids_limit,
        disk_limit=config.env.disk_limit,
        disk_limit_mode=config.env.disk_limit_mode,
    )


def optimizer_settings(
    section: ml_collections.ConfigDict, decay_steps: int = 0
) -> OptimizerSettings:
    """AdamW of config.rl or config.sft (they share the optimizer fields)."""
    return OptimizerSettings(
        lr=section.lr,
        b1=section.b1,
        b2=section.b2,
        weight_decay=section.weight_decay,
        grad_clip=section.grad_clip,
        warmup_steps=section.warmup_steps,
        decay_steps=decay_steps,
    )


def sft_optimizer_settings(config: ml_collections.ConfigDict) -> OptimizerSettings:
    """config.sft's AdamW; with sft.cosine_decay the learning rate reaches 0 at sft.num_steps."""
    sft = config.sft
    return optimizer_settings(sft, decay_steps=sft.num_steps if sft.cosine_decay else 0)


def loss_settings(config: ml_collections.ConfigDict) -> LossSettings:
    """GRPO++'s hyperparameters (config.rl), its constant (agent.max_context) and the
    sampler's temperature, so trainer and sampler score the same distribution."""
    return LossSettings(
        mode=config.rl.loss_mode,
        eps_low=config.rl.eps_low,
        eps_high=config.rl.eps_high,
        max_response_len=config.agent.max_context,
        sequences=config.rl.loss_sequences,
        logprob_chunk=config.rl.logprob_chunk,
        loss_position_buckets=config.rl.loss_position_buckets,
        temperature=config.sampler.temperature,
        rollout_correction=rollout_correction_settings(config),
    )


def rollout_correction_settings(config: ml_collections.ConfigDict) -> RolloutCorrectionSettings:
    """config.rl.rollout_correction in verl's terms ('' = None: off)."""
    section = config.rl.rollout_correction
    return RolloutCorrectionSettings(
        rollout_is=section.rollout_is or None,
        rollout_is_threshold=section.rollout_is_threshold,
        rollout_rs=section.rollout_rs or None,
        rollout_rs_threshold=section.rollout_rs_threshold or None,
    )


def update_settings(config: ml_collections.ConfigDict) -> UpdateSettings:
    """config.rl's batching; rows are padded to rl.length_buckets, () meaning powers of two up
    to the longest trajectory (agent.max_prompt_tokens + agent.max_context)."""
    rl = config.rl
    longest = config.agent.max_prompt_tokens + config.agent.max_context
    return UpdateSettings(
        micro_batch_size=rl.micro_batch_size,
        advantage=rl.advantage,
        compact_filtering=rl.compact_filtering,
        length_buckets=row_length_buckets(longest, rl.length_buckets),
        num_iterations=rl.num_iterations,
        mini_batches=rl.mini_batches,
    )


def loop_settings(config: ml_collections.ConfigDict) -> LoopSettings:
    rl = config.rl
    return LoopSettings(
        total_steps=rl.total_steps,
        tasks_per_step=rl.tasks_per_step,
        n_rollouts=rl.n_rollouts,
        update=update_settings(config),
        seed=config.seed,
        overlap=rl.overlap,
        max_staleness=rl.max_staleness,
        processes_per_engine=config.sampler.processes_per_engine,
    )


def checkpoint_settings(config: ml_collections.ConfigDict) -> CheckpointSettings:
    checkpoint = config.checkpoint
    return CheckpointSettings(
        every=checkpoint.every, keep=checkpoint.keep, async_save=checkpoint.async_save
    )


def sft_settings(config: ml_collections.ConfigDict) -> SFTSettings:
    sft = config.sft
    return SFTSettings(
        num_steps=sft.num_steps,
        batch_size=sft.batch_size,
        micro_batch_size=sft.micro_batch_size,
        length_buckets=tuple(sft.length_buckets),
        max_tokens=sft.max_tokens,
        seed=config.seed,
    )


def verifier_settings(config: ml_collections.ConfigDict) -> VerifierTrainingSettings:
    verifier = config.verifier
    return VerifierTrainingSettings(
        max_per_task=verifier.max_per_task,
        heldout_fraction=verifier.heldout_fraction,
        steps=verifier.steps,
        batch_size=verifier.batch_size,
        eval_every=verifier.eval_every,
        eval_batch_size=verifier.eval_batch_size,
        micro_batch_size=config.rl.micro_batch_size,
        seed=config.seed,
    )


def lora_config(config: ml_collections.ConfigDict) -> LoRAConfig | None:
    """The verifier's LoRA adapters (config.verifier.lora_*); None for lora_rank 0 (full
    fine-tuning)."""
    verifier = config.verifier
    if verifier.lora_rank == 0:
        return None
    return LoRAConfig(
        rank=verifier.lora_rank, alpha=verifier.lora_alpha, targets=tuple(verifier.lora_targets)
    )
