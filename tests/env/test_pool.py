"""EnvPool: steps with R2E observations, patches, grading, bounded concurrency, and cleanup
after normal exit, SIGTERM and kill -9."""

import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import textwrap

import docker.errors
import pytest

from deepswe_jax.env import observation
from deepswe_jax.env.docker.docker_api import remove_stale_containers
from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL
from deepswe_jax.env.pool import EnvPool
from tests.env.test_grading import LabelledDockerFactory, container_events

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def labelled(docker_client, label):
    return docker_client.containers.list(
        all=True, filters={"label": f"{RUN_LABEL}={label}"}, ignore_removed=True
    )


def test_bash_observation_keeps_first_and_last_40_lines():
    output = "".join(f"line {i}\n" for i in range(1, 101))
    text = observation.format_observation("execute_bash", output, 0)
    lines = text.splitlines()
    assert lines[:3] == ["Exit code: 0", "Execution output of [execute_bash]:", "line 1"]
    assert lines[42:45] == ["-" * 50, observation.TRUNCATION_MARKER, "-" * 50]
    assert lines[41] == "line 40" and lines[45] == "line 61" and lines[-1] == "line 100"
    short = observation.format_observation("execute_bash", "a\nb\n", 2)
    assert short == "Exit code: 2\nExecution output of [execute_bash]:\na\nb\n"


def test_other_tools_and_huge_lines_are_wrapped_and_capped():
    assert (
        observation.format_observation("search", "found", 0)
        == "Execution output of [search]:\nfound"
    )
    huge = observation.format_observation("execute_bash", "x" * 1_000_000, 0)
    assert len(huge) < observation.MAX_OBSERVATION_CHARS + 100 and "characters omitted" in huge


def test_episode_steps_patch_and_grade(tiny_task, docker_client):
    async def episode():
        async with EnvPool(max_envs=2, client=docker_client) as pool:
            async with pool.acquire(tiny_task) as env:
                status = await env.step(
                    "execute_bash", {"cmd": "git status --porcelain; echo clean"}
                )
                view = await env.step(
                    "file_editor", {"command": "view", "path": "/testbed/tinycalc/__init__.py"}
                )
                edit = await env.step(
                    "file_editor",
                    {
                        "command": "str_replace",
                        "path": "/testbed/tinycalc/__init__.py",
                        "old_str": "    return a - b",
                        "new_str": "    return a + b",
                    },
                )
                search = await env.step(
                    "search", {"search_term": "a + b", "path": "/testbed/tinycalc"}
                )
                unknown = await env.step("browse_web", {"url": "x"})
                finish = await env.step("finish", {"command": "submit", "result": "fixed"})
                patch = await env.patch()
            grade = await pool.grade(tiny_task, patch)
            return status, view, edit, search, unknown, finish, patch, grade, pool.metrics()

    status, view, edit, search, unknown, finish, patch, grade, metrics = asyncio.run(episode())
    assert status.observation == (
        "Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\nclean \n\n[STDERR]\n\n\n"
    )
    assert view.observation.startswith("Execution output of [file_editor]:\nHere's the result")
    assert not view.done and edit.exit_code == 0 and "has been edited" in edit.observation
    assert "./tinycalc/__init__.py (1 matches)" in search.observation
    assert (
        unknown.observation.startswith("ERROR: unknown function 'browse_web'") and not unknown.done
    )
    assert finish.done and finish.observation == "<<< Finished >>>"
    assert "+    return a + b" in patch
    assert grade.status == "resolved" and grade.reward == 1.0
    assert metrics["envs/started"] == 1 and metrics["envs/active"] == 0


def test_pool_with_a_runtime_factory_grades_on_its_runtimes(tiny_task, docker_client):
    factory = LabelledDockerFactory(docker_client)

    async def grade():
        async with EnvPool(max_envs=1, runtime_factory=factory, build_images=False) as pool:
            result = await pool.grade(tiny_task, tiny_task.patch)
            return result, pool.run_label, pool.metrics()

    since = datetime.datetime.now(datetime.timezone.utc)
    try:
        result, label, metrics = asyncio.run(grade())
    finally:
        factory.remove_stale(tuple({run_label for _, run_label in factory.calls}))
    assert result.status == "resolved", result.test_log
    assert factory.calls == [(tiny_task.image, label)] and metrics["envs/graded"] == 1
    [runtime] = factory.made
    events = container_events(docker_client, since, factory.label(label))
    assert [(action, name) for action, name, _ in events if action in ("create", "destroy")] == [
        ("create", runtime.name),
        ("destroy", runtime.name),
    ]
    assert container_events(docker_client, since, label) == []  # nothing on the default engine


def test_live_containers_never_exceed_max_envs(tiny_task, docker_client):
    async def many():
        peak = 0
        async with EnvPool(max_envs=2, client=docker_client) as pool:

            async def one(i):
                nonlocal peak
                async with pool.acquire(tiny_task) as env:
                    peak = max(peak, len(labelled(docker_client, pool.run_label)))
                    result = await env.step("execute_bash", {"cmd": f"echo {i}"})
                    return result.observation.splitlines()[4]

            outputs = await asyncio.gather(*(one(i) for i in range(5)))
            left = len(labelled(docker_client, pool.run_label))
        return outputs, peak, left

    outputs, peak, left = asyncio.run(many())
    assert outputs == [f"{i} " for i in range(5)]
    assert 1 <= peak <= 2 and left == 0


HOLDER = textwrap.dedent(
    """
    import asyncio, json, sys
    from deepswe_jax.env.pool import EnvPool
    from deepswe_jax.env.tasks import load_tasks

    task = load_tasks([json.loads(sys.argv[1])])[0]
    label, count = sys.argv[2], int(sys.argv[3])

    async def hold():
        async with EnvPool(max_envs=count, run_label=label, build_images=False) as pool:
            async def one():
                async with pool.acquire(task) as env:
                    await env.step("execute_bash", {"cmd": "true"})
                    await asyncio.sleep(3600)
            holders = [asyncio.ensure_future(one()) for _ in range(count)]
            while pool.metrics()["envs/started"] < count:
                await asyncio.sleep(0.1)
            print("READY", flush=True)
            await asyncio.gather(*holders)

    asyncio.run(hold())
    """
)


def start_holder(task, label, count):
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, json.dumps(task.to_row()), label, str(count)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "READY"
    return process


def test_a_stale_container_another_process_is_removing_is_gone_when_removal_returns(
    docker_client, base_image
):
    """CI failure (stop 30's run): after a kill -9, the other test worker's pool was already
    removing the dead owner's containers; this process's removal got Docker's 409 ("removal
    already in progress"), skipped it, and the container was still listed after the pool had
    entered. Now a 409 waits until the other removal finishes. The other remover is played by
    the engine itself: the first remove call answers 409 and the real removal happens while
    this process polls."""
    label = f"pytest-removing-{os.getpid()}"
    container = docker_client.containers.create(
        base_image,
        command=["true"],
        labels={RUN_LABEL: label, OWNER_LABEL: "nohost:1:0"},
    )
    real_remove, real_inspect = (
        docker_client.api.remove_container,
        docker_client.api.inspect_container,
    )
    polls = []

    def busy_remove(container_id, **kwargs):
        raise docker.errors.APIError("removal already in progress", response=Conflict())

    def inspect(container_id):
        polls.append(container_id)
        if len(polls) == 3:  # the other remover finishes now
            real_remove(container_id, force=True, v=True)
        return real_inspect(container_id)

    docker_client.api.remove_container = busy_remove
    docker_client.api.inspect_container = inspect
    try:
        assert remove_stale_containers(docker_client, run_labels=(label,)) == []
    finally:
        docker_client.api.remove_container = real_remove
        docker_client.api.inspect_container = real_inspect
        if labelled(docker_client, label):
            container.remove(force=True)
    assert polls[:3] == [container.id] * 3 and labelled(docker_client, label) == []


class Conflict:
    """The response of Docker's 409 for docker.errors.APIError."""

    status_code = 409
    reason = "Conflict"
    url = ""

    def json(self):
        return {"message": "removal of container is already in progress"}


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_no_container_outlives_its_process(tiny_task, docker_client, how):
    label = f"pytest-holder-{how.lower()}-{os.getpid()}"
    count = 8 if how == "SIGKILL" else 2
    process = start_holder(tiny_task, label, count)
    assert len(labelled(docker_client, label)) == count
    process.send_signal(getattr(signal, how))
    process.wait(timeout=60)
    if how == "SIGTERM":
        assert labelled(docker_client, label) == []  # the dying process removed its own
        return
    # kill -9: nothing could clean up. Any pool entered meanwhile (the other test worker's, or a
    # subprocess's) may already remove the dead owner's containers, as the next line's does.
    assert len(labelled(docker_client, label)) <= count

    async def new_pool():
        async with EnvPool(max_envs=1, client=docker_client):
            pass

    asyncio.run(new_pool())
    assert labelled(docker_client, label) == []
