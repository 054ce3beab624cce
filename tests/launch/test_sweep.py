"""launch/sweep.py: a config's get_sweep() becomes runs with their own names and workdirs; print
mode writes sbatch lines and Kubernetes Jobs (validated against the Kubernetes schema); local
mode runs the tiny config's three learning rates as real one-iteration launch/train.py runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import kubernetes_validate
import pytest

from deepswe_jax.checkpoint import TrainCheckpoints
from deepswe_jax.env.k8s.k8s_pods import DEFAULT_NAMESPACE, OWNER_POD_ENV
from deepswe_jax.rl.metrics import read_metrics
from launch import sweep
from launch.k8s.manifests import TRAINER_ACCOUNT

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = str(REPO_ROOT / "configs" / "tiny.py")
NAMES = ["lr=0.0001", "lr=0.0003", "lr=0.001"]
# The smallest training iteration launch/train.py runs: one task, two rollouts.
SMALL_RUN = {
    "rl.total_steps": "1",
    "rl.tasks_per_step": "1",
    "rl.n_rollouts": "2",
    "rl.micro_batch_size": "2",
    "sampler.max_batch": "2",
}


def write_config(tmp_path: Path, sweep_source: str) -> str:
    path = tmp_path / "swept.py"
    path.write_text("from configs.tiny import get_config  # noqa: F401\n\n" + sweep_source)
    return str(path)


def test_tiny_sweep_expands_to_named_runs_with_their_own_workdirs(tmp_path):
    runs = sweep.expand_sweep(TINY, tmp_path, {"rl.total_steps": "1"})
    assert [run.name for run in runs] == NAMES
    assert [run.workdir for run in runs] == [str(tmp_path.resolve() / n) for n in NAMES]
    assert runs[1].overrides == (("rl.lr", "0.0003"), ("rl.total_steps", "1"))
    assert sweep.train_argv("configs/tiny.py", runs[1]) == [
        "launch/train.py",
        "--config=configs/tiny.py",
        f"--workdir={tmp_path.resolve() / 'lr=0.0003'}",
        "--config.rl.lr=0.0003",
        "--config.rl.total_steps=1",
    ]
    assert sweep.run_name([("rl.seed", "1"), ("model.seed", "2")]) == "rl.seed=1,model.seed=2"
    assert sweep.run_name([("env.docker_hosts", "('unix:///a',)")]) == "docker_hosts=--unix----a-,-"


def test_print_mode_writes_sbatch_lines_and_valid_kubernetes_jobs(tmp_path):
    runs = sweep.expand_sweep(TINY, tmp_path)
    for run in runs:
        line = sweep.sbatch_line(TINY, run, "--partition=gpu", nodes=8, gpus_per_node=8)
        argv = shlex.split(line)
        assert argv[:4] == ["mkdir", "-p", run.workdir, "&&"] and argv[4] == "sbatch"
        assert f"--job-name={run.name}" in argv and "--nodes=8" in argv
        assert "--partition=gpu" in argv  # the environment srun gives tasks: test_slurm.py
        job = shlex.split(argv[-1].removeprefix("--wrap="))
        srun = job.index("srun")
        assert job[srun : srun + 3] == ["srun", "python", "launch/train.py"]
        assert f"--workdir={run.workdir}" in job and f"--config.{run.overrides[0][0]}" in argv[-1]

    jobs = [
        sweep.k8s_job(
            "configs/tiny.py", run, image="reg/deepswe:1", repo_dir="/workspace", gpus=8, sweep="lr"
        )
        for run in runs
    ]
    version = kubernetes_validate.latest_version()
    for job, run in zip(jobs, runs, strict=True):
        kubernetes_validate.validate(job, version, strict=True)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", job["metadata"]["name"])
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
        assert f"--workdir={run.workdir}" in pod["containers"][0]["command"]
        # The manifests' Job builder: it may run env pods, which are collected with its pod.
        assert pod["serviceAccountName"] == TRAINER_ACCOUNT
        assert [e["name"] for e in pod["containers"][0]["env"]] == list(OWNER_POD_ENV)
        assert job["metadata"]["namespace"] == DEFAULT_NAMESPACE
        assert job["metadata"]["annotations"]["deepswe.workdir"] == run.workdir
        assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert len({job["metadata"]["name"] for job in jobs}) == 3
    other = sweep.k8s_job(
        "configs/tiny.py", runs[0], image="i", repo_dir="/w", gpus=0, sweep="lr", namespace="x"
    )
    container = other["spec"]["template"]["spec"]["containers"][0]
    assert other["metadata"]["namespace"] == "x" and "resources" not in container


@pytest.mark.parametrize(
    "sweep_source, message",
    [
        ("", "has no get_sweep()"),
        ("def get_sweep():\n    return [{'rl.lrr': 1.0}]\n", "rl has no field 'lrr'"),
        ("def get_sweep():\n    return ['rl.lr=1']\n", "must be a dict of overrides"),
        ("def get_sweep():\n    return []\n", "returned no runs"),
        (
            "def get_sweep():\n    return [{'rl.lr': 1e-4}, {'rl.lr': 0.0001}]\n",
            "both make run 'lr=0.0001'",
        ),
        ("def get_sweep():\n    return [{'rl.total_steps': 2}]\n", "and --set both set"),
    ],
)
def test_bad_sweeps_fail_with_errors_that_say_what_to_change(tmp_path, sweep_source, message):
    config = write_config(tmp_path, textwrap.dedent(sweep_source))
    with pytest.raises(ValueError, match=re.escape(message)):
        sweep.expand_sweep(config, tmp_path, {"rl.total_steps": "1"})


def test_local_sweep_runs_three_tiny_trainings_to_completion(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    command = [
        sys.executable,
        "launch/sweep.py",
        "--config=configs/tiny.py",
        f"--workdir={tmp_path}",
        "--mode=local",
        *(f"--set={key}={value}" for key, value in SMALL_RUN.items()),
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    records = json.loads((tmp_path / "sweep.json").read_text())
    assert [record["name"] for record in records] == NAMES
    assert all(record["returncode"] == 0 for record in records)
    for name, lr in zip(NAMES, (1e-4, 3e-4, 1e-3), strict=True):
        workdir = tmp_path / name
        config = json.loads((workdir / "config.json").read_text())
        assert config["rl"]["lr"] == lr and config["rl"]["total_steps"] == 1
        assert [row["step"] for row in read_metrics(workdir)] == [1]
        assert TrainCheckpoints(workdir / "checkpoints").all_steps() == [1]
