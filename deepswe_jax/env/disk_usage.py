"""What a Docker container holds on the host's disk, measured from the host (the disk limit
that needs no cooperation from the container's processes).

The container's writable layer is overlay2's upper directory on the host. Walking it counts
everything the container added or changed, whoever wrote it: files of any uid, fallocate'd
space (apparent size), processes that hid their /proc/<pid>/io. Every file, folder, link or
whiteout counts as at least one block, so a flood of empty files (inodes) runs into the same
limit as bytes. Where the host cannot read the upper directory (a remote engine, no root),
Docker's own SizeRw (`docker ps --size`) is used instead; it counts bytes, not files.
"""

from __future__ import annotations

import os
import stat
from typing import Any

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
