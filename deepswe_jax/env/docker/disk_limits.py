"""How a Docker container's disk use is limited (`DISK_LIMIT_MODES`, `create_with_disk_limit`),
and what it holds on the host's disk, measured from the host (`over_limit`: the part of the
limit that needs no cooperation from the container's processes).

The container's writable layer is overlay2's upper directory on the host. Walking it counts
everything the container added or changed, whoever wrote it: files of any uid, fallocate'd
space (apparent size), processes that hid their /proc/<pid>/io. Every file, folder, link or
whiteout counts as at least one block, so a flood of empty files (inodes) runs into the same
limit as bytes. Where the host cannot read the upper directory (a remote engine, no root),
Docker's own SizeRw (`docker ps --size`) is used instead; it counts bytes, not files.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from typing import Any

import docker
import docker.errors

logger = logging.getLogger(__name__)

# How a container's disk use is limited:
#   storage_opt  Docker's --storage-opt size=: the whole writable layer (overlay2 on xfs with
#                pquota, btrfs, zfs); refused with a clear error elsewhere.
#   tool_server  the tool server: no file past the limit (RLIMIT_FSIZE) and commands killed
#                once the container has written more than the limit to disk (bytes written,
#                not space held: deleting files does not give any back).
#   auto         storage_opt where the engine supports it, else tool_server.
DISK_LIMIT_MODES = ("auto", "storage_opt", "tool_server")
# Docker engines (base URL) without --storage-opt size support, learned on first refusal.
_NO_STORAGE_OPT: set[str] = set()

# Every entry of the writable layer counts as at least this many bytes (bounds inode floods).
MIN_ENTRY_BYTES = 4096
# How often the host measures the layer while a command runs.
POLL_S = 0.25


def upper_dir(container: Any) -> str | None:
    """The host path of `container`'s writable layer when this process can read it, else None."""
    data = (container.attrs.get("GraphDriver") or {}).get("Data") or {}
    path = data.get("UpperDir")
    if path and os.access(path, os.R_OK | os.X_OK):
        return path
    return None


def layer_bytes(path: str, stop_above: int) -> int:
    """Bytes the tree at `path` holds: per entry the largest of its apparent size, its allocated
    blocks and MIN_ENTRY_BYTES. Stops counting once past `stop_above` (the result is then
    only known to be larger)."""
    total = 0
    folders = [path]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:  # removed while walking (the command is still running)
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    folders.append(entry.path)
                total += max(info.st_size, info.st_blocks * 512, MIN_ENTRY_BYTES)
                if total > stop_above:
                    return total
    return total


def docker_size_rw(api: Any, container_id: str) -> int:
    """Docker's SizeRw of the container (bytes of its writable layer; files not counted)."""
    [summary] = api.containers(all=True, filters={"id": container_id}, size=True)
    return int(summary.get("SizeRw") or 0)


def over_limit(container: Any, api: Any, limit: int, limit_text: str) -> str:
    """Why `container`'s writable layer is over `limit` bytes ("" when it is not): walked on the
    host where readable (`upper_dir`), else Docker's SizeRw."""
    upper = upper_dir(container)
    if upper is not None:
        used = layer_bytes(upper, stop_above=limit)
    else:
        used = docker_size_rw(api, container.id)
    if used <= limit:
        return ""
    return (
        f"{container.name} holds more than its disk limit of {limit_text} ({used} bytes or "
        f"more, each file counted as at least {MIN_ENTRY_BYTES} bytes); the container was stopped"
    )


def create_with_disk_limit(
    create_with: Callable[[dict[str, str] | None, list[str]], Any],
    endpoint: str,
    disk_limit: str,
    mode: str,
) -> tuple[Any, str]:
    """(container, how its disk limit applies: "storage_opt", "tool_server" or ""), made with
    `create_with(storage_opt, tool server arguments)` on the engine at `endpoint`."""
    if disk_limit and mode != "tool_server":
        if endpoint not in _NO_STORAGE_OPT:
            try:
                return create_with({"size": disk_limit}, []), "storage_opt"
            except docker.errors.APIError as error:
                if "storage-opt" not in str(error):
                    raise
                _NO_STORAGE_OPT.add(endpoint)
                logger.info(
                    "the Docker engine at %s cannot limit a container's writable layer "
                    "(--storage-opt size= needs overlay2 on xfs with pquota, btrfs or zfs): "
                    "the tool server enforces the %s disk limit",
                    endpoint,
                    disk_limit,
                )
        if mode == "storage_opt":
            raise ValueError(
                f"the Docker engine at {endpoint} does not support --storage-opt size= (it "
                "needs overlay2 on xfs with pquota, btrfs or zfs); set "
                "config.env.disk_limit_mode='auto' or 'tool_server'"
            )
    if not disk_limit:
        return create_with(None, []), ""
    limit = docker.utils.parse_bytes(disk_limit)
    return create_with(None, ["--disk-limit", str(limit)]), "tool_server"
