"""Multi-process (multi-host) JAX: joining the job, and what each process feeds and gathers.

Every process runs the same program (SPMD). A process

  * joins the job once, before any other JAX call: `initialize_distributed` (flags, the
    JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID variables, or SLURM), driving
    the GPUs listed in JAX_LOCAL_DEVICE_IDS (e.g. '0,1,2,3,4,5,6,7': one process per node, as
    launch/sweep.py's sbatch lines run it; unset, JAX gives a SLURM task only GPU SLURM_LOCALID);
  * feeds only the rows of each global batch its own devices hold: `process_local_rows`
    (what `jax.make_array_from_process_local_data` expects);
  * shares host data (trajectories) with every other process: `allgather_bytes`.

CPU processes talk through gloo collectives (jax_cpu_collectives_implementation), so the
multi-process paths run on one machine: launch/multihost_local.sh.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any, TypeVar

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Sharding

from deepswe_jax.parallel.mesh import init_distributed

logger = logging.getLogger(__name__)

Record = TypeVar("Record")


LOCAL_DEVICE_IDS_VARIABLE = "JAX_LOCAL_DEVICE_IDS"


def local_device_ids(environ: Mapping[str, str] = os.environ) -> list[int] | None:
    """The accelerators this process drives, from JAX_LOCAL_DEVICE_IDS ('0,1,...'); None: JAX's
    default (all visible ones, or under SLURM the task's SLURM_LOCALID alone)."""
    value = environ.get(LOCAL_DEVICE_IDS_VARIABLE, "").strip()
    if not value:
        return None
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(
            f"{LOCAL_DEVICE_IDS_VARIABLE}={value!r} is not a comma-separated list of device ids; "
            f"set it like {LOCAL_DEVICE_IDS_VARIABLE}=0,1,2,3,4,5,6,7"
        ) from None


def slurm_initialize_arguments(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Keyword arguments of `jax.distributed.initialize` in a SLURM job step: JAX reads the node
    list, task id and task count itself; the local devices come from JAX_LOCAL_DEVICE_IDS.

    Raises ValueError for one task per node on a node with several GPUs and no
    JAX_LOCAL_DEVICE_IDS: JAX would give each process one GPU (SLURM_LOCALID) and the mesh
    would lack the others.
    """
    devices = local_device_ids(environ)
    gpus = int(environ.get("SLURM_GPUS_ON_NODE", "0") or 0)
    tasks_on_node = int(environ.get("SLURM_NTASKS_PER_NODE", "0") or 0)
    if devices is None and gpus > 1 and tasks_on_node == 1:
        raise ValueError(
            f"this SLURM job runs one task per node on {gpus} GPUs, but JAX would give each "
            f"task only GPU SLURM_LOCALID; export {LOCAL_DEVICE_IDS_VARIABLE}="
            f"{','.join(map(str, range(gpus)))} before srun (launch/sweep.py's sbatch lines do), "
            f"or run one task per GPU (--ntasks-per-node={gpus} --gpus-per-task=1)"
        )
    return {} if devices is None else {"local_device_ids": devices}


def slurm_num_tasks() -> int:
    """Tasks of the SLURM job step this process belongs to (1 outside SLURM)."""
    if "SLURM_JOB_ID" not in os.environ:
        return 1
    return int(os.environ.get("SLURM_STEP_NUM_TASKS", os.environ.get("SLURM_NTASKS", "1")))


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> bool:
    """Joins a multi-process JAX job when one is described; a no-op for a single process.

    Order: explicit arguments (e.g. --coordinator_address/--num_processes/--process_id), then
    JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID, then a SLURM job step of
    several tasks (`srun`; `slurm_initialize_arguments`). Each process drives the devices of
    JAX_LOCAL_DEVICE_IDS when set. CPU processes use gloo collectives. Must run before any other
    JAX computation. Returns whether it joined.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    explicit = coordinator_address or num_processes or process_id is not None
    if not explicit and "JAX_NUM_PROCESSES" not in os.environ and slurm_num_tasks() > 1:
        jax.distributed.initialize(**slurm_initialize_arguments())
        joined = True
    else:
        joined = init_distributed(
            coordinator_address, num_processes, process_id, local_device_ids=local_device_ids()
        )
    if joined:
        logger.info(
            "process %d of %d: %d local devices, %d in all",
            jax.process_index(),
            jax.process_count(),
            jax.local_device_count(),
            jax.device_count(),
        )
    return joined


def is_primary_process() -> bool:
    """True on the one process that writes logs, metrics and trajectory files (process 0)."""
    return jax.process_index() == 0


def process_local_rows(array: np.ndarray, sharding: Sharding) -> np.ndarray:
    """The rows of a global `array` [rows, ...] that this process's devices hold under
    `sharding` (batch-sharded along dimension 0): the process-local data
    `jax.make_array_from_process_local_data(sharding, local)` turns back into `array`.

    Raises if this process's rows are not one contiguous block (a mesh whose devices are not
    grouped by process along the batch axes); build the mesh over jax.devices() in order.
    """
    indices = sharding.addressable_devices_indices_map(array.shape).values()
    starts = sorted({index[0].start or 0 for index in indices})
    stops = sorted(
        {array.shape[0] if index[0].stop is None else index[0].stop for index in indices}
    )
    start, stop = starts[0], stops[-1]
    held = sum(b - a for a, b in zip(starts, stops, strict=True))
    if held != stop - start:
        raise ValueError(
            f"process {jax.process_index()} holds rows {list(zip(starts, stops, strict=True))} of "
            f"{array.shape[0]}, not one block; order the mesh devices by process "
            "(make_mesh over jax.devices())"
        )
    return array[start:stop]


def allgather_bytes(payload: bytes) -> list[bytes]:
    """Every process's `payload`, in process order (a collective: all processes must call it)."""
    if jax.process_count() == 1:
        return [payload]
    length = np.array([len(payload)], np.int64)
    lengths = np.asarray(multihost_utils.process_allgather(length)).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: len(payload)] = np.frombuffer(payload, np.uint8)
    gathered = np.asarray(multihost_utils.process_allgather(padded))
    return [bytes(row[:size]) for row, size in zip(gathered, lengths.tolist(), strict=True)]


def host_copy(tree: object) -> object:
    """A numpy copy of every array of `tree`, gathered whole from all processes (a collective):
    what a process-local sampler or a checksum needs from globally sharded parameters."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def process_local_record(record: Record, sharding: Sharding) -> Record:
    """A frozen dataclass of [rows, ...] arrays (e.g. rl.batch.MicroBatch) cut to this
    process's rows (`process_local_rows`); unchanged with a single process."""
    if jax.process_count() == 1:
        return record
    return dataclasses.replace(
        record,
        **{
            field.name: process_local_rows(getattr(record, field.name), sharding)
            for field in dataclasses.fields(record)
        },
    )


def launched_process_shard(
    num_processes: int | None = None, process_id: int | None = None
) -> tuple[int, int]:
    """(this process's index, process count) of a launch without joining a JAX job: flags,
    then JAX_PROCESS_ID / JAX_NUM_PROCESSES, then SLURM_PROCID / SLURM_NTASKS; (0, 1) alone.
    For work that needs no collectives (evaluation): each process takes its own share."""
    count = num_processes or int(os.environ.get("JAX_NUM_PROCESSES", 0)) or slurm_num_tasks()
    if process_id is None:
        process_id = int(os.environ.get("JAX_PROCESS_ID", os.environ.get("SLURM_PROCID", 0)))
    if not 0 <= process_id < count:
        raise ValueError(
            f"process id {process_id} is outside 0..{count - 1}; set --process_id below "
            "--num_processes (or JAX_PROCESS_ID below JAX_NUM_PROCESSES)"
        )
    return process_id, count
