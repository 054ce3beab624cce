"""The multi-turn episode loop: sample, parse the call, step the container, repeat; then grade.

What stays the same for every episode of a run (the env pool, the sampler, the tokenizer and
the `EpisodeSettings`) travels as one `RolloutContext`.

One episode (`run_episode`):

    prompt = system prompt + issue, as token ids (`ChatTokenizer.prompt_ids`)
    acquire an Env from the pool (released on every exit path, cancellation included)
    until a stop:
        generate one turn, max_new_tokens = what is left of the cumulative token budget
        parse the first <function=...> call; run it in the Env (or show the parse error)
        append the observation + "Steps Remaining: N" (+ "submit now" near the budget)
    patch = git diff in the Env; grade it in a fresh container (`EnvPool.grade`)

Prompts, parsing, running calls and the notes after each observation belong to the agent
interface (`EpisodeSettings.interface`: ours, or R2E-Gym's byte for byte; `agent.interface`).

Stops: finished (the agent called finish), max_steps, max_context (the token
budget: agent.max_context tokens after the prompt, assistant and observation
tokens together), timeout (agent.trajectory_timeout seconds for the whole
interaction), env_error (the container failed: no grading, infra_error) and limit_exceeded
(the episode's processes exhausted its container's disk or memory: no grading, reward 0,
trained on). Only failures the policy cannot cause are infrastructure errors: a limit of the
episode's own container it ran into (runtime.PolicyLimitError) is a wrong answer, and a patch
over env.max_patch_bytes is graded `patch_too_large` (reward 0).
The reward is the grade's reward for finished episodes and 0.0 otherwise;
the grade of every graded episode is kept in `Trajectory.grade`. The
per-command limit (agent.step_timeout) belongs to the pool:
`EnvPool(step_timeout=...)`; after a timeout the patch is read once the
in-flight command ends, so at most one step_timeout later.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import tqdm

from deepswe_jax.agent.chat import ChatTokenizer, ConversationTokens, Message
from deepswe_jax.agent.interface import AgentInterface, DeepSweJaxInterface, Progress
from deepswe_jax.agent.trajectory import StopReason, Trajectory, write_trajectories
from deepswe_jax.env.grading.grade_result import policy_limit_grade
from deepswe_jax.env.runtime import PatchTooLargeError, PolicyLimitError
from deepswe_jax.env.tasks import Task
from deepswe_jax.sampling.base import GenerateRequest, Sampler, SamplingParams

if TYPE_CHECKING:
    from deepswe_jax.env.protocols import EnvPoolProtocol, EnvProtocol

logger = logging.getLogger(__name__)

# rLLM tells the agent to submit at 28K of a 32K budget: the same fraction by default.
SUBMIT_NOTICE_FRACTION = 7 / 8


@dataclass(frozen=True)
class EpisodeSettings:
    """Limits and sampling parameters of one episode (config.agent and config.sampler).

    `submit_notice_tokens`: once this many tokens follow the prompt, each observation asks the
    agent to submit now; None = 7/8 of `max_context` (rLLM: 28K of a 32K budget).
    `interface`: what the agent is shown and how its calls run (ours by default).
    `seed`: each turn's request carries a seed of its own, from this seed, the task, the
    rollout index, the policy version and the turn (`turn_seed`), so an episode samples the same
    tokens however its requests share the sampler with others, and a resumed run samples what
    an uninterrupted one would; None leaves the draws to the sampler's own stream (as rLLM and
    verl do: the order requests arrive in, which container timing decides, changes them).
    """

    max_steps: int
    max_prompt_tokens: int
    max_context: int
    trajectory_timeout: float
    reward_timeout: float
    submit_notice_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    interface: AgentInterface = field(default_factory=DeepSweJaxInterface)
    seed: int | None = None

    @property
    def submit_notice_after(self) -> int:
        """Response tokens after which observations tell the agent to submit."""
        if self.submit_notice_tokens is None:
            return int(self.max_context * SUBMIT_NOTICE_FRACTION)
        return self.submit_notice_tokens


def turn_seed(seed: int, task_id: str, rollout_index: int, policy_version: int, turn: int) -> int:
    """The sampling seed of one turn's request (EpisodeSettings.seed): 32 bits of a hash of
    everything that identifies the turn, so no two turns of a run share their draws."""
    identity = f"{seed}/{task_id}/{rollout_index}/{policy_version}/{turn}".encode()
    return int.from_bytes(hashlib.blake2b(identity, digest_size=4).digest(), "little")


@dataclass(frozen=True)
class RolloutContext:
    """What every episode of a run uses and none changes: where its containers come from and
    are graded (`env_pool`), what generates the replies (`sampler`), the chat tokenizer and the
    episode limits (`settings`)."""

    env_pool: EnvPoolProtocol
    sampler: Sampler
    tokenizer: ChatTokenizer
    settings: EpisodeSettings


def initial_messages(task: Task) -> list[Message]:
    """The system prompt and the instance prompt of `task` (our interface)."""
    return DeepSweJaxInterface().initial_messages(task, max_steps=0)


@dataclass
class _EpisodeState:
    """What an episode has produced so far; survives a timeout cancelling the loop."""

    tokens: ConversationTokens
    stop_reason: StopReason | None = None
    steps: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    env_error: str | None = None
    limit_error: PolicyLimitError | None = None

    def add_time(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds


async def run_episode(
    context: RolloutContext, task: Task, rollout_index: int, policy_version: int
) -> Trajectory:
    """Runs one episode of `task` (see the module docstring) and returns its trajectory.

    Container and grader failures end the episode as env_error / infra_error instead of
    raising; sampler errors and cancellation propagate (the Env is released).
    """
    env_pool, tokenizer, settings = context.env_pool, context.tokenizer, context.settings
    started = time.perf_counter()
    messages = settings.interface.initial_messages(task, max_steps=settings.max_steps)
    state = _EpisodeState(ConversationTokens(tokenizer.prompt_ids(messages)))
    patch = ""
    grade = None
    if len(state.tokens.prompt_ids) > settings.max_prompt_tokens:
        logger.warning(
            "%s: prompt has %d tokens, over agent.max_prompt_tokens=%d; stopping as max_context",
            task.instance_id,
            len(state.tokens.prompt_ids),
            settings.max_prompt_tokens,
        )
        state.stop_reason = StopReason.max_context
    else:
        async with contextlib.AsyncExitStack() as env_scope:
            env = await _timed(
                state, "acquire_s", env_scope.enter_async_context(env_pool.acquire(task))
            )
            if env is not None:
                try:
                    await asyncio.wait_for(
                        _interact(
                            env, context, state, (task.instance_id, rollout_index, policy_version)
                        ),
                        settings.trajectory_timeout,
                    )
                except asyncio.TimeoutError:
                    state.stop_reason = StopReason.timeout
                if state.env_error is None and state.limit_error is None:
                    patch = await _timed(state, "patch_s", env.patch()) or ""
            if state.env_error is not None:
                state.stop_reason = StopReason.env_error
        if isinstance(state.limit_error, PatchTooLargeError):
            grade = policy_limit_grade(task, state.limit_error)
        elif state.limit_error is not None:
            state.stop_reason = StopReason.limit_exceeded
        elif state.env_error is None:
            grade = await _timed(
                state, "grading_s", env_pool.grade(task, patch, timeout=settings.reward_timeout)
            )
    infra_error = state.env_error is not None or (grade is not None and grade.infra_error)
    reward = grade.reward if grade is not None and state.stop_reason is StopReason.finished else 0.0
    state.timings["total_s"] = time.perf_counter() - started
    steps = state.steps + ([{"env_error": state.env_error}] if state.env_error else [])
    if state.limit_error is not None:
        steps.append({"limit_exceeded": str(state.limit_error)})
    tokens = state.tokens
    return Trajectory(
        task_id=task.instance_id,
        rollout_index=rollout_index,
        policy_version=policy_version,
        prompt_ids=tokens.prompt_ids,
        token_ids=tuple(tokens.token_ids),
        loss_mask=tuple(tokens.loss_mask),
        sampler_logprobs=tuple(tokens.logprobs),
        reward=float(reward),
        stop_reason=state.stop_reason,
        infra_error=infra_error,
        num_steps=len(state.steps),
        patch=patch,
        timings=state.timings,
        steps=tuple(steps),
        grade=grade,
    )


async def _timed(state: _EpisodeState, name: str, awaitable: Awaitable[Any]) -> Any:
    """Awaits a container or grader operation, adding its time to `state.timings[name]`.

    A limit of the episode's own container (PolicyLimitError) is recorded in
    `state.limit_error`; any other failure (but cancellation) is an infrastructure error: it
    is logged, recorded in `state.env_error`. Either way None is returned.
    """
    started = time.perf_counter()
    try:
        return await awaitable
    except PolicyLimitError as error:
        logger.info("episode ran into its container's limits: %s", error)
        state.limit_error = state.limit_error or error
        return None
    except Exception as error:
        operation = name.removesuffix("_s")
        logger.warning("environment failure during %s: %r", operation, error)
        state.env_error = f"{operation}: {error!r}"
        return None
    finally:
        state.add_time(name, time.perf_counter() - started)


async def _interact(
    env: EnvProtocol,
    context: RolloutContext,
    state: _EpisodeState,
    episode: tuple[str, int, int],
) -> None:
    """The agent loop of `episode` (task id, rollout index, policy version); sets
    `state.stop_reason` when it ends."""
    sampler, tokenizer, settings = context.sampler, context.tokenizer, context.settings
    tokens = state.tokens
    interface = settings.interface
    await _timed(state, "tool_s", interface.prepare(env))
    if state.env_error is not None:
        state.stop_reason = StopReason.env_error
        return
    if state.limit_error is not None:
        state.stop_reason = StopReason.limit_exceeded
        return
    for step_index in range(settings.max_steps):
        budget_left = settings.max_context - tokens.num_response_tokens
        if budget_left <= 0:
            state.stop_reason = StopReason.max_context
            return
        params = SamplingParams(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            max_new_tokens=budget_left,
            stop_token_ids=tokenizer.stop_token_ids,
            seed=None if settings.seed is None else turn_seed(settings.seed, *episode, step_index),
        )
        generation_started = time.perf_counter()
        [completion] = await sampler.generate([GenerateRequest(tuple(tokens.token_ids), params)])
        generation_s = time.perf_counter() - generation_started
        state.add_time("generation_s", generation_s)
        tokens_before_reply = tokens.num_response_tokens
        tokens.append_sampled(completion.token_ids, completion.logprobs)
        reply_ids = completion.token_ids
        if reply_ids and reply_ids[-1] in tokenizer.stop_token_ids:
            reply_ids = reply_ids[:-1]
        closed = bool(completion.token_ids) and completion.token_ids[-1] == tokenizer.im_end_id
        step: dict[str, Any] = {
            "step": step_index,
            "assistant": tokenizer.decode(reply_ids),
            "num_tokens": len(completion.token_ids),
            "finish_reason": completion.finish_reason,
            "generation_s": generation_s,
        }
        state.steps.append(step)
        if completion.finish_reason == "length":
            state.stop_reason = StopReason.max_context
            return

        parsed = interface.parse(step["assistant"])
        if parsed.call is None:
            step["parse_error"] = parsed.error
            observation = parsed.error
        else:
            step["action"] = {"name": parsed.call.name, "parameters": parsed.call.parameters}
            tool_started = time.perf_counter()
            result = await _timed(state, "tool_s", interface.step(env, parsed.call))
            step["tool_s"] = time.perf_counter() - tool_started
            if result is not None and result.env_error:
                state.env_error = f"step {step_index}: {result.observation}"
            if state.env_error is not None:
                state.stop_reason = StopReason.env_error
                return
            if state.limit_error is not None:
                step["limit_exceeded"] = str(state.limit_error)
                state.stop_reason = StopReason.limit_exceeded
                return
            step["exit_code"] = result.exit_code
            if result.done:
                state.stop_reason = StopReason.finished
                return
            observation = result.observation
            if parsed.notice is not None:
                observation = f"{parsed.notice}\n{observation}"
        step["observation"] = observation

        if step_index + 1 == settings.max_steps:
            break
        progress = Progress(
            steps_taken=step_index + 1,
            max_steps=settings.max_steps,
            tokens_before_reply=tokens_before_reply,
            tokens_after_reply=tokens.num_response_tokens,
            submit_notice_tokens=settings.submit_notice_after,
        )
        text = interface.observation_message(observation, progress)
        observation_ids = tokenizer.observation_ids(text, assistant_turn_closed=closed)
        if tokens.num_response_tokens + len(observation_ids) >= settings.max_context:
            state.stop_reason = StopReason.max_context
            return
        tokens.append_observation(observation_ids)
    state.stop_reason = StopReason.max_steps


async def _gather_or_cancel(
    coroutines: Sequence[Awaitable[Trajectory]], progress: tqdm.tqdm | None
) -> list[Trajectory]:
    """Runs `coroutines` concurrently, in order; if one raises, cancels the rest and re-raises."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    if progress is not None:
        for task in tasks:
            task.add_done_callback(lambda _: progress.update(1))
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _episode_with_retries(
    context: RolloutContext, task: Task, rollout_index: int, policy_version: int
) -> Trajectory:
    """`run_episode`, run again by the pool while it ends in an infrastructure failure (e.g.
    its Docker host went away), so no trajectory is lost silently."""

    def episode() -> Awaitable[Trajectory]:
        return run_episode(context, task, rollout_index, policy_version)

    return await context.env_pool.run_with_retries(
        episode,
        failed=lambda trajectory: trajectory.infra_error,
        name=f"{task.instance_id}#{rollout_index}",
    )


async def collect_rollouts(
    context: RolloutContext,
    tasks: Sequence[Task],
    n: int,
    policy_version: int,
    *,
    output_path: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> list[Trajectory]:
    """`n` episodes of every task, all at once (the pool bounds how many containers run).

    Returns them task-major ([task 0 rollouts 0..n-1, task 1 ...]) and, when
    `output_path` is given, writes them there as jsonl.
    """
    with tqdm.tqdm(
        total=len(tasks) * n, desc=f"rollouts v{policy_version}", disable=not show_progress
    ) as progress:
        trajectories = await _gather_or_cancel(
            [
                _episode_with_retries(context, task, i, policy_version)
                for task in tasks
                for i in range(n)
            ],
            progress=progress,
        )
    if output_path is not None:
        write_trajectories(output_path, trajectories)
    return trajectories
