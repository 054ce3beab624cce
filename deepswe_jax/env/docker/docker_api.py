"""Docker API calls on task containers that are not one runtime's: retries of transient engine
errors, and the removal of stale containers (of dead creators, or of given runs) by the labels
of `ownership`. `docker_runtime` runs environments in containers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import docker
import docker.errors
import requests.exceptions

from deepswe_jax.env.docker.hosts import default_client
from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL, owner_is_alive

logger = logging.getLogger(__name__)

T = TypeVar("T")


def retry_transient(
    call: Callable[[], T], what: str, *, attempts: int = 5, first_delay_s: float = 0.5
) -> T:
    """Call `call`, retrying with exponential backoff on Docker 5xx and connection errors."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (docker.errors.APIError, requests.exceptions.ConnectionError) as e:
            transient = not isinstance(e, docker.errors.APIError) or e.is_server_error()
            if isinstance(e, docker.errors.NotFound) or not transient or attempt == attempts:
                raise
            logger.warning(
                "%s failed (%s); retry %d/%d in %.1fs", what, e, attempt, attempts, delay
            )
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def _wait_until_removed(
    client: docker.DockerClient, container_id: str, name: str, *, timeout_s: float = 120.0
) -> None:
    """Polls until the container is gone; warns (and returns) after `timeout_s`."""
    deadline, delay = time.monotonic() + timeout_s, 0.05
    while True:
        try:
            client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        if time.monotonic() > deadline:
            logger.warning("%s is still being removed after %.0fs; going on", name, timeout_s)
            return
        time.sleep(delay)
        delay = min(2 * delay, 1.0)


def remove_stale_containers(
    client: docker.DockerClient | None = None, *, run_labels: tuple[str, ...] = ()
) -> list[str]:
    """Remove containers whose creating process (on this host) is dead, and every container of
    the given run labels. Returns the names removed."""
    client = client or default_client()
    removed = []
    # The low-level listing: no per-container inspect that races with concurrent removals.
    for summary in client.api.containers(all=True, filters={"label": RUN_LABEL}):
        labels = summary.get("Labels") or {}
        owner = labels.get(OWNER_LABEL)
        stale = labels.get(RUN_LABEL) in run_labels or (
            owner is not None and owner_is_alive(owner) is False
        )
        if not stale:
            continue
        name = (summary.get("Names") or [summary["Id"]])[0].lstrip("/")
        try:
            retry_transient(
                lambda i=summary["Id"]: client.api.remove_container(i, force=True, v=True),
                f"removing {name}",
            )
            removed.append(name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: removal already in progress
                raise
            # Another process (e.g. another pool entering) is removing it: wait for that, so
            # that no stale container is left when this returns.
            _wait_until_removed(client, summary["Id"], name)
    if removed:
        logger.info("removed %d stale deepswe containers", len(removed))
    return removed
