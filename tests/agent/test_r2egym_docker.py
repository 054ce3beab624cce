"""The r2egym interface through Docker: the recorded observations byte for byte, and an episode.

Replay: the r2egym interface reproduces what R2E-Gym's own tools showed the model.

tests/assets/r2egym/confini.jsonl holds 45 replies and the observations the original tools
(R2E-Gym@353348a driven by rLLM@709dec4) returned for them, in order, on a fresh container of
the confini image. Here the same replies go through `R2EGymInterface` (rLLM's parser, our
in-container tools, R2E-Gym's call/answer contract, its observation wording) on a fresh
container prepared as the recording was: /root/.venv/bin/python -> /usr/bin/python3, step
timeout 90 s except the call labelled "limit 5s".

The one difference allowed: a traceback through the tool script itself names the script's
line numbers (the original's lines 711 and 164, ours elsewhere), so those numbers are compared
as N; everything else, the traceback's code lines and pathlib frames included, must match.

Episode: `run_episode` with config.agent.interface='r2egym' and prompts from a YAML file the
test writes (R2E-Gym's format) fixes a shipped task with R2E-Gym's tools and is graded resolved;
the prompt and the observations carry rLLM's step counter.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

import docker
import pytest

from configs import tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.r2egym import R2EGymInterface, R2EGymPrompts
from deepswe_jax.agent.rollout import RolloutContext, run_episode
from deepswe_jax.agent.scripted_policy import reply_ids
from deepswe_jax.agent.trajectory import StopReason
from deepswe_jax.env.docker.images import ensure_task_image
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.experiment import episode_settings
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = REPO_ROOT / "tests" / "assets" / "r2egym" / "confini.jsonl"
TASKS_FILE = REPO_ROOT / "tasks" / "tasks.jsonl"
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"
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
    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "confini-1")
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


PROMPTS_YAML = """\
system_prompt: |-
  You fix bugs with the functions file_editor, execute_bash, search and finish.
instance_prompt: |-
  The repository is in {working_dir}. Resolve this issue:
  <github_issue>
  {problem_statement}
  </github_issue>
llm_name: ignored
"""
# confini-1's gold patch as R2E-Gym calls (values are stripped, so no indentation in them).
FIX_REPLIES = [
    "Make to_bool case-insensitive.\n<function=file_editor>\n"
    "<parameter=command>str_replace</parameter>\n"
    "<parameter=path>/testbed/confini/values.py</parameter>\n"
    "<parameter=old_str>if value in _TRUE:</parameter>\n"
    "<parameter=new_str>if value.lower() in _TRUE:</parameter>\n</function>",
    "The same for false values, then try it.\n<function=execute_bash>\n<parameter=cmd>\n"
    "sed -i 's/if value in _FALSE:/if value.lower() in _FALSE:/' confini/values.py && "
    "python3 -c 'from confini.values import to_bool; print(to_bool(\"NO\"))'\n"
    "</parameter>\n</function>",
    "Done.\n<function=finish>\n<parameter=command>submit</parameter>\n</function>",
]


def test_r2egym_episode_resolves_a_task_with_prompts_from_a_file(
    confini_task, docker_client, tmp_path
):
    prompts_file = tmp_path / "edit_non_fn_calling.yaml"
    prompts_file.write_text(PROMPTS_YAML)
    config = tiny.get_config()
    config.agent.update(
        max_steps=5,
        max_prompt_tokens=4096,
        max_context=16384,
        step_timeout=60.0,
        trajectory_timeout=600.0,
        reward_timeout=300.0,
        submit_notice_tokens=16000,
        interface="r2egym",
        prompts_file=str(prompts_file),
    )
    config.sampler.update(temperature=1.0, top_p=1.0, top_k=0)
    settings = episode_settings(config)
    assert settings.interface.prompts.source == str(prompts_file)
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    sampler = ScriptedSampler([reply_ids(tokenizer, reply) for reply in FIX_REPLIES])

    async def episode():
        run_label = f"pytest-r2egym-{uuid.uuid4().hex[:8]}"
        async with EnvPool(max_envs=1, run_label=run_label, client=docker_client) as pool:
            return await run_episode(
                RolloutContext(pool, sampler, tokenizer, settings), confini_task, 0, 0
            )

    trajectory = asyncio.run(episode())
    assert trajectory.stop_reason is StopReason.finished, trajectory.steps
    assert trajectory.grade.status == "resolved", trajectory.grade.test_log[-2000:]
    assert trajectory.reward == 1.0 and trajectory.num_steps == 3
    edited, ran = (step["observation"] for step in trajectory.steps[:2])
    assert edited.startswith(
        "Execution output of [file_editor]:\nThe file /testbed/confini/values.py has been "
        "edited. Here's the result of running `cat -n` on a snippet of "
    )
    assert (
        ran
        == "Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\nFalse \n\n[STDERR]\n\n\n"
    )
    prompt = tokenizer.decode(trajectory.prompt_ids)
    assert "You fix bugs with the functions" in prompt
    assert (
        "The repository is in /testbed. Resolve this issue:\n<github_issue>\n"
        f"{confini_task.problem_statement}\n</github_issue>\nSteps Remaining: 4" in prompt
    )
    conversation = tokenizer.decode(trajectory.token_ids)
    assert f"{edited}\nSteps Remaining: 3" in conversation
    assert f"{ran}\nSteps Remaining: 2" in conversation
