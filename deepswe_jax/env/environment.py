"""One started environment for one task, as the agent sees it: tool calls in, R2E-style
observations out, and the patch at the end (`protocols.EnvProtocol` over a `runtime.Runtime`).
EnvPool.acquire hands them out."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from deepswe_jax.env import observation
from deepswe_jax.env.protocols import StepResult
from deepswe_jax.env.runtime import (
    DEFAULT_MAX_PATCH_BYTES,
    EnvironmentUnavailableError,
    ExecResult,
    GitDiffError,
    Runtime,
)
from deepswe_jax.env.tasks import Task
from deepswe_jax.env.tools import FINISH_TOOLS, TOOL_SCRIPTS

logger = logging.getLogger(__name__)

T = TypeVar("T")
KNOWN_TOOLS = tuple(TOOL_SCRIPTS)


class Env:
    """One started container for one task; use through `EnvPool.acquire`.

    `site`: where it runs (the pool's placement's); `on_failure(reason)` is awaited when the
    container becomes unavailable (the pool checks the site then)."""

    def __init__(
        self,
        task: Task,
        runtime: Runtime,
        run_in_thread: Callable[[Callable[[], T]], asyncio.Future[T]],
        step_timeout: float,
        *,
        site: object,
        on_failure: Callable[[str], Awaitable[None]],
        max_patch_bytes: int = DEFAULT_MAX_PATCH_BYTES,
    ):
        self.task = task
        self.runtime = runtime
        self.step_timeout = step_timeout
        self.site = site
        self._run_in_thread = run_in_thread
        self._on_failure = on_failure
        self.max_patch_bytes = max_patch_bytes
        self.failure: str | None = None

    async def step(self, tool: str, params: Mapping[str, object]) -> StepResult:
        """Run one tool call; `params` are the call's parameters as the model wrote them."""
        started = time.monotonic()
        if tool in FINISH_TOOLS:
            return StepResult(observation.FINISHED_OBSERVATION, True, 0, 0.0)
        if tool not in TOOL_SCRIPTS:
            text = observation.unknown_tool_observation(tool, KNOWN_TOOLS)
            return StepResult(text, False, None, 0.0)
        if self.failure is not None:
            return self._env_error(self.failure, started)
        try:
            result = await self._run_in_thread(
                lambda: self.runtime.call_tool(tool, params, timeout=self.step_timeout)
            )
        except EnvironmentUnavailableError as e:
            await self._fail(str(e))
            return self._env_error(self.failure, started)
        if result.timed_out:
            text = observation.timeout_observation(tool, self.step_timeout)
        else:
            text = observation.format_observation(tool, result.output, result.exit_code)
        return StepResult(text, False, result.exit_code, result.duration_s)

    async def _fail(self, reason: str) -> None:
        self.failure = self.failure or reason
        await self._on_failure(reason)

    def _env_error(self, reason: str, started: float) -> StepResult:
        text = f"ERROR: the environment failed and the episode cannot continue: {reason}"
        return StepResult(text, True, None, time.monotonic() - started, env_error=True)

    async def run(self, cmd: str, *, timeout: float | None = None) -> ExecResult:
        """Run a raw bash command (not an agent action, no observation wrapping). Raises
        EnvironmentUnavailableError, as `patch` does, once the container has failed."""
        if self.failure is not None:
            raise EnvironmentUnavailableError(self.failure)
        timeout = self.step_timeout if timeout is None else timeout
        try:
            return await self._run_in_thread(lambda: self.runtime.run(cmd, timeout=timeout))
        except EnvironmentUnavailableError as e:
            await self._fail(str(e))
            raise

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` to absolute `path` in the container (parent folders are created);
        container failures raise as in `run`."""
        if self.failure is not None:
            raise EnvironmentUnavailableError(self.failure)
        try:
            await self._run_in_thread(lambda: self.runtime.write_file(path, data))
        except EnvironmentUnavailableError as e:
            await self._fail(str(e))
            raise

    async def patch(self) -> str:
        """The agent's changes to /testbed since the task's base commit ("" if the agent
        destroyed the repository). Raises EnvironmentUnavailableError if the container died,
        runtime.PatchTooLargeError past `max_patch_bytes` (a wrong answer, not a failure)."""
        if self.failure is not None:
            raise EnvironmentUnavailableError(self.failure)
        try:
            return await self._run_in_thread(
                lambda: self.runtime.diff(self.task.base_commit, max_bytes=self.max_patch_bytes)
            )
        except GitDiffError as e:
            logger.warning("no patch for %s: %s", self.task.instance_id, e)
            return ""
        except EnvironmentUnavailableError as e:
            await self._fail(str(e))
            raise
