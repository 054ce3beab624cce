"""The Docker endpoints behind one env pool: which answer, how full they are, which images they hold.

    hosts = DockerHosts(["unix:///var/run/docker.sock", "ssh://ci@worker-2"], mem_limit="1g")
    host = hosts.choose("deepswe/datewise:base")   # None when no healthy host has room
    hosts.mark_down(host, "connection refused")    # probed again after a backoff
    if hosts.try_connect(host) is None: hosts.admit(host)

Endpoints: `unix:///path/to/docker.sock`, `tcp://host:2376` (TLS as for the docker CLI:
DOCKER_TLS_VERIFY / DOCKER_CERT_PATH) and `ssh://user@host` (through the `ssh` binary, so
key-based login must work non-interactively).

Placement (`choose`): among healthy hosts with room, one that already holds the image and
has free capacity, else the one with the most free capacity (ties: list order). Capacity is
`envs_per_host` when set, a hard cap; otherwise the host's memory divided by the container
memory limit, a soft target used only to spread environments.

Health: a host whose calls fail and whose ping then fails is marked down; it is probed
again after 5 s, then 10 s, 20 s, ... (at most 5 minutes) and re-admitted when it answers.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import docker
import docker.errors
import docker.utils
from docker.transport import UnixHTTPAdapter

logger = logging.getLogger(__name__)

ENDPOINT_SCHEMES = ("unix://", "tcp://", "ssh://")
# Seconds a health check may take before the host counts as unreachable.
PROBE_TIMEOUT_S = 10.0
# Timeout of ordinary API calls (image transfers and container starts can be slow).
API_TIMEOUT_S = 120.0
# docker-py keeps one urllib3 pool per URL and closes the least recently used one beyond
# `num_pools` even while another thread's request holds it; with many containers at once the
# defaults (25 pools of 10 connections) fail calls with AttributeError ('qsize' of a closed pool).
CLIENT_NUM_POOLS = 512
CLIENT_MAX_POOL_SIZE = 64
FIRST_BACKOFF_S = 5.0
MAX_BACKOFF_S = 300.0


class NoDockerHostError(RuntimeError):
    """No Docker endpoint of the pool answers."""


def check_endpoint(endpoint: str) -> str:
    """`endpoint` without surrounding spaces; raises ValueError unless it is unix://, tcp:// or ssh://."""
    endpoint = endpoint.strip()
    if not endpoint.startswith(ENDPOINT_SCHEMES) or endpoint in ENDPOINT_SCHEMES:
        raise ValueError(
            f"Docker endpoint {endpoint!r} is not unix:///path/docker.sock, tcp://host:port or "
            "ssh://user@host; fix config.env.docker_hosts"
        )
    return endpoint


def default_endpoint() -> str:
    """The endpoint `docker.from_env()` uses: $DOCKER_HOST, else the local engine's socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect_client(endpoint: str, *, timeout: float) -> docker.DockerClient:
    """A client of `endpoint` (contacts it once to agree on the API version)."""
    kwargs = docker.utils.kwargs_from_env(environment={**os.environ, "DOCKER_HOST": endpoint})
    client = docker.DockerClient(
        **kwargs,
        timeout=timeout,
        use_ssh_client=endpoint.startswith("ssh://"),
        max_pool_size=CLIENT_MAX_POOL_SIZE,
    )
    if endpoint.startswith("unix://"):  # docker-py ignores num_pools for unix sockets
        adapter = UnixHTTPAdapter(
            "http+unix://" + endpoint.removeprefix("unix://"),
            timeout,
            pool_connections=CLIENT_NUM_POOLS,
            max_pool_size=CLIENT_MAX_POOL_SIZE,
        )
        client.api.mount("http+docker://", adapter)
    return client


_DEFAULT_CLIENTS: dict[tuple[int, str, float], docker.DockerClient] = {}
_DEFAULT_CLIENTS_LOCK = threading.Lock()


def default_client(timeout: float = API_TIMEOUT_S) -> docker.DockerClient:
    """This process's shared client of the default endpoint ($DOCKER_HOST, else the local
    socket), with the pool sizes above: what the runtime, grader and image builder use when not
    given a client (`docker.from_env()` would open a client per call, each with pools that break
    under many concurrent containers). Raises docker.errors.DockerException when no engine
    answers."""
    key = (os.getpid(), default_endpoint(), timeout)  # a forked child opens its own connections
    with _DEFAULT_CLIENTS_LOCK:
        if key not in _DEFAULT_CLIENTS:
            _DEFAULT_CLIENTS[key] = connect_client(key[1], timeout=timeout)
        return _DEFAULT_CLIENTS[key]


@dataclass(eq=False)
class DockerHost:
    """One Docker endpoint and what the pool knows about it (mutated by the pool's event loop)."""

    endpoint: str
    index: int
    envs_per_host: int = 0
    client: docker.DockerClient | None = None
    probe_client: docker.DockerClient | None = None
    capacity: int = 1
    active: int = 0
    healthy: bool = False
    images: set[str] = field(default_factory=set)
    consecutive_failures: int = 0
    next_probe_at: float = 0.0
    last_error: str = ""
    started: int = 0
    failures: int = 0

    @property
    def free(self) -> int:
        """Capacity left (negative when a soft capacity is exceeded)."""
        return self.capacity - self.active

    @property
    def has_room(self) -> bool:
        return self.envs_per_host <= 0 or self.active < self.envs_per_host

    def connect(self, mem_limit_bytes: int) -> None:
        """Contact the endpoint: clients, capacity, local image tags. Blocking; raises on failure."""
        if self.client is None:
            self.client = connect_client(self.endpoint, timeout=API_TIMEOUT_S)
        if self.probe_client is None:
            given = not self.endpoint.startswith(ENDPOINT_SCHEMES)  # a caller's client
            self.probe_client = (
                self.client if given else connect_client(self.endpoint, timeout=PROBE_TIMEOUT_S)
            )
        info = self.probe_client.info()
        if self.envs_per_host > 0:
            self.capacity = self.envs_per_host
        else:
            self.capacity = max(1, int(info.get("MemTotal", 0)) // max(1, mem_limit_bytes))
        self.images = {
            tag
            for image in self.probe_client.api.images()
            for tag in image.get("RepoTags") or ()
            if tag != "<none>:<none>"
        }

    def ping(self) -> bool:
        """Whether the endpoint answers within PROBE_TIMEOUT_S (blocking)."""
        if self.probe_client is None:
            return False
        try:
            return bool(self.probe_client.ping())
        except Exception as error:  # any failure to answer means unreachable
            self.last_error = repr(error)
            return False

    def image_id(self, tag: str) -> str | None:
        """Id of image `tag` on this host, None when absent (blocking)."""
        try:
            image_id = self.client.images.get(tag).id
        except docker.errors.ImageNotFound:
            self.images.discard(tag)
            return None
        self.images.add(tag)
        return image_id

    def __str__(self) -> str:
        return self.endpoint

    def describe(self) -> str:
        state = "up" if self.healthy else f"down ({self.last_error or 'not contacted'})"
        return f"{self.endpoint}: {state}, {self.active}/{self.capacity} envs"


class DockerHosts:
    """The pool's endpoints (see the module docstring). Not thread-safe: use from one event loop;
    the blocking methods (`connect_all`, `try_connect`, `DockerHost.ping/image_id`) belong in
    worker threads."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        mem_limit: str = "1g",
        envs_per_host: int = 0,
        client: docker.DockerClient | None = None,
    ):
        """`client`: use this client as the only host instead of connecting to `endpoints`."""
        if envs_per_host < 0:
            raise ValueError(f"envs_per_host must be >= 0 (0 = no cap), got {envs_per_host}")
        self.mem_limit_bytes = docker.utils.parse_bytes(mem_limit)
        if client is not None:
            if endpoints:
                raise ValueError("give either Docker endpoints or a client, not both")
            self.hosts = [DockerHost(client.api.base_url, 0, envs_per_host, client=client)]
            return
        if not endpoints:
            raise ValueError("no Docker endpoints given; pass at least one (e.g. the local engine)")
        endpoints = [check_endpoint(e) for e in endpoints]
        duplicates = sorted({e for e in endpoints if endpoints.count(e) > 1})
        if duplicates:
            raise ValueError(f"Docker endpoints listed twice: {duplicates}; list each once")
        self.hosts = [
            DockerHost(endpoint, index, envs_per_host=envs_per_host)
            for index, endpoint in enumerate(endpoints)
        ]

    def connect_all(self) -> None:
        """Contact every endpoint (in parallel); unreachable ones are marked down. Blocking.

        Raises:
          NoDockerHostError: none answers.
        """
        with ThreadPoolExecutor(max_workers=min(16, len(self.hosts))) as workers:
            errors = list(workers.map(self.try_connect, self.hosts))
        for host, error in zip(self.hosts, errors, strict=True):
            if error is None:
                host.healthy = True
            else:
                self.mark_down(host, error)
                logger.warning("Docker host %s does not answer (%s)", host.endpoint, error)
        if not any(host.healthy for host in self.hosts):
            raise NoDockerHostError(
                "no Docker endpoint answers: "
                + "; ".join(host.describe() for host in self.hosts)
                + ". Start the Docker daemons (check with `docker -H <endpoint> info`) or fix "
                "config.env.docker_hosts"
            )

    def try_connect(self, host: DockerHost) -> str | None:
        """Contact `host` (blocking); returns None when it answers, else what went wrong."""
        try:
            host.connect(self.mem_limit_bytes)
            return None
        except Exception as error:  # an endpoint that cannot be reached for any reason is down
            return repr(error)

    def admit(self, host: DockerHost) -> None:
        """Put a host that answered `try_connect` back into placement."""
        host.healthy = True
        logger.warning("Docker host %s answers again; re-admitted", host.endpoint)

    def mark_down(self, host: DockerHost, reason: str, *, now: float | None = None) -> None:
        """Take `host` out of placement until a probe after the backoff succeeds."""
        now = time.monotonic() if now is None else now
        if host.healthy:
            host.failures += 1
            logger.warning("Docker host %s is unreachable (%s); taken out", host.endpoint, reason)
        host.healthy = False
        host.last_error = reason
        host.images.clear()
        host.next_probe_at = now + backoff_seconds(host.consecutive_failures)
        host.consecutive_failures += 1

    def due_for_probe(self, *, now: float | None = None) -> list[DockerHost]:
        """Down hosts whose backoff has passed."""
        now = time.monotonic() if now is None else now
        return [h for h in self.hosts if not h.healthy and h.next_probe_at <= now]

    def seconds_until_probe(self, *, now: float | None = None) -> float | None:
        """Seconds until the next down host is due for a probe; None when all are up."""
        now = time.monotonic() if now is None else now
        waits = [h.next_probe_at - now for h in self.hosts if not h.healthy]
        return max(0.0, min(waits)) if waits else None

    def choose(self, image: str) -> DockerHost | None:
        """Where to start a container of `image` (see the module docstring); None: no room."""
        candidates = [h for h in self.hosts if h.healthy and h.has_room]
        holding = [h for h in candidates if image in h.images and h.free > 0]
        pool = holding or candidates
        if not pool:
            return None
        return max(pool, key=lambda h: (h.free, -h.index))

    def builder(self) -> DockerHost | None:
        """The host that builds images (the first healthy one); others get copies."""
        return next((h for h in self.hosts if h.healthy), None)

    @property
    def num_healthy(self) -> int:
        return sum(h.healthy for h in self.hosts)

    def describe(self) -> str:
        return "; ".join(h.describe() for h in self.hosts)


def backoff_seconds(consecutive_failures: int) -> float:
    """Wait before probing a host that failed `consecutive_failures` times in a row before."""
    return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2**consecutive_failures)


def copy_image(tag: str, source: DockerHost, destination: DockerHost) -> None:
    """`docker save tag` on `source` streamed into `docker load` on `destination` (blocking)."""
    started = time.monotonic()
    archive = source.client.api.get_image(tag)
    for message in destination.client.api.load_image(archive):
        if "error" in message:
            raise docker.errors.APIError(
                f"loading {tag} into {destination.endpoint} failed: {message['error']}"
            )
    destination.images.add(tag)
    logger.info(
        "copied image %s from %s to %s in %.1fs",
        tag,
        source.endpoint,
        destination.endpoint,
        time.monotonic() - started,
    )
