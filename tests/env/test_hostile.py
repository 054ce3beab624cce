"""Hostile agent commands stay inside their container, and the pool keeps serving afterwards."""

import asyncio

import pytest

from deepswe_jax.env import observation
from deepswe_jax.env.pool import EnvPool

STEP_TIMEOUT = 4


@pytest.fixture(scope="module")
def envs(tiny_task, docker_client):
    """Two environments of one pool on a private event loop: (run, victim, bystander)."""
    loop = asyncio.new_event_loop()
    pool = EnvPool(max_envs=2, client=docker_client, step_timeout=STEP_TIMEOUT)
    contexts = [pool.acquire(tiny_task), pool.acquire(tiny_task)]
    victim, bystander = (loop.run_until_complete(c.__aenter__()) for c in contexts)
    yield loop.run_until_complete, victim, bystander
    for context in contexts:
        loop.run_until_complete(context.__aexit__(None, None, None))
    loop.run_until_complete(pool.close())
    loop.close()


def bash(run, env, cmd):
    return run(env.step("execute_bash", {"cmd": cmd}))


def assert_serving(run, *envs):
    for env in envs:
        result = bash(run, env, "echo still-serving")
        assert not result.env_error and "still-serving" in result.observation


def process_count(run, env):
    return int(run(env.run("ps -e --no-headers | wc -l")).output)


def test_fork_bomb_is_capped_by_the_pids_limit_and_killed(envs):
    run, victim, bystander = envs
    result = bash(run, victim, ":(){ :|:& };:")
    assert result.exit_code is None and not result.env_error
    assert result.observation.startswith("Exit code: -1\nExecution output of [execute_bash]:\n")
    assert "took too long" in result.observation
    assert process_count(run, victim) < 5  # server, bash, ps, wc
    assert_serving(run, victim, bystander)


def test_infinite_loops_time_out(envs):
    run, victim, bystander = envs
    for cmd in ("while true; do :; done", "python3 -c 'while True: pass'"):
        result = bash(run, victim, cmd)
        assert result.exit_code is None and "took too long" in result.observation
    assert "python3 -c" not in run(victim.run("ps -eo args=")).output
    assert_serving(run, victim, bystander)


def test_there_is_no_network(envs):
    run, victim, _ = envs
    result = bash(
        run,
        victim,
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
    )
    assert result.exit_code != 0 and "Network is unreachable" in result.observation
    lookup = bash(run, victim, "getent hosts deb.debian.org")
    assert lookup.exit_code != 0


def test_100mb_of_output_is_truncated_not_buffered(envs):
    run, victim, bystander = envs
    step = bash(run, victim, "head -c 100000000 /dev/zero | tr '\\0' 'x'; echo; echo the-end")
    assert step.exit_code == 0 and "xxxxxxxx\nthe-end" in step.observation
    assert len(step.observation) <= observation.MAX_OBSERVATION_CHARS + 100
    raw = run(victim.run("yes | head -c 100000000"))
    assert raw.exit_code == 0 and len(raw.output) < 2_100_000  # DEFAULT_MAX_OUTPUT, head and tail
    assert "bytes of output omitted" in raw.output
    assert_serving(run, victim, bystander)


def test_rm_rf_testbed_only_hurts_its_own_episode(envs):
    run, victim, bystander = envs
    bash(run, victim, "rm -rf /testbed")
    gone = bash(run, victim, "ls /testbed")
    assert not gone.env_error and gone.exit_code != 0
    assert run(victim.patch()) == ""
    intact = bash(run, bystander, "git status --porcelain && cat tinycalc/__init__.py")
    assert intact.exit_code == 0 and "def add(a, b):" in intact.observation
    assert_serving(run, victim, bystander)
