"""Evaluate a policy on a task set: k runs per task, each graded, then the outputs of the
evaluation package (`deepswe_jax.verify.evaluation`).

    await evaluate(tasks, policy, output_dir, num_runs=16, env_pool=pool, episode=settings, seed=0)

Policies: 'gold' grades each task's own patch, 'empty' grades no patch (both check the task
set and the grader, no episodes), a `PredictionsPolicy` grades a SWE-bench predictions file's
patches (`predictions.read_predictions`: any agent's output), or an `AgentPolicy` (sampler + tokenizer) whose episodes
run in containers (`agent.rollout.run_episode`) with the `EpisodeSettings`' limits and
sampling parameters. experiment.run_evaluation builds pool, policy and scorer from a config.

Resuming: started again on the same output_dir, finished (task, run) pairs are read back from
trajectories.jsonl (`store`) and skipped; pairs whose grading hit an infrastructure error are
run again. Outputs are rewritten from all finished pairs (`summary.write_results`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tqdm

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.interface import DEEPSWE_JAX
from deepswe_jax.agent.r2egym import R2EGymInterface
from deepswe_jax.agent.rollout import EpisodeSettings, RolloutContext, run_episode
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.docker.images import ensure_task_images
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.sampling.base import Sampler
from deepswe_jax.verify.evaluation.predictions import PREDICTIONS_POLICY, PredictionsPolicy
from deepswe_jax.verify.evaluation.scoring import CandidateScorer, score_candidates
from deepswe_jax.verify.evaluation.shards import prepare_shard
from deepswe_jax.verify.evaluation.store import (
    check_or_write_identity,
    score_store,
    trajectory_store,
)
from deepswe_jax.verify.evaluation.summary import write_results
from deepswe_jax.verify.select import SELECTORS, CandidateScores

logger = logging.getLogger(__name__)

FIXED_PATCH_POLICIES: dict[str, Callable[[Task], str]] = {
    "gold": lambda task: task.patch,
    "empty": lambda task: "",
}


@dataclass(frozen=True)
class AgentPolicy:
    """A policy that works in containers: `sampler` generates, `tokenizer` builds the chat."""

    sampler: Sampler
    tokenizer: ChatTokenizer
    policy_version: int = 0


def load_eval_tasks(path: str | os.PathLike, instance_ids: Sequence[str] = ()) -> list[Task]:
    """The tasks of `path`, or only `instance_ids` of them (in that order)."""
    tasks = load_tasks(path)
    if not instance_ids:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    missing = sorted(set(instance_ids) - set(by_id))
    if missing:
        raise ValueError(f"instance ids not in {path}: {missing}; check the names or the task file")
    return [by_id[instance_id] for instance_id in instance_ids]


def eval_identity(
    policy_name: str,
    model_name: str,
    episode: EpisodeSettings,
    predictions: PredictionsPolicy | None = None,
) -> dict:
    """The settings that decide an evaluation's results; a resumed run must have the same
    (for a predictions file, the same file contents)."""
    identity: dict[str, Any] = {"policy": policy_name, "model_name_or_path": model_name}
    if predictions is not None:
        identity.update(predictions=predictions.source, predictions_sha256=predictions.digest)
    elif policy_name not in FIXED_PATCH_POLICIES:
        identity.update(
            max_steps=episode.max_steps,
            max_prompt_tokens=episode.max_prompt_tokens,
            max_context=episode.max_context,
            temperature=float(episode.temperature),
            top_p=float(episode.top_p),
            top_k=episode.top_k,
        )
        interface = episode.interface
        if interface.name != DEEPSWE_JAX:  # ours is the default, not recorded
            identity.update(interface=interface.name)
        if isinstance(interface, R2EGymInterface):
            identity.update(prompts_file=interface.prompts.source)
    return identity


def fixed_patch_trajectory(
    task: Task, run_index: int, patch: str, grade: GradeResult, seconds: float
) -> Trajectory:
    """The record of grading a given patch (no episode: no tokens, no steps)."""
    return Trajectory(
        task_id=task.instance_id,
        rollout_index=run_index,
        policy_version=0,
        prompt_ids=(),
        token_ids=(),
        loss_mask=(),
        sampler_logprobs=(),
        reward=grade.reward,
        stop_reason=StopReason.finished,
        infra_error=grade.infra_error,
        num_steps=0,
        patch=patch,
        timings={"grading_s": grade.duration_s, "total_s": seconds},
        steps=(),
        grade=grade,
    )


async def run_pair(
    task: Task,
    run_index: int,
    policy: str | PredictionsPolicy | AgentPolicy,
    env_pool: EnvPool,
    episode: EpisodeSettings,
) -> Trajectory:
    """Run `task` once with `policy` (an episode, or grading a fixed patch) and grade it."""
    if isinstance(policy, AgentPolicy):
        context = RolloutContext(env_pool, policy.sampler, policy.tokenizer, episode)
        return await run_episode(context, task, run_index, policy.policy_version)
    started = time.perf_counter()
    if isinstance(policy, PredictionsPolicy):
        patch = policy.patch(task)
    else:
        patch = FIXED_PATCH_POLICIES[policy](task)
    grade = await env_pool.grade(task, patch, timeout=episode.reward_timeout)
    return fixed_patch_trajectory(task, run_index, patch, grade, time.perf_counter() - started)


async def evaluate(
    tasks: Sequence[Task],
    policy: str | PredictionsPolicy | AgentPolicy,
    output_dir: str | os.PathLike,
    *,
    num_runs: int,
    env_pool: EnvPool,
    episode: EpisodeSettings,
    seed: int,
    model_name: str,
    policy_name: str | None = None,
    selectors: Sequence[str] = (),
    scorer: CandidateScorer | None = None,
    max_subsets: int = 1000,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Runs (or resumes) the evaluation of the module docstring; returns the summary.

    policy: 'gold', 'empty', a PredictionsPolicy or an AgentPolicy. episode: the episodes' limits, reward timeout and
    sampling parameters. seed: draws Best@k's k-subsets. model_name: model_name_or_path of the
    predictions. policy_name: recorded in eval_config.json (default: `policy` for fixed
    patches, `model_name` otherwise). selectors: names in `select.SELECTORS`, scored with
    `scorer`, reported as Best@k curves averaged over up to `max_subsets` k-subsets per task.
    """
    if num_runs < 1:
        raise ValueError(f"num_runs must be at least 1, got {num_runs}")
    if isinstance(policy, str) and policy not in FIXED_PATCH_POLICIES:
        raise ValueError(
            f"policy {policy!r} is neither one of {sorted(FIXED_PATCH_POLICIES)} nor an AgentPolicy"
        )
    unknown = sorted(set(selectors) - set(SELECTORS))
    if unknown:
        raise ValueError(f"unknown selectors {unknown}; choose from {sorted(SELECTORS)}")
    if selectors and scorer is None:
        raise ValueError(f"selectors {list(selectors)} need a candidate scorer")
    predictions = policy if isinstance(policy, PredictionsPolicy) else None
    if predictions is not None:
        if num_runs != 1:
            raise ValueError(f"a predictions file holds one run per task; got num_runs={num_runs}")
        missing = [
            task.instance_id for task in tasks if task.instance_id not in predictions.patches
        ]
        if missing:
            raise ValueError(
                f"{predictions.source} has no prediction for {missing[:3]}; evaluate only "
                "predicted tasks (predictions.predicted_tasks)"
            )
    ids = [task.instance_id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("the task set names some instance_id twice; give each task once")

    started = time.perf_counter()
    output_dir = Path(output_dir)
    if policy_name is None:
        policy_name = (
            policy if isinstance(policy, str) else PREDICTIONS_POLICY if predictions else model_name
        )
    identity = eval_identity(policy_name, model_name, episode, predictions)
    check_or_write_identity(output_dir, identity)
    store = trajectory_store(output_dir)
    pairs = [(task, r) for task in tasks for r in range(num_runs)]
    done = {
        (task.instance_id, r): store.records[task.instance_id, r]
        for task, r in pairs
        if (task.instance_id, r) in store.records
        and not store.records[task.instance_id, r].infra_error
    }
    todo = [(task, r) for task, r in pairs if (task.instance_id, r) not in done]
    logger.info(
        "evaluating %s: %d tasks x %d runs; %d pairs already done, running %d",
        policy_name,
        len(tasks),
        num_runs,
        len(done),
        len(todo),
    )
    resolved_count = sum(t.resolved for t in done.values())
    with tqdm.tqdm(
        total=len(pairs),
        initial=len(done),
        desc=f"eval {model_name}",
        disable=not show_progress,
    ) as progress:
        progress.set_postfix(resolved=resolved_count, refresh=False)

        async def run_and_store(task: Task, run_index: int) -> None:
            nonlocal resolved_count
            trajectory = await run_pair(task, run_index, policy, env_pool, episode)
            store.add(trajectory, trajectory.to_json())
            resolved_count += trajectory.resolved
            progress.set_postfix(resolved=resolved_count, refresh=False)
            progress.update(1)

        jobs = [asyncio.ensure_future(run_and_store(task, r)) for task, r in todo]
        try:
            await asyncio.gather(*jobs)
        except BaseException:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            raise

    scores: dict[str, list[CandidateScores]] = {}
    if selectors:
        scores = await score_candidates(
            tasks,
            store.records,
            num_runs,
            scorer,
            score_store(output_dir),
            {task.instance_id for task, _ in todo},
            show_progress,
        )
    return write_results(
        output_dir,
        ids,
        store.records,
        num_runs,
        identity=identity,
        scores=scores,
        selectors=selectors,
        seed=seed,
        max_subsets=max_subsets,
        session={"pairs_run_this_session": len(todo), "wall_s": time.perf_counter() - started},
    )


def run_evaluation(
    tasks: Sequence[Task],
    policy: str | PredictionsPolicy | Callable[[], AgentPolicy],
    output_dir: str | os.PathLike,
    *,
    env_pool: EnvPool,
    episode: EpisodeSettings,
    seed: int,
    num_runs: int,
    policy_name: str,
    model_name: str,
    selectors: Sequence[str] = (),
    scorer: CandidateScorer | None = None,
    show_progress: bool = True,
    process_id: int = 0,
    num_processes: int = 1,
) -> dict[str, Any]:
    """`evaluate` in its own event loop with `env_pool` (entered here; a Docker pool builds
    missing task images first); returns the summary (of this process's share).

    policy: 'gold', 'empty', a PredictionsPolicy, or a function that loads the AgentPolicy, called only once the
    output directory's settings are checked (its sampler is closed at the end). With
    num_processes > 1, evaluates only this process's share of the tasks into its shard folder
    (`shards.prepare_shard`). experiment.run_evaluation builds every argument from a config.
    """
    predictions = policy if isinstance(policy, PredictionsPolicy) else None
    if num_processes > 1:
        output_dir, tasks = prepare_shard(
            tasks,
            output_dir,
            process_id,
            num_processes,
            identity=eval_identity(policy_name, model_name, episode, predictions),
            num_runs=num_runs,
            selectors=selectors,
            seed=seed,
        )
    if env_pool.build_images:  # a Kubernetes pool's nodes pull task images from a registry
        ensure_task_images(tasks)
    agent_policy = None if isinstance(policy, (str, PredictionsPolicy)) else policy()

    async def run() -> dict[str, Any]:
        async with env_pool:
            return await evaluate(
                tasks,
                agent_policy or policy,
                output_dir,
                num_runs=num_runs,
                env_pool=env_pool,
                episode=episode,
                seed=seed,
                model_name=model_name,
                policy_name=policy_name,
                selectors=selectors,
                scorer=scorer,
                show_progress=show_progress,
            )

    try:
        return asyncio.run(run())
    finally:
        if agent_policy is not None:
            agent_policy.sampler.close()
