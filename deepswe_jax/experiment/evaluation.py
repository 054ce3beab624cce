"""Evaluation and expert runs from a config: the env pool, the policy in its sampler, the
candidate scorer (`make_scorer`), the episode settings, all built here for
verify.evaluation.run / verify.expert.

    run_evaluation(config, "/tmp/run/checkpoints", "/tmp/eval", tasks=tasks, num_runs=8)
    trajectories = run_expert(config, tasks, output_path=workdir / "expert.jsonl")
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Sequence
from typing import Any

import ml_collections
from flax import nnx

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.runtime import RuntimeFactory
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment.checks import check_evaluation_config
from deepswe_jax.experiment.env import grading_runtime_factory, make_env_pool
from deepswe_jax.experiment.model import (
    abstract_model,
    device_mesh,
    initial_params,
    load_tokenizer,
    policy_config,
    sharding_rules,
)
from deepswe_jax.experiment.settings import episode_settings
from deepswe_jax.experiment.training import serving_sampler
from deepswe_jax.verify.evaluation import run, scoring
from deepswe_jax.verify.evaluation.predictions import PREDICTIONS_POLICY, PredictionsPolicy
from deepswe_jax.verify.evaluation.run import FIXED_PATCH_POLICIES, AgentPolicy
from deepswe_jax.verify.expert import collect_expert_trajectories
from deepswe_jax.verify.select import SELECTOR_SCORES, SELECTORS
from deepswe_jax.verify.verifier import load_verifier


def load_agent_policy(config: ml_collections.ConfigDict, *, seed: int) -> AgentPolicy:
    """The policy of config.init_from in the sampler of config.sampler on config.mesh, with the
    tokenizer of config.tokenizer."""
    rules = sharding_rules(config)
    mesh = device_mesh(config)
    params = initial_params(config, mesh, rules)
    graphdef, _ = nnx.split(abstract_model(config), nnx.Param)
    sampler = serving_sampler(config, nnx.merge(graphdef, params), mesh, rules, seed)
    return AgentPolicy(sampler, load_tokenizer(config))


def make_scorer(
    selectors: Sequence[str],
    *,
    verifier_dir: str | os.PathLike | None,
    timeout: float,
    workers: int,
    run_label: str,
    runtime_factory: RuntimeFactory | None,
) -> scoring.CandidateScorer | None:
    """The scorer `selectors` need: the verifier saved in `verifier_dir` for 'verifier' / 'hybrid',
    execution checks (`timeout` seconds per test run, `workers` containers at once, made by
    `runtime_factory`: the env pool's, None for local Docker) for 'execution' / 'hybrid'; None
    without selectors."""
    unknown = sorted(set(selectors) - set(SELECTORS))
    if unknown:
        raise ValueError(f"unknown selectors {unknown}; choose from {sorted(SELECTORS)}")
    needed = set().union(*(SELECTOR_SCORES[name] for name in selectors))
    scorers = []
    if "verifier" in needed:
        if verifier_dir is None:
            raise ValueError(
                f"selectors {sorted(selectors)} need an execution-free verifier; pass its "
                "directory (launch/evaluate.py --verifier=DIR; launch/train_verifier.py writes "
                "<workdir>/verifier)"
            )
        scorers.append(scoring.verifier_scorer(load_verifier(verifier_dir)))
    if needed & {"regression", "reproduction"}:
        scorers.append(
            scoring.execution_scorer(
                timeout=timeout,
                workers=workers,
                run_label=run_label,
                runtime_factory=runtime_factory,
            )
        )
    return scoring.combine_scorers(*scorers) if scorers else None


def run_evaluation(
    config: ml_collections.ConfigDict,
    policy: str | PredictionsPolicy,
    output_dir: str | os.PathLike,
    *,
    tasks: Sequence[Task],
    num_runs: int,
    model_name: str | None = None,
    selectors: Sequence[str] = (),
    verifier_dir: str | os.PathLike | None = None,
    grade_concurrency: int = 2,
    show_progress: bool = True,
    process_id: int = 0,
    num_processes: int = 1,
) -> dict[str, Any]:
    """`verify.evaluation.run.run_evaluation` with everything built from `config`: the env pool of
    config.env.backend, for a policy directory (`policy_config`) the policy in its sampler
    (loaded once the output directory's settings are checked), and the scorer `selectors`
    need (execution checks run on the pool's backend). Returns the summary.

    policy: 'gold', 'empty', a predictions file's patches or a policy directory. model_name:
    default `policy` for gold / empty, the file's model_name_or_path for predictions, else the
    directory's name. process_id / num_processes: this process's share.
    """
    agent_runs = not (isinstance(policy, PredictionsPolicy) or policy in FIXED_PATCH_POLICIES)
    check_evaluation_config(
        config, num_runs=num_runs, grade_concurrency=grade_concurrency, agent_runs=agent_runs
    )
    # Bad agent settings are refused before anything starts (a fixed patch runs no agent).
    episode = episode_settings(config, agent_runs=agent_runs)
    run_label = f"eval-{uuid.uuid4().hex[:8]}"
    pool = make_env_pool(config, run_label, grade_concurrency=grade_concurrency)
    scorer = make_scorer(
        selectors,
        verifier_dir=verifier_dir,
        timeout=config.agent.reward_timeout,
        workers=grade_concurrency,
        run_label=run_label,
        runtime_factory=grading_runtime_factory(config, pool),  # its disk limit
    )
    if isinstance(policy, PredictionsPolicy):
        policy_name = PREDICTIONS_POLICY
        model_name = model_name or policy.model_name
        load_policy = policy
    elif policy in FIXED_PATCH_POLICIES:
        policy_name = policy
        model_name = model_name or policy
        load_policy = policy
    else:
        config = policy_config(config, policy)
        policy_name = config.init_from
        model_name = model_name or os.path.basename(policy_name)

        def load_policy() -> AgentPolicy:
            return load_agent_policy(config, seed=config.seed)

    return run.run_evaluation(
        tasks,
        load_policy,
        output_dir,
        env_pool=pool,
        episode=episode,
        seed=config.seed,
        num_runs=num_runs,
        policy_name=policy_name,
        model_name=model_name,
        selectors=selectors,
        scorer=scorer,
        show_progress=show_progress,
        process_id=process_id,
        num_processes=num_processes,
    )


def run_expert(
    config: ml_collections.ConfigDict,
    tasks: Sequence[Task],
    *,
    output_path: str | os.PathLike | None = None,
    run_label: str = "expert",
) -> list[Trajectory]:
    """`verify.expert.collect_expert_trajectories` through the env pool of config.env (Docker,
    building missing images, or Kubernetes pods), with the tokenizer of config.tokenizer,
    config.agent's budgets and interface and config.sft.expert_script."""
    tokenizer = load_tokenizer(config)

    async def collect() -> list[Trajectory]:
        async with make_env_pool(config, run_label) as pool:
            return await collect_expert_trajectories(
                tasks,
                pool,
                tokenizer,
                episode_settings(config),
                script=config.sft.expert_script,
                output_path=output_path,
            )

    return asyncio.run(collect())
