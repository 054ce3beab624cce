"""Many task environments at once for asyncio agent loops: start, step, patch, grade, clean up.

    async with EnvPool(max_envs=32) as pool:
        async with pool.acquire(task) as env:
            result = await env.step("execute_bash", {"cmd": "pytest -q"})
            patch = await env.patch()
        grade = await pool.grade(task, patch)

Blocking runtime calls run in the pool's own worker threads (one per environment
plus the start and grading slots), so the event loop never blocks and steps of
different environments run in parallel. Concurrency is bounded three ways:
`max_envs` live containers, `start_concurrency` containers starting at once,
`grade_concurrency` gradings at once. Transient Docker errors (5xx, connection
errors) are retried with backoff inside `DockerRuntime`; a start that still fails
is retried from scratch, on another host when its host stopped answering.

Where runtimes run is the pool's `placement` (`docker/placement.py`):
- Docker hosts: `docker_settings=DockerSettings(hosts=("unix:///var/run/docker.sock",
  "ssh://w2"))` (default: the local engine, or `client`). Each container goes to a healthy
  host with room, preferring one that already holds the task image; `envs_per_host` caps
  each host. Images are built on the first healthy host and copied to the others. When a
  host stops answering, it is taken out (probed again after a backoff, re-admitted when it
  answers, its leftover containers removed), its environments fail with env_error, gradings
  on it are retried on another host, and `run_with_retries` re-runs the episodes that
  failed; `metrics()` counts it all.
- A `runtime_factory` (`runtime.RuntimeFactory`), e.g. `k8s_runtime.K8sPodFactory()` for
  pods on Kubernetes (use `build_images=False` there: the cluster pulls task images from a
  registry): episodes and gradings run in its runtimes, stale cleanup goes through its
  `remove_stale`, so no local Docker engine is needed.

Cleanup: every container carries `deepswe.run=<run_label>` and its creator's
identity. Entering a pool removes containers whose creating process is dead
(e.g. after a `kill -9` of an earlier run) and all containers of
`stale_run_labels`; leaving it, interpreter exit and SIGTERM remove this
process's containers (see `ownership`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import docker

from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory
from deepswe_jax.env.docker.hosts import DockerHosts, default_endpoint
from deepswe_jax.env.docker.placement import DockerPlacement, FactoryPlacement, Placement
from deepswe_jax.env.docker.settings import DockerSettings
from deepswe_jax.env.environment import Env
from deepswe_jax.env.grading.grading import GRADING_MEM_LIMIT, GradeResult, grade_patch
from deepswe_jax.env.layouts import LAYOUTS, LayoutError
from deepswe_jax.env.ownership import install_exit_cleanup
from deepswe_jax.env.runtime import (
    DEFAULT_MAX_PATCH_BYTES,
    MissingImageError,
    Runtime,
    RuntimeFactory,
    prepare_runtime,
)
from deepswe_jax.env.tasks import Task

logger = logging.getLogger(__name__)

T = TypeVar("T")


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
    """Bounded, self-cleaning set of task environments for asyncio code (see module doc);
    implements `protocols.EnvPoolProtocol`."""

    def __init__(
        self,
        *,
        max_envs: int,
        run_label: str | None = None,
        start_concurrency: int = 4,
        grade_concurrency: int = 2,
        client: docker.DockerClient | None = None,
        docker_settings: DockerSettings | None = None,
        episode_attempts: int = 3,
        step_timeout: float = 90.0,
        stale_run_labels: tuple[str, ...] = (),
        build_images: bool = True,
        log_every: int = 50,
        runtime_factory: RuntimeFactory | None = None,
        max_patch_bytes: int = DEFAULT_MAX_PATCH_BYTES,
    ):
        """Args beyond the module docstring's:
        client: one Docker client; without it and docker_settings.hosts: the local engine
          ($DOCKER_HOST). With a runtime_factory, `client` only builds task images
          (build_images=True); episodes and grading use the factory.
        docker_settings: the Docker hosts and the limits of their containers (None: the
          defaults of DockerSettings; unused with a runtime_factory, which takes no hosts).
        episode_attempts: how often `run_with_retries` runs an episode at most.
        max_patch_bytes: the largest patch an episode may produce or have graded (larger:
          runtime.PatchTooLargeError, graded `patch_too_large`).
        """
        if max_envs < 1:
            raise ValueError(f"max_envs must be at least 1, got {max_envs}")
        if episode_attempts < 1:
            raise ValueError(f"episode_attempts must be at least 1, got {episode_attempts}")
        self.max_envs = max_envs
        self.run_label = run_label or f"pool-{uuid.uuid4().hex[:10]}"
        self.runtime_factory = runtime_factory
        self.episode_attempts = episode_attempts
        self.step_timeout = step_timeout
        self.max_patch_bytes = max_patch_bytes
        self.stale_run_labels = stale_run_labels
        self.build_images = build_images
        self.log_every = log_every
        self.stats = PoolStats()
        self._env_slots = asyncio.Semaphore(max_envs)
        self._start_slots = asyncio.Semaphore(start_concurrency)
        self._grade_slots = asyncio.Semaphore(grade_concurrency)
        self._executor = ThreadPoolExecutor(
            max_workers=max_envs + start_concurrency + grade_concurrency + 4,
            thread_name_prefix="envpool",
        )
        self._runtimes: dict[Runtime, object] = {}
        self._envs: set[Env] = set()
        self._entered = False
        self.placement: Placement
        if runtime_factory is not None:
            if docker_settings is not None and docker_settings.hosts:
                raise ValueError("give DockerSettings.hosts or a runtime_factory, not both")
            self.placement = FactoryPlacement(
                runtime_factory,
                in_thread=self._in_thread,
                build_images=build_images,
                image_client=client,
            )
        else:
            settings = docker_settings or DockerSettings()
            endpoints = settings.hosts
            if client is None and not endpoints:
                endpoints = (default_endpoint(),)
            hosts = DockerHosts(
                endpoints,
                mem_limit=settings.mem_limit,
                envs_per_host=settings.envs_per_host,
                client=client,
            )
            hosts.connect_all()
            self.placement = DockerPlacement(
                hosts,
                runtime_factory=DockerRuntimeFactory(
                    mem_limit=settings.mem_limit,
                    nano_cpus=settings.nano_cpus,
                    pids_limit=settings.pids_limit,
                    disk_limit=settings.disk_limit,
                    disk_limit_mode=settings.disk_limit_mode,
                ),
                grading_mem_limit=GRADING_MEM_LIMIT,
                in_thread=self._in_thread,
                build_images=build_images,
                run_labels=(self.run_label, *stale_run_labels),
                on_host_down=self._fail_envs_on,
                host_wait_timeout=settings.host_wait_timeout,
            )
        install_exit_cleanup()

    def _in_thread(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def __aenter__(self) -> EnvPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Remove stale runtimes (dead creators, `stale_run_labels`); called by `async with`."""
        if self._entered:
            return
        self._entered = True
        await self.placement.remove_stale(self.stale_run_labels)

    # ------------------------------------------------------------ sites

    async def probe_down_hosts(self) -> int:
        """Probe every down site now, backoff or not (e.g. after restarting its Docker daemon);
        returns how many sites are up (a runtime factory's one site is always up)."""
        return await self.placement.probe_down()

    async def _check_site(self, site: object, reason: str) -> bool:
        """After a failed call there: whether `site` still answers (taken out if not)."""
        return await self.placement.still_up(site, reason)

    def _fail_envs_on(self, site: object, reason: str) -> None:
        """`site` was taken out: its environments fail (their episodes end with env_error)."""
        for env in self._envs:
            if env.site is site and env.failure is None:
                env.failure = reason

    # ------------------------------------------------------------ environments

    async def _start_runtime(self, task: Task) -> tuple[Runtime, object]:
        """A started runtime; failed starts are retried, on another site when theirs went away."""
        placement = self.placement
        attempts = placement.attempts
        async with self._start_slots:
            for attempt in range(1, attempts + 1):
                site = await placement.reserve(task.image)
                runtime = None
                try:
                    image = await placement.prepare_image(task, site)
                    runtime = placement.runtime_factory(site)(image, run_label=self.run_label)
                    self._runtimes[runtime] = site
                    await self._in_thread(runtime.start)
                    await self._in_thread(
                        functools.partial(prepare_runtime, runtime, LAYOUTS[task.layout])
                    )
                    return runtime, site
                except BaseException as error:
                    placement.release(site, failed=True)
                    retry = isinstance(error, placement.failures)
                    # A cancelled start's runtime stays listed: close() removes it.
                    if runtime is not None and (
                        retry or isinstance(error, (MissingImageError, LayoutError))
                    ):
                        self._runtimes.pop(runtime, None)
                        await self._close_runtime(runtime, site)
                    if not retry:
                        raise
                    await self._check_site(site, repr(error))
                    if attempt == attempts:
                        raise
                    logger.warning("starting %s failed (%s); retrying", task.instance_id, error)
        raise AssertionError("unreachable")

    async def _close_runtime(self, runtime: Runtime, site: object) -> None:
        """Removes the runtime; on a site that is down, in the background (it may hang)."""
        if not self.placement.is_up(site):
            self._executor.submit(_close_quietly, runtime)
            return
        try:
            await asyncio.shield(self._in_thread(runtime.close))
        except self.placement.failures as error:
            logger.warning("removing a container failed: %r", error)
            await self._check_site(site, repr(error))

    @asynccontextmanager
    async def acquire(self, task: Task) -> AsyncIterator[Env]:
        """A started environment for `task` (tools installed, /testbed at the base commit, the
        image's layout prepared: `runtime.prepare_runtime`); its container is removed when the
        block exits."""
        if not self._entered:
            await self.start()
        async with self._env_slots:
            started = time.monotonic()
            try:
                runtime, site = await self._start_runtime(task)
            except BaseException:
                self.stats.start_failures += 1
                raise
            self.stats.started += 1
            self.stats.start_seconds.append(time.monotonic() - started)
            self.placement.record_start(site)
            env = Env(
                task,
                runtime,
                self._in_thread,
                self.step_timeout,
                site=site,
                on_failure=lambda reason: self._check_site(site, reason),
                max_patch_bytes=self.max_patch_bytes,
            )
            self._envs.add(env)
            try:
                yield env
            finally:
                self._envs.discard(env)
                self._runtimes.pop(runtime, None)
                await self._close_runtime(runtime, site)
                self.placement.release(site, failed=env.failure is not None)
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
        """Pool counters for metrics logging, and the placement's (per Docker host: envs/host<i>_active, _started)."""
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
            "envs/start_p50_s": statistics.median(self.stats.start_seconds or [0.0]),
        }
        return metrics | self.placement.metrics()

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        """Grade `patch` in a fresh runtime of the task image (grading.grade_patch) made at a
        site of the placement, at most `grade_concurrency` at once; an infra_error on a site
        that stopped answering (a Docker host) is graded again on another one."""
        async with self._grade_slots:
            result = await self._grade_on_sites(task, patch, timeout)
        self.stats.graded += 1
        return result

    async def _grade_on_sites(self, task: Task, patch: str, timeout: float) -> GradeResult:
        placement = self.placement
        attempts = placement.attempts
        for attempt in range(1, attempts + 1):
            site = await placement.reserve(task.image)
            result, error = None, ""
            try:
                await placement.prepare_image(task, site)
                factory = placement.grading_factory(site)
                result = await self._in_thread(
                    lambda f=factory: grade_patch(
                        task,
                        patch,
                        runtime_factory=f,
                        timeout=timeout,
                        run_label=self.run_label,
                        max_patch_bytes=self.max_patch_bytes,
                    )
                )
                error = result.error
            except placement.failures as e:
                if attempt == attempts:
                    raise
                error = repr(e)
            finally:
                placement.release(site, failed=result is None or result.infra_error)
            if result is not None and not result.infra_error:
                return result
            if await self._check_site(site, error) and result is not None:
                return result  # an infrastructure error that is not the site's
            if attempt == attempts:
                return result
            self.stats.grade_retries += 1
            logger.warning("grading %s failed on %s; grading again", task.instance_id, site)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Remove every container this pool still holds and stop its worker threads."""
        runtimes = list(self._runtimes.items())
        self._runtimes.clear()
        if runtimes:
            await asyncio.gather(*(self._close_runtime(r, site) for r, site in runtimes))
        self._executor.shutdown(wait=False, cancel_futures=True)
        logger.info("env pool %s closed: %s", self.run_label, self.stats.summary(0))


def _close_quietly(runtime: Runtime) -> None:
    try:
        runtime.close()
    except Exception as error:  # its host is gone; the container goes when the host is back
        logger.info("could not remove a container of an unreachable host: %r", error)
