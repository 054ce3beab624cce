"""The agent loop end to end through Docker: real EnvPool, real tools, real grader, shipped tasks.

The scripted policy views the file the gold patch touches, applies the patch hunk by
hunk with `file_editor str_replace`, and calls finish; every episode must be graded
resolved with reward 1. Budget stops must release their containers.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import docker
import pytest

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.rollout import (
    EpisodeSettings,
    RolloutContext,
    collect_rollouts,
    initial_messages,
    run_episode,
)
from deepswe_jax.agent.scripted_policy import gold_patch_replies, reply_ids
from deepswe_jax.agent.trajectory import StopReason, read_trajectories
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_FILE = REPO_ROOT / "tasks" / "tasks.jsonl"
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"


@pytest.fixture(scope="module")
def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        pytest.fail(
            f"no Docker engine answers ({e}); start dockerd (.ci/run does this)", pytrace=False
        )
    return client


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(TOKENIZER_DIR)


@pytest.fixture(scope="module")
def shipped_tasks() -> list[Task]:
    """The first task of every shipped repository."""
    first_of_repo: dict[str, Task] = {}
    for task in load_tasks(TASKS_FILE):
        first_of_repo.setdefault(task.repo, task)
    return list(first_of_repo.values())


@pytest.fixture
def run_label(docker_client: docker.DockerClient):
    label = f"pytest-agent-{uuid.uuid4().hex[:8]}"
    yield label
    for container in docker_client.containers.list(
        all=True, filters={"label": f"deepswe.run={label}"}
    ):
        container.remove(force=True)


def containers_of(client: docker.DockerClient, label: str) -> list:
    return client.containers.list(all=True, filters={"label": f"deepswe.run={label}"})


def make_settings(**agent) -> EpisodeSettings:
    limits = dict(
        max_steps=10,
        max_prompt_tokens=4096,
        max_context=16384,
        trajectory_timeout=600.0,
        reward_timeout=300.0,
    )
    return EpisodeSettings(**{**limits, **agent})


def test_gold_patch_policy_resolves_shipped_tasks(
    docker_client,
    shipped_tasks: list[Task],
    tokenizer: ChatTokenizer,
    run_label: str,
    tmp_path: Path,
):
    assert len(shipped_tasks) >= 2
    replies = {task.instance_id: gold_patch_replies(task) for task in shipped_tasks}
    script_for_prompt = {
        tuple(tokenizer.prompt_ids(initial_messages(task))): [
            reply_ids(tokenizer, reply) for reply in replies[task.instance_id]
        ]
        for task in shipped_tasks
    }
    sampler = ScriptedSampler(lambda prompt: script_for_prompt[prompt])
    settings = make_settings()
    out = tmp_path / "iter_000000.jsonl"

    async def collect():
        async with EnvPool(
            max_envs=3, run_label=run_label, client=docker_client, step_timeout=60
        ) as pool:
            return await collect_rollouts(
                RolloutContext(pool, sampler, tokenizer, settings),
                shipped_tasks,
                1,
                0,
                output_path=out,
                show_progress=False,
            )

    trajectories = asyncio.run(collect())
    for task, trajectory in zip(shipped_tasks, trajectories, strict=True):
        failed = [s["observation"] for s in trajectory.steps if "ERROR" in s.get("observation", "")]
        assert not failed, f"{task.instance_id}: a scripted step failed: {failed}"
        assert trajectory.stop_reason is StopReason.finished, trajectory.steps
        assert trajectory.grade.status == "resolved", trajectory.grade.test_log[-2000:]
        assert trajectory.reward == 1.0 and not trajectory.infra_error
        assert trajectory.num_steps == len(replies[task.instance_id])
        assert trajectory.patch.strip() and "diff --git" in trajectory.patch
        assert sum(trajectory.loss_mask) == sum(
            len(ids) for ids in script_for_prompt[trajectory.prompt_ids]
        )
    assert read_trajectories(out) == trajectories
    assert containers_of(docker_client, run_label) == []


def test_budget_stops_release_containers(
    docker_client, shipped_tasks: list[Task], tokenizer: ChatTokenizer, run_label: str
):
    task = shipped_tasks[0]
    chatter = reply_ids(tokenizer, "<think>\nHmm.\n</think>\n\nNot sure yet.")
    sleep = reply_ids(tokenizer, render_function_call("execute_bash", {"cmd": "sleep 30"}))

    async def episodes():
        # The timed-out episode's patch waits for its in-flight tool call: keep that short.
        async with EnvPool(
            max_envs=2, run_label=run_label, client=docker_client, step_timeout=5
        ) as pool:
            no_tool = run_episode(
                RolloutContext(
                    pool, ScriptedSampler([chatter] * 2), tokenizer, make_settings(max_steps=2)
                ),
                task,
                0,
                0,
            )
            too_slow = run_episode(
                RolloutContext(
                    pool, ScriptedSampler([sleep]), tokenizer, make_settings(trajectory_timeout=2.0)
                ),
                task,
                1,
                0,
            )
            results = await asyncio.gather(no_tool, too_slow)
            return results, pool.active

    (no_tool, too_slow), active_after = asyncio.run(episodes())
    assert no_tool.stop_reason is StopReason.max_steps and no_tool.reward == 0.0
    assert no_tool.patch == "" and no_tool.grade.status == "empty_patch"
    assert too_slow.stop_reason is StopReason.timeout and too_slow.reward == 0.0
    assert too_slow.num_steps == 1 and not too_slow.infra_error
    assert active_after == 0
    assert containers_of(docker_client, run_label) == []
