"""SLURM: the sbatch line launch/sweep.py prints runs one process per node, and the environment
that job gives each process makes parallel/distributed.py drive all 8 GPUs of its node, so the
32B config's 1x8x8 mesh finds its 64 devices (JAX alone would give each process one GPU)."""

import os
import shlex
import stat
import subprocess

import pytest

from configs import deepswe_qwen3_32b
from deepswe_jax.parallel.distributed import (
    LOCAL_DEVICE_IDS_VARIABLE,
    local_device_ids,
    slurm_initialize_arguments,
)
from launch import sweep


def job_environment(wrap: str, tmp_path) -> dict[str, str]:
    """The environment `srun` starts with when the job's --wrap command runs (SLURM passes it
    to every task): the command runs in bash with an `srun` on PATH that prints it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_srun = bin_dir / "srun"
    fake_srun.write_text("#!/bin/sh\nexec env -0\n")
    fake_srun.chmod(fake_srun.stat().st_mode | stat.S_IEXEC)
    clean = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "-c", wrap], env=clean, capture_output=True, text=True, check=True, timeout=60
    )
    return dict(item.split("=", 1) for item in result.stdout.split("\0") if "=" in item)


def test_printed_job_gives_each_process_all_gpus_of_its_node(tmp_path):
    config = deepswe_qwen3_32b.get_config()
    run = sweep.SweepRun(name="base", workdir=str(tmp_path / "base"), overrides=())
    argv = shlex.split(
        sweep.sbatch_line("configs/deepswe_qwen3_32b.py", run, nodes=8, gpus_per_node=8)
    )
    options = dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--"))
    nodes, tasks_per_node = int(options["nodes"]), int(options["ntasks-per-node"])
    gpus = int(options["gpus-per-node"])
    assert (nodes, tasks_per_node, gpus) == (8, 1, 8)
    assert "srun python launch/train.py --config=configs/deepswe_qwen3_32b.py" in options["wrap"]

    exported = job_environment(options["wrap"], tmp_path)
    devices = []
    for node in range(nodes):
        for local in range(tasks_per_node):
            task = {  # what SLURM adds for each task of the step
                **exported,
                "SLURM_JOB_ID": "7",
                "SLURM_NTASKS": str(nodes * tasks_per_node),
                "SLURM_NTASKS_PER_NODE": str(tasks_per_node),
                "SLURM_PROCID": str(node * tasks_per_node + local),
                "SLURM_LOCALID": str(local),
                "SLURM_NODEID": str(node),
                "SLURM_GPUS_ON_NODE": str(gpus),
            }
            arguments = slurm_initialize_arguments(task)
            assert arguments == {"local_device_ids": list(range(8))}
            devices += [(node, device) for device in arguments["local_device_ids"]]
    mesh = config.mesh
    assert len(set(devices)) == mesh.data * mesh.fsdp * mesh.tensor == 64

    # Without the exported ids, JAX would give each task GPU SLURM_LOCALID only: refused.
    del task[LOCAL_DEVICE_IDS_VARIABLE]
    with pytest.raises(ValueError, match="export JAX_LOCAL_DEVICE_IDS=0,1,2,3,4,5,6,7"):
        slurm_initialize_arguments(task)


def test_job_size_must_match_the_config_mesh():
    config = deepswe_qwen3_32b.get_config()
    sweep.check_job_devices(config, nodes=8, gpus_per_node=8)
    with pytest.raises(ValueError, match="needs 64 GPUs but the job has --nodes=1"):
        sweep.check_job_devices(config, nodes=1, gpus_per_node=8)
    with pytest.raises(ValueError, match="comma-separated list"):
        local_device_ids({LOCAL_DEVICE_IDS_VARIABLE: "0-7"})
