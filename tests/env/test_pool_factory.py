"""EnvPool on a runtime factory of its own (an in-memory Runtime): the episode's runtime and a
fresh grading runtime come from the factory, stale cleanup goes through it, and failed starts
are retried or not by what failed. Real backends: test_pool.py (Docker), test_k8s_runtime.py
(pods)."""

from __future__ import annotations

import asyncio

import pytest

from deepswe_jax.env.grading import grading
from deepswe_jax.env.grading.verdict_guards import PROBE_MARK
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.runtime import EnvironmentUnavailableError, MissingImageError
from tests.env.fake_runtime import ScriptedFactory
from tests.env.test_grading_steps import PATCH, make_task, repository


def test_episodes_and_grading_run_in_runtimes_of_the_factory():
    factory = ScriptedFactory(repository(), patch=PATCH)
    task = make_task()

    async def episode():
        pool = EnvPool(
            max_envs=2, runtime_factory=factory, build_images=False, stale_run_labels=("old",)
        )
        async with pool:
            async with pool.acquire(task) as env:
                step = await env.step("execute_bash", {"cmd": "ls"})
                patch = await env.patch()
            return step, patch, await pool.grade(task, patch, timeout=60), pool

    step, patch, grade, pool = asyncio.run(episode())
    assert factory.stale_removals == [("old",)]  # entering the pool
    episode_runtime, grading_runtime = factory.made
    assert episode_runtime.tool_calls == [("execute_bash", {"cmd": "ls"})]
    assert step.observation == "Exit code: 0\nExecution output of [execute_bash]:\nexecute_bash ran"
    assert patch == PATCH and episode_runtime.commands == []
    assert grade.status == "resolved", grade.test_log
    probe, apply, *_ = grading_runtime.commands  # the image's environment, then the patch
    assert PROBE_MARK in probe and apply == grading._apply_cmd(grading.PATCH_FILE)
    assert {r.run_label for r in factory.made} == {pool.run_label}
    assert episode_runtime.closes == grading_runtime.closes == 1
    metrics = pool.metrics()
    assert {k: metrics[k] for k in ("envs/started", "envs/released", "envs/graded")} == {
        "envs/started": 1,
        "envs/released": 1,
        "envs/graded": 1,
    }
    assert metrics["envs/active"] == 0 and "envs/hosts_up" not in metrics  # no Docker hosts


@pytest.mark.parametrize(
    "errors, started, made",
    [
        ([EnvironmentUnavailableError("pod evicted")], True, 2),  # retried once
        ([EnvironmentUnavailableError("evicted")] * 2, False, 2),  # then given up
        ([MissingImageError("no such image")], False, 1),  # not the environment's fault
    ],
)
def test_failed_starts_are_retried_when_the_environment_failed(errors, started, made):
    factory = ScriptedFactory(start_errors=list(errors))

    async def acquire():
        async with EnvPool(max_envs=1, runtime_factory=factory, build_images=False) as pool:
            try:
                async with pool.acquire(make_task()):
                    return True, pool.metrics()
            except (EnvironmentUnavailableError, MissingImageError) as error:
                assert error is errors[-1]
                return False, pool.metrics()

    ok, metrics = asyncio.run(acquire())
    assert ok is started and len(factory.made) == made
    assert all(runtime.closes == 1 for runtime in factory.made)  # failed ones removed too
    assert (metrics["envs/started"], metrics["envs/start_failures"]) == (
        (1, 0) if started else (0, 1)
    )
