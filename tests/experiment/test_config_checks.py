"""SFT, verifier training and evaluation check their config before they create their work or
output directory (issue 17 did it for RL training: tests/rl/test_loop_faults.py), so an invalid
config leaves nothing behind. Before: launch/train_sft.py created the workdir first, SFT's
batch size was refused inside the run directory, verifier training found an existing verifier
only when saving after training, and evaluate.py wrote eval_config.json before a bad value
failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from configs import sft_tiny, tiny, verifier_tiny
from deepswe_jax import experiment
from deepswe_jax.env.tasks import load_tasks

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TASKS = REPO_ROOT / "tasks" / "tasks.jsonl"


def test_sft_refuses_each_bad_value_before_the_workdir(tmp_path):
    refused = {
        "sft.num_steps": (0, r"config.sft.num_steps=0 must be above 0"),
        "sft.micro_batch_size": (0, r"config.sft.micro_batch_size=0 must be above 0"),
        "sft.warmup_steps": (-1, r"config.sft.warmup_steps=-1 must be at least 0"),
        "checkpoint.keep": (0, r"config.checkpoint.keep=0 must be above 0"),
        "sft.batch_size": (3, r"config.sft.batch_size=3 is more than the 2 training traject"),
        "init_from": (str(tmp_path / "missing"), r"config.init_from=.* is not a directory"),
    }
    for name, (value, message) in refused.items():
        config = sft_tiny.get_config()
        if "." in name:
            section, field = name.split(".")
            config[section][field] = value
        else:
            config[name] = value
        workdir = tmp_path / name
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            # The data is never looked at: the checks come first.
            experiment.train_sft(config, workdir, trajectories=[None, None])
        assert not workdir.exists(), name


def test_verifier_training_refuses_each_bad_value_before_building_anything(tmp_path):
    refused = {
        "verifier.steps": (0, r"config.verifier.steps=0 must be above 0"),
        "verifier.eval_every": (0, r"config.verifier.eval_every=0 must be above 0"),
        "verifier.lora_rank": (-1, r"config.verifier.lora_rank=-1 must be at least 0"),
        "verifier.heldout_fraction": (1.0, r"heldout_fraction=1.0 must lie in \[0, 1\)"),
        "verifier.lora_alpha": (0.0, r"config.verifier.lora_alpha=0.0 must be above 0 with"),
        "verifier.lora_targets": (("q_proj", "qproj"), r"unknown LoRA targets \['qproj'\]"),
        "rl.micro_batch_size": (0, r"config.rl.micro_batch_size=0 must be above 0"),
    }
    for name, (value, message) in refused.items():
        config = verifier_tiny.get_config()
        config.verifier.lora_rank = 8  # LoRA settings count only with adapters
        section, field = name.split(".")
        config[section][field] = value
        workdir = tmp_path / name
        with pytest.raises(ValueError, match=message):
            experiment.train_verifier(config, workdir, [], {})
        assert not workdir.exists(), name
    # A workdir that holds a verifier is refused before training, not when saving after it.
    workdir = tmp_path / "trained"
    (workdir / "verifier").mkdir(parents=True)
    with pytest.raises(FileExistsError, match=r"trained/verifier holds a verifier already"):
        experiment.train_verifier(verifier_tiny.get_config(), workdir, [], {})
    assert sorted(p.name for p in workdir.iterdir()) == ["verifier"]


def test_evaluation_refuses_each_bad_value_before_the_output_directory(tmp_path):
    tasks = load_tasks(SHIPPED_TASKS)[:1]
    refused = [
        ("gold", {}, dict(num_runs=0), r"--num_runs=0 must be at least 1"),
        ("gold", {}, dict(grade_concurrency=0), r"--grade_concurrency=0 must be at least 1"),
        ("gold", {"agent.reward_timeout": 0.0}, {}, r"config.agent.reward_timeout=0.0 must be"),
        ("gold", {"env.max_envs": 0}, {}, r"config.env.max_envs=0 must be above 0"),
        # A policy runs an agent: its limits and sampler count too (checked before the policy
        # directory is even read).
        ("/policy", {"agent.max_steps": 0}, {}, r"config.agent.max_steps=0 must be above 0"),
        ("/policy", {"sampler.kind": "jaxx"}, {}, r"config.sampler.kind='jaxx'"),
    ]
    for i, (policy, overrides, arguments, message) in enumerate(refused):
        config = tiny.get_config()
        for name, value in overrides.items():
            section, field = name.split(".")
            config[section][field] = value
        output_dir = tmp_path / f"eval_{i}"
        with pytest.raises(ValueError, match=message):
            experiment.run_evaluation(
                config, policy, output_dir, tasks=tasks, **{"num_runs": 1, **arguments}
            )
        assert not output_dir.exists(), message


def test_launch_scripts_leave_no_directory_for_an_invalid_config(tmp_path):
    """The scripts themselves (train_sft.py created its workdir before anything was checked),
    run side by side: exit status 1, the field named, no directory."""
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    runs = {
        "train_sft": (
            ["--config=configs/sft_tiny.py", f"--trajectories={empty}"],
            "--config.sft.num_steps=0",
            "config.sft.num_steps=0 must be above 0",
        ),
        "train_verifier": (
            ["--config=configs/verifier_tiny.py", f"--trajectories={empty}"],
            "--config.verifier.batch_size=0",
            "config.verifier.batch_size=0 must be above 0",
        ),
        "evaluate": (
            ["--policy=gold", "--instance_ids=" + load_tasks(SHIPPED_TASKS)[0].instance_id],
            "--num_runs=0",
            "--num_runs=0 must be at least 1",
        ),
    }
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    processes = {}
    for script, (flags, bad, _) in runs.items():
        directory = "--output_dir" if script == "evaluate" else "--workdir"
        processes[script] = subprocess.Popen(
            [
                sys.executable,
                f"launch/{script}.py",
                *flags,
                bad,
                f"{directory}={tmp_path / script}",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for script, process in processes.items():
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 1, stderr[-3000:]
        assert runs[script][2] in stderr and "Traceback" not in stderr, stderr[-3000:]
        assert not (tmp_path / script).exists(), script
