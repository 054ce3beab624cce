"""Two environments of one EnvPool on a private event loop, for the tests that attack one of
them and check that both keep serving (test_hostile.py, test_red_team.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

import docker

from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task


@contextlib.contextmanager
def env_pair(
    task: Task, client: docker.DockerClient, step_timeout: float
) -> Iterator[tuple[Callable, object, object]]:
    """(run, first, second): `run` runs a coroutine on the pair's loop to its end."""
    loop = asyncio.new_event_loop()
    pool = EnvPool(max_envs=2, client=client, step_timeout=step_timeout)
    contexts = [pool.acquire(task), pool.acquire(task)]
    first, second = (loop.run_until_complete(c.__aenter__()) for c in contexts)
    try:
        yield loop.run_until_complete, first, second
    finally:
        for context in contexts:
            loop.run_until_complete(context.__aexit__(None, None, None))
        loop.run_until_complete(pool.close())
        loop.close()


def bash(run: Callable, env, cmd: str):
    return run(env.step("execute_bash", {"cmd": cmd}))


def assert_serving(run: Callable, *envs) -> None:
    for env in envs:
        result = bash(run, env, "echo still-serving")
        assert not result.env_error and "still-serving" in result.observation
