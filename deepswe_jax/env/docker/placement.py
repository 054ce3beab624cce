"""Where an EnvPool's runtimes run: on its Docker hosts, or wherever one runtime factory puts them.

Before each start or grading the pool reserves a site (`reserve`, later `release`), has the
task image made ready there (`prepare_image`), and makes the runtime with the site's factory
(`runtime_factory`, or `grading_factory` for a fresh grading runtime). After a failure it asks
whether the site still answers (`still_up`); a failure that is the site's is retried on
another one. Sites are opaque to the pool (a DockerHost, or the factory).

  DockerPlacement   the Docker hosts of `hosts.DockerHosts`, one or many. Each runtime goes to
                    a healthy host with room, preferring one that already holds the task image
                    (`DockerHosts.choose`). Images are built on the first healthy host and
                    copied to the others with `docker save | docker load`. A host whose call
                    failed and whose ping then fails is taken out (its environments are told
                    through `on_host_down`), probed again after a backoff and re-admitted when
                    it answers, its leftover containers of the run removed.
  FactoryPlacement  one site that is always up: the backend of a RuntimeFactory, e.g. pods of
                    `k8s_runtime.K8sPodFactory` (its API calls retry by themselves). Task images
                    are built on the local engine when `build_images` (a cluster pulls them
                    from a registry otherwise).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import docker
import docker.errors
import requests.exceptions

from deepswe_jax.env.docker.docker_api import remove_stale_containers
from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory
from deepswe_jax.env.docker.hosts import DockerHost, DockerHosts, NoDockerHostError, copy_image
from deepswe_jax.env.runtime import EnvironmentUnavailableError, RuntimeFactory
from deepswe_jax.env.tasks import Task

logger = logging.getLogger(__name__)

T = TypeVar("T")
InThread = Callable[[Callable[[], T]], Awaitable[T]]
# Failures of a Docker call that may mean its host went away (checked with a ping).
HOST_FAILURES = (
    EnvironmentUnavailableError,
    docker.errors.APIError,
    requests.exceptions.RequestException,
)


class Placement(Protocol):
    """Sites for an EnvPool's runtimes (see the module docstring)."""

    # Errors of a start or grading that may be the site's (then `still_up` is asked).
    failures: tuple[type[BaseException], ...]

    @property
    def attempts(self) -> int:
        """How often a start or a grading is tried."""
        ...

    async def remove_stale(self, run_labels: tuple[str, ...]) -> None:
        """Remove runtimes of dead creators and of `run_labels`."""
        ...

    async def reserve(self, image: str) -> object:
        """A site with room for one more runtime of `image`; waits for room."""
        ...

    def release(self, site: object, *, failed: bool) -> None:
        """The reserved runtime is gone (`failed`: it failed)."""
        ...

    def record_start(self, site: object) -> None:
        """An environment started there."""
        ...

    async def prepare_image(self, task: Task, site: object) -> str:
        """The image to start for `task` at `site`, present there (once per image and site)."""
        ...

    def runtime_factory(self, site: object) -> RuntimeFactory:
        """Makes the environments' runtimes at `site`."""
        ...

    def grading_factory(self, site: object) -> RuntimeFactory:
        """Makes the grading runtimes at `site`."""
        ...

    def is_up(self, site: object) -> bool:
        """Whether `site` answered last (a runtime on a site that is down is removed in the
        background: the call may hang)."""
        ...

    async def still_up(self, site: object, reason: str) -> bool:
        """After a failure there: whether `site` still answers; takes it out if not."""
        ...

    async def probe_down(self) -> int:
        """Probe every site that is down now; returns how many are up."""
        ...

    def metrics(self) -> dict[str, float]:
        """Counters of the sites, for EnvPool.metrics."""
        ...


async def _once(
    cache: dict[Any, asyncio.Future[T]], key: Any, make: Callable[[], Awaitable[T]]
) -> T:
    """`make()` awaited once per `key` by every caller; a failure is forgotten (tried again)."""
    prepared = cache.get(key)
    if prepared is None:
        prepared = asyncio.ensure_future(make())
        cache[key] = prepared
    try:
        return await asyncio.shield(prepared)
    except Exception:
        if cache.get(key) is prepared:
            del cache[key]
        raise


def _ensure_task_image(task: Task, client: docker.DockerClient | None) -> str:
    from deepswe_jax.env.docker.images import ensure_task_image

    return ensure_task_image(task, client)


class FactoryPlacement:
    """Every runtime from `factory`, at one site that is always up: the factory itself (see
    the module docstring).

    `image_client`: the Docker engine that builds task images when `build_images` (None: the
    local one)."""

    failures: tuple[type[BaseException], ...] = (EnvironmentUnavailableError,)
    attempts = 2

    def __init__(
        self,
        factory: RuntimeFactory,
        *,
        in_thread: InThread,
        build_images: bool,
        image_client: docker.DockerClient | None = None,
    ):
        self.factory = factory
        self.build_images = build_images
        self.image_client = image_client
        self._in_thread = in_thread
        self._prepared_images: dict[str, asyncio.Future[str]] = {}

    async def remove_stale(self, run_labels: tuple[str, ...]) -> None:
        await self._in_thread(lambda: self.factory.remove_stale(run_labels))

    async def reserve(self, image: str) -> object:
        return self.factory

    def release(self, site: object, *, failed: bool) -> None:
        pass

    def record_start(self, site: object) -> None:
        pass

    async def prepare_image(self, task: Task, site: object) -> str:
        if not self.build_images or task.source is None:
            return task.image
        return await _once(
            self._prepared_images,
            task.image,
            lambda: self._in_thread(lambda: _ensure_task_image(task, self.image_client)),
        )

    def runtime_factory(self, site: object) -> RuntimeFactory:
        return self.factory

    def grading_factory(self, site: object) -> RuntimeFactory:
        return self.factory

    def is_up(self, site: object) -> bool:
        return True

    async def still_up(self, site: object, reason: str) -> bool:
        return True

    async def probe_down(self) -> int:
        return 1

    def metrics(self) -> dict[str, float]:
        return {}


class DockerPlacement:
    """Runtimes on the Docker hosts of `hosts` (see the module docstring).

    Args:
      hosts: the endpoints, connected (`DockerHosts.connect_all`).
      runtime_factory: the environments' settings (limits); its client is replaced by each
        host's. Grading containers get `grading_mem_limit`, the factory's disk limit and the
        runtime defaults.
      run_labels: the pool's run label and stale labels: a re-admitted host loses their
        containers.
      on_host_down: called with a host taken out and why; the pool fails its environments.
      host_wait_timeout: seconds `reserve` waits while no host answers, then fails.
    """

    failures: tuple[type[BaseException], ...] = HOST_FAILURES

    def __init__(
        self,
        hosts: DockerHosts,
        *,
        runtime_factory: DockerRuntimeFactory,
        grading_mem_limit: str,
        in_thread: InThread,
        build_images: bool,
        run_labels: tuple[str, ...],
        on_host_down: Callable[[DockerHost, str], None],
        host_wait_timeout: float = 300.0,
    ):
        self.hosts = hosts
        self.factory = runtime_factory
        self.grading_mem_limit = grading_mem_limit
        self.build_images = build_images
        self.run_labels = run_labels
        self.host_wait_timeout = host_wait_timeout
        self.image_copies = 0
        self._in_thread = in_thread
        self._on_host_down = on_host_down
        self._room_freed = asyncio.Event()
        self._prepared_images: dict[tuple[str, int], asyncio.Future[str]] = {}
        self._host_checks: dict[int, asyncio.Future[None]] = {}

    @property
    def attempts(self) -> int:
        return len(self.hosts.hosts) + 1

    async def remove_stale(self, run_labels: tuple[str, ...]) -> None:
        await asyncio.gather(
            *(
                self._in_thread(
                    lambda h=host: remove_stale_containers(h.client, run_labels=run_labels)
                )
                for host in self.hosts.hosts
                if host.healthy
            )
        )

    # ------------------------------------------------------------ placement

    async def reserve(self, image: str) -> DockerHost:
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

    def release(self, site: DockerHost, *, failed: bool) -> None:
        site.active -= 1
        if not failed and site.healthy:
            site.consecutive_failures = 0
        self._room_freed.set()  # wakes every waiter of this event; later waiters get a new one
        self._room_freed = asyncio.Event()

    def record_start(self, site: DockerHost) -> None:
        site.started += 1

    def runtime_factory(self, site: DockerHost) -> RuntimeFactory:
        return dataclasses.replace(self.factory, client=site.client)

    def grading_factory(self, site: DockerHost) -> RuntimeFactory:
        return DockerRuntimeFactory(
            site.client,
            mem_limit=self.grading_mem_limit,
            disk_limit=self.factory.disk_limit,
            disk_limit_mode=self.factory.disk_limit_mode,
        )

    # ------------------------------------------------------------ health

    def is_up(self, site: DockerHost) -> bool:
        return site.healthy

    async def _probe(self, host: DockerHost) -> None:
        """Re-admit a down host if it answers: its leftover containers of this run are removed."""

        async def probe() -> None:
            error = await self._in_thread(lambda: self.hosts.try_connect(host))
            if error is None:
                try:
                    await self._in_thread(
                        lambda: remove_stale_containers(host.client, run_labels=self.run_labels)
                    )
                except HOST_FAILURES as e:
                    error = repr(e)
            if error is None:
                self.hosts.admit(host)
            else:
                self.hosts.mark_down(host, error)

        await self._once_per_host(host, probe)

    async def probe_down(self) -> int:
        await asyncio.gather(*(self._probe(h) for h in self.hosts.hosts if not h.healthy))
        return self.hosts.num_healthy

    async def still_up(self, site: DockerHost, reason: str) -> bool:
        if not site.healthy:
            return False

        async def check() -> None:
            if not await self._in_thread(site.ping) and site.healthy:
                self._take_out(site, f"{reason}; ping failed: {site.last_error}")

        await self._once_per_host(site, check)
        return site.healthy

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
        self._on_host_down(host, f"Docker host {host.endpoint} stopped answering ({reason})")

    # ------------------------------------------------------------ images on hosts

    async def prepare_image(self, task: Task, site: DockerHost) -> str:
        """`task.image`, present and up to date on `site` (once per image and host)."""
        return await _once(
            self._prepared_images, (task.image, site.index), lambda: self._copy_image(task, site)
        )

    async def _copy_image(self, task: Task, host: DockerHost) -> str:
        """Builds the image on the builder host (the first healthy one); copies it elsewhere."""
        source = None
        if self.build_images and task.source is not None:
            builder = self.hosts.builder()
            if builder is None or builder is host:
                image = await self._in_thread(lambda: _ensure_task_image(task, host.client))
                host.images.add(image)
                return image
            await self.prepare_image(task, builder)
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
            self.image_copies += 1
        return task.image

    def metrics(self) -> dict[str, float]:
        """Image copies and, per host, envs/host<i>_active and _started."""
        metrics = {
            "envs/image_copies": self.image_copies,
            "envs/hosts_up": self.hosts.num_healthy,
            "envs/host_failures": sum(h.failures for h in self.hosts.hosts),
        }
        for host in self.hosts.hosts:
            metrics[f"envs/host{host.index}_active"] = host.active
            metrics[f"envs/host{host.index}_started"] = host.started
        return metrics
