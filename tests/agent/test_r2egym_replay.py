"""The r2egym interface replays what R2E-Gym's own tools showed the model, byte for byte.

tests/assets/r2egym/confini.jsonl holds 45 replies and the observations the original tools
(R2E-Gym@353348a driven by rLLM@709dec4) returned for them, in order, on a fresh container of
the confini image. Here the same replies go through `R2EGymInterface` (rLLM's parser, our
in-container tools, R2E-Gym's call/answer contract, its observation wording) on a fresh
container prepared as the recording was: /root/.venv/bin/python -> /usr/bin/python3, step
timeout 90 s except the call labelled "limit 5s".

The one difference allowed: a traceback through the tool script itself names the script's
line numbers (the original's lines 711 and 164, ours elsewhere), so those numbers are compared
as N; everything else, the traceback's code lines and pathlib frames included, must match.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

import docker
import pytest

from deepswe_jax.agent.r2egym import R2EGymInterface, R2EGymPrompts
from deepswe_jax.env.images import ensure_task_image
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = REPO_ROOT / "tests" / "assets" / "r2egym" / "confini.jsonl"
TASKS_FILE = REPO_ROOT / "tasks" / "tasks.jsonl"
STEP_TIMEOUT_S = 90.0
RECORDED_LIMIT = re.compile(r"limit (\d+)s")
# The recording's image had no R2E-Gym virtualenv; its `python` was this link.
PREPARE = "mkdir -p /root/.venv/bin && ln -sf /usr/bin/python3 /root/.venv/bin/python"
TOOL_FRAME_LINE = re.compile(r'(File "/usr/local/bin/\w+", line )\d+')


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
def confini_task(docker_client) -> Task:
    task = next(t for t in load_tasks(TASKS_FILE) if t.repo == "deepswe/confini")
    ensure_task_image(task, docker_client)
    return task


def step_timeout(label: str) -> float:
    limit = RECORDED_LIMIT.search(label)
    return float(limit.group(1)) if limit else STEP_TIMEOUT_S


def unnumbered_tool_frames(text: str) -> str:
    return TOOL_FRAME_LINE.sub(r"\1N", text)


async def replay(task: Task, client: docker.DockerClient, records: list[dict]) -> list[str]:
    interface = R2EGymInterface(R2EGymPrompts("system", "{problem_statement}", "test"))
    observations = []
    run_label = f"pytest-r2egym-{uuid.uuid4().hex[:8]}"
    async with EnvPool(
        max_envs=1, run_label=run_label, client=client, step_timeout=STEP_TIMEOUT_S
    ) as pool:
        async with pool.acquire(task) as env:
            assert (await env.run(PREPARE)).exit_code == 0
            await interface.prepare(env)
            for record in records:
                parsed = interface.parse(record["reply"])
                if parsed.call is None:
                    observations.append(parsed.error)
                    continue
                timeout = step_timeout(record["label"])
                result = await interface.step(env, parsed.call, timeout=timeout)
                observations.append(result.observation)
                assert result.done == (record["label"] == "finish")
    return observations


def test_r2egym_interface_reproduces_recorded_observations(confini_task, docker_client):
    records = [json.loads(line) for line in RECORDINGS.read_text().splitlines()]
    assert [r["index"] for r in records] == list(range(45))
    observations = asyncio.run(replay(confini_task, docker_client, records))

    mismatches = {
        r["index"]: (r["label"], r["observation"], ours)
        for r, ours in zip(records, observations, strict=True)
        if unnumbered_tool_frames(ours) != unnumbered_tool_frames(r["observation"])
    }
    assert not mismatches, "\n\n".join(
        f"#{index} {label}\nrecorded: {recorded!r}\nours:     {ours!r}"
        for index, (label, recorded, ours) in mismatches.items()
    )
    differing = [
        r["index"]
        for r, ours in zip(records, observations, strict=True)
        if ours != r["observation"]
    ]
    through_tool_script = [
        r["index"] for r in records if TOOL_FRAME_LINE.search(r["observation"]) is not None
    ]
    assert differing == through_tool_script == [43]
