"""Expert SFT end to end: the scripted gold-patch expert (real Docker tools once; canned tool
outputs for speed), rejection sampling, launch/train_sft.py, and the tool-call format learned.

Must show: SFT on expert trajectories of four shipped repositories makes the tiny model write
well-formed tool calls (agent.parsing) on the tasks of the two other repositories, which it
never saw. Greedy first replies before: none opens a call, none parses. After: all open the
call as the expert does, and some parse whole. How many parse whole depends on the float
rounding of the machine (70% where the test was written, 40% on the CI machines of stop 24,
the same code): where the expert's reply gives line numbers the issue does not hold
(`view_range`), the 2-layer model's greedy tail loops on numbers and closing tags.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import jax
import pytest
from flax import nnx

from configs import sft_tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import parse_function_call
from deepswe_jax.agent.rollout import RolloutContext, collect_rollouts
from deepswe_jax.agent.scripted_policy import parse_unified_diff
from deepswe_jax.agent.trajectory import StopReason, read_trajectories, write_trajectories
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.observation import FINISHED_OBSERVATION, format_observation
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.experiment import episode_settings, initial_params, model_factory, sharding_rules
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.sft import sft_batch
from deepswe_jax.sampling.jax_sampler import JaxSampler
from deepswe_jax.verify.expert import (
    collect_expert_trajectories,
    expert_replies,
    tool_call_success_rate,
)
from deepswe_jax.verify.rejection_sampling import select_for_sft

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_FILE = REPO_ROOT / "tasks" / "tasks.jsonl"
HELD_OUT_REPOS = ("deepswe/texttable", "deepswe/tinycalc")
# The tiny config with 2 of its 4 layers: it learns the format in fewer steps, each cheaper,
# so the run fits CI on 2 CPU cores (~1.2 s per step). The first turn is all the evaluation
# samples, so training stops 1,536 tokens in (prompts are 1,239-1,427 tokens).
SFT_STEPS = 140
SFT_OVERRIDES = {
    "model.num_hidden_layers": 2,
    "sft.num_steps": SFT_STEPS,
    "sft.batch_size": 2,
    "sft.micro_batch_size": 2,
    "sft.lr": 2e-2,
    "sft.warmup_steps": 5,
    "sft.max_tokens": 1536,
    "checkpoint.every": SFT_STEPS,
}


def small_config():
    config = sft_tiny.get_config()
    config.model.num_hidden_layers = SFT_OVERRIDES["model.num_hidden_layers"]
    return config


@dataclass(frozen=True)
class CannedStep:
    observation: str
    done: bool
    exit_code: int | None
    duration_s: float = 0.0
    env_error: bool = False


class CannedEnv:
    """Answers tool calls without a container: `view` shows the real lines of the task's source
    (`cat -n` style), edits and commands report success; the patch is the gold patch once every
    gold hunk was applied through str_replace."""

    def __init__(self, task: Task):
        self.task = task
        self.pending = {(e.path, e.old, e.new) for e in parse_unified_diff(task.patch)}

    async def step(self, tool: str, params: dict[str, str]) -> CannedStep:
        if tool == "finish":
            return CannedStep(FINISHED_OBSERVATION, True, 0)
        if tool == "file_editor" and params.get("command") == "view":
            relative = params["path"].removeprefix("/testbed/")
            lines = (Path(self.task.source) / relative).read_text().splitlines()
            first, last = json.loads(params.get("view_range", f"[1, {len(lines)}]"))
            last = len(lines) if last == -1 else min(last, len(lines))
            shown = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1))
            return CannedStep(format_observation(tool, shown, 0), False, 0)
        if tool == "file_editor" and params.get("command") == "str_replace":
            path = params["path"].removeprefix("/testbed/")
            self.pending.discard((path, params["old_str"], params["new_str"]))
            return CannedStep(
                format_observation(tool, f"The file {path} has been edited.", 0), False, 0
            )
        return CannedStep(format_observation(tool, "ok", 0), False, 0)

    async def patch(self) -> str:
        return "" if self.pending else self.task.patch


@dataclass
class CannedEnvPool:
    """EnvPool's interface over `CannedEnv`; grades resolved exactly when the gold patch is back."""

    graded: list[str] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def acquire(self, task: Task):
        yield CannedEnv(task)

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        self.graded.append(task.instance_id)
        resolved = patch == task.patch
        status = "resolved" if resolved else "unresolved"
        return GradeResult(task.instance_id, status, float(resolved), True, resolved)

    async def run_with_retries(self, episode, *, failed, name: str = "episode"):
        return await episode()  # no infrastructure to fail

    def metrics(self) -> dict[str, float]:
        return {"envs/graded": len(self.graded)}

    async def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(REPO_ROOT / "tests" / "assets" / "tokenizer")


@pytest.fixture(scope="module")
def split_tasks() -> tuple[list[Task], list[Task]]:
    tasks = load_tasks(TASKS_FILE)
    train = [t for t in tasks if t.repo not in HELD_OUT_REPOS]
    held_out = [t for t in tasks if t.repo in HELD_OUT_REPOS]
    assert len(train) == 20 and len(held_out) == 10
    return train, held_out


def test_expert_solves_tasks_through_docker_with_token_exact_turns(tokenizer, split_tasks):
    """The real path: EnvPool containers, real tools, the grader in fresh containers."""
    try:
        client = docker.from_env()
        client.ping()
    except Exception as error:
        pytest.fail(f"no Docker engine answers ({error}); start dockerd", pytrace=False)
    train, held_out = split_tasks
    tasks = [train[0], held_out[0]]
    config = sft_tiny.get_config()
    label = f"pytest-expert-{uuid.uuid4().hex[:8]}"

    async def collect():
        async with EnvPool(max_envs=2, run_label=label, client=client, step_timeout=60) as pool:
            return await collect_expert_trajectories(
                tasks, pool, tokenizer, episode_settings(config), show_progress=False
            )

    try:
        trajectories = asyncio.run(collect())
    finally:
        for container in client.containers.list(
            all=True, filters={"label": f"deepswe.run={label}"}
        ):
            container.remove(force=True)
    for task, trajectory in zip(tasks, trajectories, strict=True):
        assert trajectory.stop_reason is StopReason.finished and trajectory.reward == 1.0
        replies = expert_replies(task)
        assert [step["assistant"] for step in trajectory.steps] == replies
        # The test run saw the repository's tests pass after the edits.
        assert "passed" in trajectory.steps[-2]["observation"]
        sampled = [
            tok for tok, m in zip(trajectory.token_ids, trajectory.loss_mask, strict=True) if m
        ]
        want = [tok for r in replies for tok in tokenizer.encode_text(r) + [tokenizer.im_end_id]]
        assert sampled == want
    assert tool_call_success_rate(trajectories) == 1.0
    selection = select_for_sft(trajectories + trajectories)  # duplicates count once
    assert len(selection.trajectories) == 2 and selection.num_duplicates == 2
    (micro_batch,) = sft_batch(selection.trajectories, micro_batch_size=2).micro_batches
    rows = [
        row[segments > 0].tolist()
        for row, segments in zip(micro_batch.input_ids, micro_batch.segment_ids, strict=True)
    ]
    for trajectory in selection.trajectories:
        assert list(trajectory.token_ids[:-1]) in rows


def first_reply_parse_rate(
    config, tokenizer: ChatTokenizer, tasks: list[Task]
) -> tuple[float, list[str]]:
    """Greedy first replies of `tasks` by config's policy (config.init_from), through the agent
    loop; the share that `parse_function_call` reads a call from, and the replies."""
    config.sampler.temperature = 0.0
    config.agent.update(max_steps=1, max_context=128)
    mesh = make_mesh(devices=jax.devices()[:1])
    rules = sharding_rules(config)
    graphdef, _ = nnx.split(nnx.eval_shape(model_factory(config)), nnx.Param)
    model = nnx.merge(graphdef, initial_params(config, mesh, rules))
    sampler = JaxSampler(model, max_batch=len(tasks), max_cache_len=2048, seed=0)
    try:
        trajectories = asyncio.run(
            collect_rollouts(
                RolloutContext(CannedEnvPool(), sampler, tokenizer, episode_settings(config)),
                tasks,
                1,
                0,
                show_progress=False,
            )
        )
    finally:
        sampler.close()
    replies = [t.steps[0]["assistant"] for t in trajectories]
    return sum(parse_function_call(r).call is not None for r in replies) / len(replies), replies


def opens_like_the_expert(reply: str, task: Task) -> bool:
    """Whether `reply` starts as the expert's first reply does up to the file's path: the
    thought, `<function=file_editor>`, the view command and `<parameter=path>/testbed/`."""
    expert = expert_replies(task)[0]
    return reply.startswith(expert[: expert.index("/testbed/") + len("/testbed/")])


# A hang guard: 4-7 minutes beside the other xdist worker, more on a fresh machine, where it
# starts with test_learning.py and one of them builds the base image while the other waits.
@pytest.mark.timeout(1800)
def test_sft_on_expert_trajectories_teaches_the_tool_call_format(tokenizer, split_tasks, tmp_path):
    train, held_out = split_tasks
    trajectories = asyncio.run(
        collect_expert_trajectories(
            train,
            CannedEnvPool(),
            tokenizer,
            episode_settings(sft_tiny.get_config()),
            show_progress=False,
        )
    )
    assert all(t.reward == 1.0 for t in trajectories)
    data = tmp_path / "expert.jsonl"
    write_trajectories(data, trajectories)

    workdir = tmp_path / "sft"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    subprocess.run(
        [
            sys.executable,
            "launch/train_sft.py",
            "--config=configs/sft_tiny.py",
            f"--workdir={workdir}",
            f"--trajectories={data}",
            *[f"--config.{key}={value}" for key, value in SFT_OVERRIDES.items()],
        ],
        cwd=REPO_ROOT,
        env=env,
        check=True,
    )
    assert len(read_trajectories(workdir / "sft_data.jsonl")) == len(train)
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, SFT_STEPS + 1))
    assert rows[-1]["sft/loss"] < 0.2 * rows[0]["sft/loss"]

    before, replies_before = first_reply_parse_rate(small_config(), tokenizer, held_out)
    trained = small_config()
    trained.init_from = str(workdir / "checkpoints")
    after, replies = first_reply_parse_rate(trained, tokenizer, held_out)
    print(f"held-out first-reply parse success: {before:.0%} -> {after:.0%}; e.g.\n{replies[0]}")

    def opened(replies: list[str]) -> int:
        return sum(opens_like_the_expert(r, t) for r, t in zip(replies, held_out, strict=True))

    assert before == 0.0 and opened(replies_before) == 0, replies_before
    assert opened(replies) >= 0.8 * len(held_out), replies
    assert after >= 0.2, replies
