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
is retried from scratch, on another host when its host stopped answering.

Several Docker hosts: `docker_hosts=["unix:///var/run/docker.sock", "ssh://w2", ...]`
(default: the local engine, or `client`). Each container goes to a healthy host with
room, preferring one that already holds the task image (see `hosts.DockerHosts.choose`);
`envs_per_host` caps each host. Images are built on the first healthy host and copied
to the others with `docker save | docker load`. When a host stops answering, it is taken
out (probed again after a backoff, re-admitted when it answers, its leftover containers
removed), its environments fail with env_error, gradings on it are retried on another
host, and `run_with_retries` re-runs the episodes that failed; `metrics()` counts it all.

Other backends: `runtime_factory` makes the runtimes instead of DockerRuntime, e.g.
`k8s_runtime.K8sPodFactory()` for pods on Kubernetes (use `build_images=False` there:
the cluster pulls task images from a registry); stale cleanup then goes through the
factory's `remove_stale`, and `grade` grades in a fresh runtime of the factory (a new pod),
so no local Docker engine is needed.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

import docker
import docker.errors
import requests.exceptions

from deepswe_jax.env import observation
from deepswe_jax.env.docker_runtime import DockerRuntime, remove_stale_containers
from deepswe_jax.env.hosts import (
    DockerHost,
    DockerHosts,
    NoDockerHostError,
    copy_image,
    default_endpoint,
)
from deepswe_jax.env.ownership import install_exit_cleanup
from deepswe_jax.env.runtime import (
    EnvironmentUnavailableError,
    ExecResult,
    GitDiffError,
    MissingImageError,
)
from deepswe_jax.env.tasks import Task
from deepswe_jax.env.tools import FINISH_TOOLS, TOOL_SCRIPTS

if TYPE_CHECKING:
    from deepswe_jax.env.grading import GradeResult
    from deepswe_jax.env.k8s_runtime import K8sRuntime

logger = logging.getLogger(__name__)

T = TypeVar("T")
KNOWN_TOOLS = tuple(TOOL_SCRIPTS)
# Failures of a Docker call that may mean its host went away (checked with a ping).
HOST_FAILURES = (
    EnvironmentUnavailableError,
    docker.errors.APIError,
    requests.exceptions.RequestException,
)


class RuntimeFactory(Protocol):
    """Makes unstarted runtimes with DockerRuntime's interface and removes stale ones."""

    def __call__(self, image: str, *, run_label: str) -> DockerRuntime | K8sRuntime: ...

    def remove_stale(self, run_labels: tuple[str, ...]) -> list[str]: ...


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
    """One started container for one task; use through `EnvPool.acquire`.

    `host`: the Docker host it runs on (None for other backends); `on_failure(reason)` is
    awaited when the container becomes unavailable (the pool checks the host then)."""

    def __init__(
        self,
        task: Task,
        runtime: DockerRuntime,
        run_in_thread: Callable[[Callable[[], T]], asyncio.Future[T]],
        step_timeout: float,
        *,
        host: DockerHost | None = None,
        on_failure: Callable[[str], Awaitable[None]] | None = None,
    ):
        self.task = task
        self.runtime = runtime
        self.step_timeout = step_timeout
        self.host = host
        self._run_in_thread = run_in_thread
        self._on_failure = on_failure
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
        if self._on_failure is not None:
            await self._on_failure(reason)

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
        if self.failure is not None:
            raise EnvironmentUnavailableError(self.failure)
        try:
            return await self._run_in_thread(lambda: self.runtime.diff(self.task.base_commit))
        except GitDiffError as e:
            logger.warning("no patch for %s: %s", self.task.instance_id, e)
            return ""
        except EnvironmentUnavailableError as e:
            await self._fail(str(e))
            raise


@dataclass
class PoolStats:
    """Counters of one pool (mutable; read them for progress reports)."""

    started: int = 0
    released: int = 0
    start_failures: int = 0
    env_errors: int = 0
    graded: int = 0
    episode_retries: int = 0
    episodes_given_up: int = 0
    grade_retries: int = 0
    image_copies: int = 0
    start_seconds: list[float] = field(default_factory=list)

    def summary(self, active: int) -> str:
        times = self.start_seconds or [0.0]
        return (
            f"{self.released} episodes done, {active} active, {self.start_failures} start failures, "
            f"{self.env_errors} env errors, {self.episode_retries} episode retries, "
            f"{self.episodes_given_up} given up, {self.graded} graded, start p50 "
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
        docker_hosts: Sequence[str] = (),
        envs_per_host: int = 0,
        episode_attempts: int = 3,
        host_wait_timeout: float = 300.0,
        mem_limit: str = "1g",
        nano_cpus: int = 1_000_000_000,
        pids_limit: int = 256,
        step_timeout: float = 90.0,
        stale_run_labels: tuple[str, ...] = (),
        build_images: bool = True,
        log_every: int = 50,
        runtime_factory: RuntimeFactory | None = None,
    ):
        """Args beyond the module docstring's:
        client / docker_hosts: one Docker client, or endpoints (unix://, tcp://, ssh://);
          neither: the local engine ($DOCKER_HOST). With a runtime_factory, `client` only
          builds task images (build_images=True); episodes and grading use the factory.
        envs_per_host: most containers per Docker host (0: no cap beyond max_envs).
        episode_attempts: how often `run_with_retries` runs an episode at most.
        host_wait_timeout: seconds a start waits while no Docker host answers, then fails.
        """
        if max_envs < 1:
            raise ValueError(f"max_envs must be at least 1, got {max_envs}")
        if episode_attempts < 1:
            raise ValueError(f"episode_attempts must be at least 1, got {episode_attempts}")
        self.max_envs = max_envs
        self.run_label = run_label or f"pool-{uuid.uuid4().hex[:10]}"
        self.runtime_factory = runtime_factory
        self.hosts: DockerHosts | None = None
        if runtime_factory is not None:
            if docker_hosts:
                raise ValueError("give docker_hosts or a runtime_factory, not both")
        else:
            if client is None and not docker_hosts:
                docker_hosts = [default_endpoint()]
            self.hosts = DockerHosts(
                docker_hosts, mem_limit=mem_limit, envs_per_host=envs_per_host, client=client
            )
            self.hosts.connect_all()
        self.client = client  # with a runtime_factory, the image builder's engine (None: local)
        self.episode_attempts = episode_attempts
        self.host_wait_timeout = host_wait_timeout
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
        self._room_freed = asyncio.Event()
        self._executor = ThreadPoolExecutor(
            max_workers=max_envs + start_concurrency + grade_concurrency + 4,
            thread_name_prefix="envpool",
        )
        self._prepared_images: dict[tuple[str, int], asyncio.Future[str]] = {}
        self._host_checks: dict[int, asyncio.Future[None]] = {}
        self._runtimes: dict[DockerRuntime | K8sRuntime, DockerHost | None] = {}
        self._envs: set[Env] = set()
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
        if self.runtime_factory is not None:
            await self._in_thread(lambda: self.runtime_factory.remove_stale(self.stale_run_labels))
            return
        await asyncio.gather(
            *(
                self._in_thread(
                    lambda h=host: remove_stale_containers(
                        h.client, run_labels=self.stale_run_labels
                    )
                )
                for host in self.hosts.hosts
                if host.healthy
            )
        )

    # ------------------------------------------------------------ hosts: placement and health

    async def _reserve_host(self, image: str) -> DockerHost:
        """A healthy host with room for one more container of `image` (counted as active there);
        waits for room, and while no host answers, at most `host_wait_timeout` seconds."""
        unreachable_since: float | None = None
        while True:
            room_freed = self._room_freed
            await asyncio.gather(*(self._probe(h) for h in self.hosts.due_for_probe()))
            host = self.hosts.choose(image)
            if host is not None:
                host.active += 1
                return host
            if self.hosts.num_healthy:
                unreachable_since = None
            elif unreachable_since is None:
                unreachable_since = time.monotonic()
            elif time.monotonic() - unreachable_since > self.host_wait_timeout:
                raise NoDockerHostError(
                    f"no Docker host answered for {self.host_wait_timeout:.0f}s: "
                    f"{self.hosts.describe()}; start the daemons or fix config.env.docker_hosts"
                )
            until_probe = self.hosts.seconds_until_probe()
            wait_s = 30.0 if until_probe is None else min(30.0, until_probe + 0.05)
            try:
                await asyncio.wait_for(room_freed.wait(), wait_s)
            except asyncio.TimeoutError:
                pass

    def _release_host(self, host: DockerHost, *, failed: bool) -> None:
        host.active -= 1
        if not failed and host.healthy:
            host.consecutive_failures = 0
        self._room_freed.set()  # wakes every waiter of this event; later waiters get a new one
        self._room_freed = asyncio.Event()

    async def _probe(self, host: DockerHost) -> None:
        """Re-admit a down host if it answers: its leftover containers of this run are removed."""

        async def probe() -> None:
            error = await self._in_thread(lambda: self.hosts.try_connect(host))
            if error is None:
                labels = (self.run_label, *self.stale_run_labels)
                try:
                    await self._in_thread(
                        lambda: remove_stale_containers(host.client, run_labels=labels)
                    )
                except HOST_FAILURES as e:
                    error = repr(e)
            if error is None:
                self.hosts.admit(host)
            else:
                self.hosts.mark_down(host, error)

        await self._once_per_host(host, probe)

    async def probe_down_hosts(self) -> int:
        """Probe every down host now, backoff or not (e.g. after restarting its daemon);
        returns how many hosts are up."""
        if self.hosts is None:
            return 0
        await asyncio.gather(*(self._probe(h) for h in self.hosts.hosts if not h.healthy))
        return self.hosts.num_healthy

    async def _check_host(self, host: DockerHost | None, reason: str) -> bool:
        """After a failed Docker call: whether `host` still answers; takes it out if not."""
        if host is None or not host.healthy:
            return host is None

        async def check() -> None:
            if not await self._in_thread(host.ping) and host.healthy:
                self._take_out(host, f"{reason}; ping failed: {host.last_error}")

        await self._once_per_host(host, check)
        return host.healthy

    async def _once_per_host(self, host: DockerHost, check: Callable[[], Awaitable[None]]) -> None:
        """Runs `check` unless a check of `host` is in flight, then waits for that one."""
        running = self._host_checks.get(host.index)
        if running is None:
            running = asyncio.ensure_future(check())
            self._host_checks[host.index] = running
            running.add_done_callback(lambda _: self._host_checks.pop(host.index, None))
        await asyncio.shield(running)

    def _take_out(self, host: DockerHost, reason: str) -> None:
        """Host `host` stopped answering: no new containers there; its environments fail."""
        self.hosts.mark_down(host, reason)
        for key in [key for key in self._prepared_images if key[1] == host.index]:
            del self._prepared_images[key]
        for env in self._envs:
            if env.host is host and env.failure is None:
                env.failure = f"Docker host {host.endpoint} stopped answering ({reason})"

    # ------------------------------------------------------------ images on hosts

    async def _image_for(self, task: Task, host: DockerHost | None) -> str:
        """`task.image`, present and up to date on `host` (once per image and host)."""
        if host is None and (not self.build_images or task.source is None):
            return task.image
        key = (task.image, -1 if host is None else host.index)
        prepared = self._prepared_images.get(key)
        if prepared is None:
            prepared = asyncio.ensure_future(
                self._prepare_image(task, host)
                if host is not None
                else self._in_thread(lambda: self._ensure_task_image(task, self.client))
            )
            self._prepared_images[key] = prepared
        try:
            return await asyncio.shield(prepared)
        except Exception:
            if self._prepared_images.get(key) is prepared:
                del self._prepared_images[key]
            raise

    @staticmethod
    def _ensure_task_image(task: Task, client: docker.DockerClient | None) -> str:
        from deepswe_jax.env.images import ensure_task_image

        return ensure_task_image(task, client)

    async def _prepare_image(self, task: Task, host: DockerHost) -> str:
        """Builds the image on the builder host (the first healthy one); copies it elsewhere."""
        source = None
        if self.build_images and task.source is not None:
            builder = self.hosts.builder()
            if builder is None or builder is host:
                image = await self._in_thread(lambda: self._ensure_task_image(task, host.client))
                host.images.add(image)
                return image
            await self._image_for(task, builder)
            source = builder
        present_id = await self._in_thread(lambda: host.image_id(task.image))
        if source is None:
            if present_id is not None:
                return task.image
            holders = [h for h in self.hosts.hosts if h.healthy and task.image in h.images]
            if not holders:
                return task.image  # the runtime's start raises MissingImageError
            source = holders[0]
        wanted_id = await self._in_thread(lambda: source.image_id(task.image))
        if wanted_id is not None and wanted_id != present_id:
            await self._in_thread(lambda: copy_image(task.image, source, host))
            self.stats.image_copies += 1
        return task.image

    # ------------------------------------------------------------ environments

    async def _start_runtime(self, task: Task) -> tuple[DockerRuntime | K8sRuntime, DockerHost]:
        """A started runtime; failed starts are retried, on another host when theirs went away."""
        attempts = 2 if self.hosts is None else len(self.hosts.hosts) + 1
        async with self._start_slots:
            for attempt in range(1, attempts + 1):
                host = None if self.hosts is None else await self._reserve_host(task.image)
                runtime = None
                try:
                    image = await self._image_for(task, host)
                    runtime = self._new_runtime(image, host)
                    self._runtimes[runtime] = host
                    await self._in_thread(runtime.start)
                    return runtime, host
                except BaseException as error:
                    if host is not None:
                        self._release_host(host, failed=True)
                    retry = isinstance(error, HOST_FAILURES)
                    # A cancelled start's runtime stays listed: close() removes it.
                    if runtime is not None and (retry or isinstance(error, MissingImageError)):
                        self._runtimes.pop(runtime, None)
                        await self._close_runtime(runtime, host)
                    if not retry:
                        raise
                    await self._check_host(host, repr(error))
                    if attempt == attempts:
                        raise
                    logger.warning("starting %s failed (%s); retrying", task.instance_id, error)
        raise AssertionError("unreachable")

    def _new_runtime(self, image: str, host: DockerHost | None) -> DockerRuntime | K8sRuntime:
        if self.runtime_factory is not None:
            return self.runtime_factory(image, run_label=self.run_label)
        return DockerRuntime(
            image,
            run_label=self.run_label,
            client=host.client,
            mem_limit=self.mem_limit,
            nano_cpus=self.nano_cpus,
            pids_limit=self.pids_limit,
        )

    async def _close_runtime(
        self, runtime: DockerRuntime | K8sRuntime, host: DockerHost | None
    ) -> None:
        """Removes the container; on a host that is down, in the background (it may hang)."""
        if host is not None and not host.healthy:
            self._executor.submit(_close_quietly, runtime)
            return
        try:
            await asyncio.shield(self._in_thread(runtime.close))
        except HOST_FAILURES as error:
            logger.warning("removing a container failed: %r", error)
            await self._check_host(host, repr(error))

    @asynccontextmanager
    async def acquire(self, task: Task) -> AsyncIterator[Env]:
        """A started environment for `task` (tools installed, /testbed at the base commit);
        its container is removed when the block exits."""
        if not self._entered:
            await self.start()
        async with self._env_slots:
            started = time.monotonic()
            try:
                runtime, host = await self._start_runtime(task)
            except BaseException:
                self.stats.start_failures += 1
                raise
            self.stats.started += 1
            self.stats.start_seconds.append(time.monotonic() - started)
            if host is not None:
                host.started += 1
            env = Env(
                task,
                runtime,
                self._in_thread,
                self.step_timeout,
                host=host,
                on_failure=lambda reason: self._check_host(host, reason),
            )
            self._envs.add(env)
            try:
                yield env
            finally:
                self._envs.discard(env)
                self._runtimes.pop(runtime, None)
                await self._close_runtime(runtime, host)
                if host is not None:
                    self._release_host(host, failed=env.failure is not None)
                self.stats.released += 1
                self.stats.env_errors += env.failure is not None
                if self.log_every and self.stats.released % self.log_every == 0:
                    logger.info("env pool %s: %s", self.run_label, self.stats.summary(self.active))

    async def run_with_retries(
        self,
        episode: Callable[[], Awaitable[T]],
        *,
        failed: Callable[[T], bool],
        name: str = "episode",
    ) -> T:
        """Runs `episode()` again while `failed(result)` (an infrastructure failure, e.g. its
        host went away), at most `episode_attempts` times; returns the last result.

        Each re-run counts in `envs/episode_retries`; an episode still failing after the last
        attempt counts in `envs/episodes_given_up` (and is returned, flagged by `failed`).
        For the agent: `pool.run_with_retries(lambda: run_episode(...),
        failed=lambda trajectory: trajectory.infra_error)`.
        """
        for attempt in range(1, self.episode_attempts + 1):
            result = await episode()
            if not failed(result):
                return result
            if attempt == self.episode_attempts:
                self.stats.episodes_given_up += 1
                logger.warning("%s failed %d times on infrastructure; giving up", name, attempt)
                return result
            self.stats.episode_retries += 1
            logger.warning(
                "%s failed on infrastructure; running it again (%d/%d)",
                name,
                attempt + 1,
                self.episode_attempts,
            )
        raise AssertionError("unreachable")

    @property
    def active(self) -> int:
        """Containers currently held by this pool."""
        return len(self._runtimes)

    def metrics(self) -> dict[str, float]:
        """Pool counters for metrics logging (per host: envs/host<i>_active, _started)."""
        metrics = {
            "envs/active": self.active,
            "envs/started": self.stats.started,
            "envs/released": self.stats.released,
            "envs/start_failures": self.stats.start_failures,
            "envs/env_errors": self.stats.env_errors,
            "envs/graded": self.stats.graded,
            "envs/episode_retries": self.stats.episode_retries,
            "envs/episodes_given_up": self.stats.episodes_given_up,
            "envs/grade_retries": self.stats.grade_retries,
            "envs/image_copies": self.stats.image_copies,
            "envs/start_p50_s": statistics.median(self.stats.start_seconds or [0.0]),
        }
        if self.hosts is not None:
            metrics["envs/hosts_up"] = self.hosts.num_healthy
            metrics["envs/host_failures"] = sum(h.failures for h in self.hosts.hosts)
            for host in self.hosts.hosts:
                metrics[f"envs/host{host.index}_active"] = host.active
                metrics[f"envs/host{host.index}_started"] = host.started
        return metrics

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        """Grade `patch` in a fresh container of the task image (env.grading.grade_patch),
        made by the runtime_factory when the pool has one, at most `grade_concurrency` at
        once; an infra_error on a Docker host that stopped answering is graded again on
        another host."""
        from deepswe_jax.env.grading import grade_patch

        async with self._grade_slots:
            if self.runtime_factory is not None:
                await self._image_for(task, None)
                result = await self._in_thread(
                    lambda: grade_patch(
                        task,
                        patch,
                        runtime_factory=self.runtime_factory,
                        timeout=timeout,
                        run_label=self.run_label,
                    )
                )
            else:
                result = await self._grade_on_hosts(grade_patch, task, patch, timeout)
        self.stats.graded += 1
        return result

    async def _grade_on_hosts(
        self, grade_patch: Callable[..., GradeResult], task: Task, patch: str, timeout: float
    ) -> GradeResult:
        attempts = len(self.hosts.hosts) + 1
        for attempt in range(1, attempts + 1):
            host = await self._reserve_host(task.image)
            result, error = None, ""
            try:
                await self._image_for(task, host)
                result = await self._in_thread(
                    lambda h=host: grade_patch(
                        task, patch, client=h.client, timeout=timeout, run_label=self.run_label
                    )
                )
                error = result.error
            except HOST_FAILURES as e:
                if attempt == attempts:
                    raise
                error = repr(e)
            finally:
                self._release_host(host, failed=result is None or result.infra_error)
            if result is not None and not result.infra_error:
                return result
            if await self._check_host(host, error) and result is not None:
                return result  # an infrastructure error that is not the host's
            if attempt == attempts:
                return result
            self.stats.grade_retries += 1
            logger.warning(
                "grading %s failed on %s; grading again", task.instance_id, host.endpoint
            )
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Remove every container this pool still holds and stop its worker threads."""
        runtimes = list(self._runtimes.items())
        self._runtimes.clear()
        if runtimes:
            await asyncio.gather(*(self._close_runtime(r, host) for r, host in runtimes))
        self._executor.shutdown(wait=False, cancel_futures=True)
        logger.info("env pool %s closed: %s", self.run_label, self.stats.summary(0))


def _close_quietly(runtime: DockerRuntime | K8sRuntime) -> None:
    try:
        runtime.close()
    except Exception as error:  # its host is gone; the container goes when the host is back
        logger.info("could not remove a container of an unreachable host: %r", error)
