"""Containers of execution checks and of launch/validate_tasks.py have the disk limit of
episodes and the pool's gradings (config.env.disk_limit, issue 17). Before: both ran in
containers without one, so a candidate's tests could fill the engine's disk."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

from configs import tiny
from deepswe_jax import experiment
from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory
from deepswe_jax.env.grading.grading import GRADING_MEM_LIMIT
from deepswe_jax.env.tasks import unified_diff
from deepswe_jax.verify.execution import ReproductionTest, score_candidates

REPO_ROOT = Path(__file__).resolve().parents[2]
# A test writing 2 MiB: over a 1m limit, well within none.
BIG_WRITE = ReproductionTest(
    "tests/test_big_write.py",
    "def test_writes_two_mebibytes():\n"
    "    with open('/tmp/big', 'wb') as f:\n"
    "        f.write(b'x' * (2 << 20))\n",
)


def test_execution_checks_run_under_the_configs_disk_limit(tiny_task, run_label):
    config = tiny.get_config()
    config.env.disk_limit = "1m"
    docker_pool = types.SimpleNamespace(runtime_factory=None)  # a Docker EnvPool's
    factory = experiment.grading_runtime_factory(config, docker_pool)
    assert isinstance(factory, DockerRuntimeFactory)
    assert (factory.mem_limit, factory.disk_limit) == (GRADING_MEM_LIMIT, "1m")
    scores = [
        score_candidates(
            tiny_task,
            [""],
            regression=(),
            reproduction=BIG_WRITE,
            runtime_factory=f,
            run_label=run_label,
        )[0]
        for f in (factory, dataclasses.replace(factory, disk_limit=""))
    ]
    limited, free = scores
    # Under the limit the run is stopped mid-test (the tool server kills commands past it, or
    # the write fails with storage_opt): the test does not pass. Without it, it does.
    assert limited.measured and limited.reproduction_passed == 0, limited
    assert (free.reproduction_passed, free.reproduction_total) == (1, 1), free


def test_validate_tasks_grades_under_the_disk_limit(tiny_task, tmp_path):
    """A task whose gold run writes 2 MiB validates without a limit and fails under --disk_limit=1m
    (its grading containers are limited as the env pool's)."""
    test = "tests/test_big_write.py"
    task = dataclasses.replace(
        tiny_task,
        instance_id="tinycalc-big-write",
        test_patch=unified_diff(
            test,
            None,
            BIG_WRITE.content + "\n\ndef test_add():\n    from tinycalc import add\n\n"
            "    assert add(2, 3) == 5\n",
        ),
        FAIL_TO_PASS=(f"{test}::test_add",),
        PASS_TO_PASS=(f"{test}::test_writes_two_mebibytes",),
        test_cmd="",
    )
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(task.to_row()) + "\n")
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    runs = {
        limit: subprocess.Popen(
            [
                sys.executable,
                "launch/validate_tasks.py",
                f"--tasks={tasks_file}",
                f"--disk_limit={limit}",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for limit in ("", "1m")
    }
    outputs = {limit: process.communicate(timeout=600) for limit, process in runs.items()}
    free, limited = outputs[""], outputs["1m"]
    assert runs[""].returncode == 0 and "1/1 tasks ok" in free[0], free
    assert runs["1m"].returncode == 1 and "0/1 tasks ok" in limited[0], limited
    assert "FAIL (gold" in limited[0], limited[0]
