"""Device mesh ('data', 'fsdp', 'tensor') and multi-host start-up.

All mesh axes are ``AxisType.Auto``: shardings are given to ``jax.jit`` (``in_shardings`` /
``out_shardings`` with ``NamedSharding``) and to ``with_sharding_constraint`` on key activations,
and XLA's partitioner propagates them everywhere else. (Explicit axes would make every einsum
spell out its output sharding; Auto keeps the model code free of mesh details.)
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor")


def mesh_shape_for(
    data: int = 1, fsdp: int = -1, tensor: int = 1, num_devices: int | None = None
) -> tuple[int, int, int]:
    """Resolve a (data, fsdp, tensor) request where one entry may be -1 ("all remaining devices")."""
    num_devices = jax.device_count() if num_devices is None else num_devices
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError(
            f"at most one mesh axis may be -1, got data={data} fsdp={fsdp} tensor={tensor}"
        )
    known = int(np.prod([s for s in sizes if s != -1]))
    if -1 in sizes:
        if num_devices % known:
            raise ValueError(
                f"cannot fill the -1 mesh axis: {num_devices} devices are not divisible by {known}"
            )
        sizes[sizes.index(-1)] = num_devices // known
    if int(np.prod(sizes)) != num_devices:
        raise ValueError(
            f"mesh data={sizes[0]} x fsdp={sizes[1]} x tensor={sizes[2]} = {int(np.prod(sizes))} "
            f"devices, but {num_devices} are available; set config.mesh so the product matches "
            "(use -1 for one axis to take the rest)"
        )
    return sizes[0], sizes[1], sizes[2]


def make_mesh(
    data: int = 1,
    fsdp: int = -1,
    tensor: int = 1,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A ('data', 'fsdp', 'tensor') mesh over ``devices`` (default: all), Auto axis types.

    ``tensor`` is the innermost axis so tensor-parallel groups are neighbouring devices (same
    host / NVLink domain).
    """
    devices = jax.devices() if devices is None else list(devices)
    shape = mesh_shape_for(data, fsdp, tensor, num_devices=len(devices))
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def init_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids: Sequence[int] | None = None,
) -> bool:
    """Join a multi-host JAX job; a no-op for a single process.

    Arguments default to the environment variables ``JAX_COORDINATOR_ADDRESS``,
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``; ``local_device_ids``: the accelerators this
    process drives (None: all it sees). Must run before any other JAX call.
    Returns True when ``jax.distributed.initialize`` was called.
    """
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and "JAX_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    if process_id is None and "JAX_PROCESS_ID" in os.environ:
        process_id = int(os.environ["JAX_PROCESS_ID"])
    if num_processes is None or num_processes <= 1:
        return False
    if coordinator_address is None or process_id is None:
        raise ValueError(
            f"num_processes={num_processes} needs a coordinator address and a process id; set "
            "JAX_COORDINATOR_ADDRESS=host:port and JAX_PROCESS_ID (or pass them as flags)"
        )
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        local_device_ids=local_device_ids,
    )
    return True
