"""Many task containers at once for asyncio agent loops: start, step, patch, grade, clean up.

    async with EnvPool(max_envs=32) as pool:
        async with pool.acquire(task) as env:
            result = await env.step("execute_bash", {"cmd": "pytest -q"})
            patch = await env.patch()
        grade = await pool.grade(task, patch)

Blocking Docker calls run in the pool's own worker threads (one per environment
plus the start and grading slots), so the event loop never blocks and steps of
different environments run in parallel. Concurrency is bounded three ways:
`max_envs` live containers, `start_concurrency` containers starting at once,
`grade_concurrency` gradings at once. Transient Docker errors (5xx, connection
errors) are retried with backoff inside `DockerRuntime`; a start that still fails
is retried once more from scratch.

Cleanup: every container carries `deepswe.run=<run_label>` and its creator's
identity. Entering a pool removes containers whose creating process is dead
(e.g. after a `kill -9` of an earlier run) and all containers of
`stale_run_labels`; leaving it, interpreter exit and SIGTERM remove this
process's containers (see `docker_runtime`).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import docker

from deepswe_jax.env import observation
from deepswe_jax.env.docker_runtime import (
    DockerRuntime,
    EnvironmentUnavailableError,
    ExecResult,
    GitDiffError,
    MissingImageError,
    install_exit_cleanup,
    remove_stale_containers,
)
from deepswe_jax.env.tasks import Task
from deepswe_jax.env.tools import FINISH_TOOLS, TOOL_SCRIPTS

if TYPE_CHECKING:
    from deepswe_jax.env.grading import GradeResult

logger = logging.getLogger(__name__)

T = TypeVar("T")
KNOWN_TOOLS = tuple(TOOL_SCRIPTS)


@dataclass(frozen=True)
class StepResult:
    """One tool call as the agent sees it.

    observation: R2E-style text ("Exit code: N\\nExecution output of [execute_bash]:\\n...").
    done: the agent called finish/submit, or the environment failed (env_error).
    exit_code: the tool's exit status; None for a timeout, an unknown tool or env_error.
    env_error: the container died or stopped answering (an infrastructure failure, not
      the agent's fault); the episode cannot continue.
    """

    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool = False


class Env:
    """One started container for one task; use through `EnvPool.acquire`."""

    def __init__(
        self,
        task: Task,
        runtime: DockerRuntime,
        run_in_thread: Callable[[Callable[[], T]], asyncio.Future[T]],
        step_timeout: float,
    ):
        self.task = task
        self.runtime = runtime
        self.step_timeout = step_timeout
        self._run_in_thread = run_in_thread
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
            self.failure = str(e)
            return self._env_error(self.failure, started)
        if result.timed_out:
            text = observation.timeout_observation(tool, self.step_timeout)
        else:
            text = observation.format_observation(tool, result.output, result.exit_code)
        return StepResult(text, False, result.exit_code, result.duration_s)

    def _env_error(self, reason: str, started: float) -> StepResult:
        text = f"ERROR: the environment failed and the episode cannot continue: {reason}"
        return StepResult(text, True, None, time.monotonic() - started, env_error=True)

    async def run(self, cmd: str, *, timeout: float | None = None) -> ExecResult:
        """Run a raw bash command (not an agent action, no observation wrapping)."""
        timeout = self.step_timeout if timeout is None else timeout
        return await self._run_in_thread(lambda: self.runtime.run(cmd, timeout=timeout))

    async def patch(self) -> str:
        """The agent's changes to /testbed since the task's base commit ("" if the agent
        destroyed the repository). Raises EnvironmentUnavailableError if the container died."""
        try:
            return await self._run_in_thread(lambda: self.runtime.diff(self.task.base_commit))
        except GitDiffError as e:
            logger.warning("no patch for %s: %s", self.task.instance_id, e)
            return ""


@dataclass
class PoolStats:
    """Counters of one pool (mutable; read them for progress reports)."""

    started: int = 0
    released: int = 0
    start_failures: int = 0
    env_errors: int = 0
    graded: int = 0
    start_seconds: list[float] = field(default_factory=list)

    def summary(self, active: int) -> str:
        times = self.start_seconds or [0.0]
        return (
            f"{self.released} episodes done, {active} active, {self.start_failures} start failures, "
            f"{self.env_errors} env errors, {self.graded} graded, start p50 "
            f"{statistics.median(times):.2f}s"
        )


class EnvPool:
    """Bounded, self-cleaning set of task containers for asyncio code (see module doc)."""

    def __init__(
        self,
        *,
        max_envs: int,
        run_label: str | None = None,
        start_concurrency: int = 4,
        grade_concurrency: int = 2,
        client: docker.DockerClient | None = None,
        mem_limit: str = "1g",
        nano_cpus: int = 1_000_000_000,
        pids_limit: int = 256,
        step_timeout: float = 90.0,
        stale_run_labels: tuple[str, ...] = (),
        build_images: bool = True,
        log_every: int = 50,
    ):
        if max_envs < 1:
            raise ValueError(f"max_envs must be at least 1, got {max_envs}")
        self.max_envs = max_envs
        self.run_label = run_label or f"pool-{uuid.uuid4().hex[:10]}"
        self.client = client or docker.from_env(timeout=120)
        self.mem_limit = mem_limit
        self.nano_cpus = nano_cpus
        self.pids_limit = pids_limit
        self.step_timeout = step_timeout
        self.stale_run_labels = stale_run_labels
        self.build_images = build_images
        self.log_every = log_every
        self.stats = PoolStats()
        self._env_slots = asyncio.Semaphore(max_envs)
        self._start_slots = asyncio.Semaphore(start_concurrency)
        self._grade_slots = asyncio.Semaphore(grade_concurrency)
        self._executor = ThreadPoolExecutor(
            max_workers=max_envs + start_concurrency + grade_concurrency + 2,
            thread_name_prefix="envpool",
        )
        self._prepared_images: dict[str, asyncio.Task[str]] = {}
        self._runtimes: set[DockerRuntime] = set()
        self._entered = False
        install_exit_cleanup()

    def _in_thread(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def __aenter__(self) -> EnvPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Remove stale containers (dead creators, `stale_run_labels`); called by `async with`."""
        if self._entered:
            return
        self._entered = True
        await self._in_thread(
            lambda: remove_stale_containers(self.client, run_labels=self.stale_run_labels)
        )

    async def _image_for(self, task: Task) -> str:
        """The task's image, built once per pool when `build_images` and the task has a source."""
        if not self.build_images or task.source is None:
            return task.image
        if task.image not in self._prepared_images:
            from deepswe_jax.env.images import ensure_task_image

            self._prepared_images[task.image] = asyncio.ensure_future(
                self._in_thread(lambda: ensure_task_image(task, self.client))
            )
        return await self._prepared_images[task.image]

    async def _start_runtime(self, task: Task) -> DockerRuntime:
        image = await self._image_for(task)
        async with self._start_slots:
            for attempt in (1, 2):
                runtime = DockerRuntime(
                    image,
                    run_label=self.run_label,
                    client=self.client,
                    mem_limit=self.mem_limit,
                    nano_cpus=self.nano_cpus,
                    pids_limit=self.pids_limit,
                )
                self._runtimes.add(runtime)
                try:
                    await self._in_thread(runtime.start)
                    return runtime
                except MissingImageError:
                    self._runtimes.discard(runtime)
                    raise
                except (EnvironmentUnavailableError, docker.errors.APIError) as e:
                    self._runtimes.discard(runtime)
                    await self._in_thread(runtime.close)
                    if attempt == 2:
                        raise
                    logger.warning("starting %s failed (%s); retrying", task.instance_id, e)
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def acquire(self, task: Task) -> AsyncIterator[Env]:
        """A started environment for `task` (tools installed, /testbed at the base commit);
        its container is removed when the block exits."""
        if not self._entered:
            await self.start()
        async with self._env_slots:
            started = time.monotonic()
            try:
                runtime = await self._start_runtime(task)
            except BaseException:
                self.stats.start_failures += 1
                raise
            self.stats.started += 1
            self.stats.start_seconds.append(time.monotonic() - started)
            env = Env(task, runtime, self._in_thread, self.step_timeout)
            try:
                yield env
            finally:
                self._runtimes.discard(runtime)
                await asyncio.shield(self._in_thread(runtime.close))
                self.stats.released += 1
                self.stats.env_errors += env.failure is not None
                if self.log_every and self.stats.released % self.log_every == 0:
                    logger.info("env pool %s: %s", self.run_label, self.stats.summary(self.active))

    @property
    def active(self) -> int:
        """Containers currently held by this pool."""
        return len(self._runtimes)

    def metrics(self) -> dict[str, float]:
        """Pool counters for metrics logging."""
        return {
            "envs/active": self.active,
            "envs/started": self.stats.started,
            "envs/released": self.stats.released,
            "envs/start_failures": self.stats.start_failures,
            "envs/env_errors": self.stats.env_errors,
            "envs/graded": self.stats.graded,
            "envs/start_p50_s": statistics.median(self.stats.start_seconds or [0.0]),
        }

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        """Grade `patch` in a fresh container of the task image (env.grading.grade_patch),
        at most `grade_concurrency` at once."""
        from deepswe_jax.env.grading import grade_patch

        async with self._grade_slots:
            result = await self._in_thread(
                lambda: grade_patch(
                    task, patch, client=self.client, timeout=timeout, run_label=self.run_label
                )
            )
        self.stats.graded += 1
        return result

    async def close(self) -> None:
        """Remove every container this pool still holds and stop its worker threads."""
        runtimes = list(self._runtimes)
        self._runtimes.clear()
        if runtimes:
            await asyncio.gather(*(self._in_thread(r.close) for r in runtimes))
        self._executor.shutdown(wait=False, cancel_futures=True)
        logger.info("env pool %s closed: %s", self.run_label, self.stats.summary(0))
