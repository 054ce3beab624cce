"""Config checks the root runs before a run creates anything (its work or output directory, a
model, a sampler, a container): each raises naming the first value the run cannot start with
and the flag that sets it, so an invalid config leaves nothing behind to clean up.

    check_train_config(config, tasks)                         # training.train
    check_sft_config(config, num_trajectories=len(data))     # launch/train_sft.py, train_sft
    check_verifier_config(config, workdir)                    # train_verifier
    check_evaluation_config(config, num_runs=8, grade_concurrency=2, agent_runs=True)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import ml_collections

from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment.model import check_init_from
from deepswe_jax.experiment.settings import lora_config
from deepswe_jax.model.paged_kernel import check_paged_kernel
from deepswe_jax.rl.loop import check_tasks_per_step
from deepswe_jax.verify.verifier_training import VERIFIER_DIR

SAMPLER_KINDS = ("jax", "vllm")

# Fields an SFT run needs above 0 and at least 0.
SFT_POSITIVE = (
    "sft.num_steps",
    "sft.batch_size",
    "sft.micro_batch_size",
    "sft.max_per_task",
    "checkpoint.every",
    "checkpoint.keep",
)
SFT_NON_NEGATIVE = ("sft.lr", "sft.warmup_steps", "sft.max_tokens", "sft.grad_clip")
# Fields verifier training needs above 0 and at least 0 (its micro-batches are rl's).
VERIFIER_POSITIVE = (
    "verifier.max_prompt_tokens",
    "verifier.max_per_task",
    "verifier.steps",
    "verifier.batch_size",
    "verifier.eval_every",
    "verifier.eval_batch_size",
    "rl.micro_batch_size",
)
VERIFIER_NON_NEGATIVE = ("verifier.lora_rank", "rl.lr", "rl.warmup_steps", "rl.grad_clip")
# Fields an evaluation needs above 0: the agent's only where an agent runs (not for a fixed
# patch), grading's always.
EVALUATION_POSITIVE = ("env.max_envs", "agent.reward_timeout")
AGENT_POSITIVE = (
    "agent.max_steps",
    "agent.max_prompt_tokens",
    "agent.max_context",
    "agent.step_timeout",
    "agent.trajectory_timeout",
    "sampler.max_batch",
)
# Fields an RL run needs above 0 (counts and seconds) and at least 0.
RL_POSITIVE = (
    "rl.n_rollouts",
    "rl.micro_batch_size",
    "rl.num_iterations",
    "rl.mini_batches",
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
RL_NON_NEGATIVE = ("rl.total_steps", "rl.max_staleness")


def check_counts(
    config: ml_collections.ConfigDict,
    positive: Sequence[str] = (),
    non_negative: Sequence[str] = (),
) -> None:
    """Raises ValueError naming the first of the fields 'section.field' that is not above 0
    (`positive`) or not at least 0 (`non_negative`)."""
    for name in (*positive, *non_negative):
        section, field = name.split(".")
        value = config[section][field]
        above = name in positive
        if value <= 0 if above else value < 0:
            raise ValueError(
                f"config.{name}={value!r} must be {'above' if above else 'at least'} 0; "
                f"set --config.{name}"
            )


def check_sampler_kind(config: ml_collections.ConfigDict) -> None:
    """An unknown sampler kind, or an unknown way for the 'jax' sampler to read a paged cache."""
    if config.sampler.kind not in SAMPLER_KINDS:
        raise ValueError(
            f"config.sampler.kind={config.sampler.kind!r}; use 'jax' (in-process) or 'vllm' (GPU)"
        )
    if config.sampler.kind == "jax" and config.sampler.paged:
        check_paged_kernel(config.sampler.paged_attention)


def check_train_config(
    config: ml_collections.ConfigDict, tasks: Sequence[Task], *, sampler_given: bool = False
) -> None:
    """Raises ValueError naming the first config value an RL run cannot start with (before its
    work directory, model or sampler exist): counts below 1, negative step counts, a
    tasks_per_step the task list cannot fill, an unknown sampler kind (unless `sampler_given`);
    FileNotFoundError for a config.init_from that is not a directory.
    """
    check_counts(config, RL_POSITIVE, RL_NON_NEGATIVE)
    count = config.rl.tasks_per_step
    check_tasks_per_step(count, len(tasks), f" in config.env.tasks={config.env.tasks!r}")
    if count % config.rl.mini_batches:
        raise ValueError(
            f"config.rl.mini_batches={config.rl.mini_batches} must divide "
            f"config.rl.tasks_per_step={count}: each mini-batch holds as many whole task groups"
        )
    check_init_from(config.init_from)
    if not sampler_given:
        check_sampler_kind(config)


def check_sft_config(
    config: ml_collections.ConfigDict, *, num_trajectories: int | None = None
) -> None:
    """What an SFT run (launch/train_sft.py, `train_sft`) cannot start with: counts below 1,
    negative rates and step counts, a config.init_from that is not a directory and, given the
    number of training trajectories, a batch larger than them (a batch holds each at most
    once)."""
    check_counts(config, SFT_POSITIVE, SFT_NON_NEGATIVE)
    check_init_from(config.init_from)
    if num_trajectories is not None and config.sft.batch_size > num_trajectories:
        raise ValueError(
            f"config.sft.batch_size={config.sft.batch_size} is more than the "
            f"{num_trajectories} training trajectories; lower --config.sft.batch_size or add data"
        )


def check_verifier_config(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> None:
    """What verifier training cannot start with: counts below 1, a held-out fraction outside
    [0, 1), a LoRA scale that is not positive or targets that are not kernels, a config.init_from that is not a directory, and
    a `workdir` that already holds a verifier (found before training, not when saving it)."""
    check_counts(config, VERIFIER_POSITIVE, VERIFIER_NON_NEGATIVE)
    verifier = config.verifier
    if not 0.0 <= verifier.heldout_fraction < 1.0:
        raise ValueError(
            f"config.verifier.heldout_fraction={verifier.heldout_fraction!r} must lie in [0, 1) "
            "(the share of tasks held out for the AUC); set --config.verifier.heldout_fraction"
        )
    if verifier.lora_rank > 0 and verifier.lora_alpha <= 0:
        raise ValueError(
            f"config.verifier.lora_alpha={verifier.lora_alpha!r} must be above 0 with LoRA "
            "(lora_rank > 0); set --config.verifier.lora_alpha"
        )
    lora_config(config)  # unknown lora_targets
    check_init_from(config.init_from)
    saved = Path(workdir) / VERIFIER_DIR
    if saved.exists():
        raise FileExistsError(
            f"{saved} holds a verifier already; pass a new --workdir or delete it first"
        )


def check_evaluation_config(
    config: ml_collections.ConfigDict, *, num_runs: int, grade_concurrency: int, agent_runs: bool
) -> None:
    """What an evaluation cannot start with (before its output directory, env pool or policy
    exist): fewer than 1 run per task or grading at once, and the config's counts and seconds
    below 1; where an agent runs (`agent_runs`, a policy directory) also its limits and the
    sampler's kind and batch."""
    if num_runs < 1:
        raise ValueError(f"--num_runs={num_runs} must be at least 1 (the k of pass@k)")
    if grade_concurrency < 1:
        raise ValueError(f"--grade_concurrency={grade_concurrency} must be at least 1")
    check_counts(config, EVALUATION_POSITIVE + (AGENT_POSITIVE if agent_runs else ()))
    if agent_runs:
        check_sampler_kind(config)
