"""The main job: `python launch/train.py --config=configs/tiny.py` on the shipped tasks with the
embedded JaxSampler and the Docker env pool; then the same command resumes for one more step.

The random tiny model emits noise, so episodes end on the token budget (tiny trains on them:
no compact filtering); what is checked is the plumbing: a train step every iteration,
checkpoints, metrics.jsonl, TensorBoard events and trajectories.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from tensorboardX.proto import event_pb2

from deepswe_jax.agent.trajectory import read_trajectories
from deepswe_jax.checkpoint import TrainCheckpoints
from deepswe_jax.rl.metrics import read_metrics

REPO_ROOT = Path(__file__).resolve().parents[2]
# One layer instead of four: the train step on ~1,400-token sequences dominates on 2 CPU cores.
SMALL_RUN = [
    "--config.rl.tasks_per_step=2",
    "--config.rl.n_rollouts=2",
    "--config.model.num_hidden_layers=1",
]
EXPECTED_KEYS = {
    "rollout/reward_mean",
    "rollout/pass_at_1",
    "rollout/pass_at_n",
    "rollout/solve_all",
    "rollout/solve_none",
    "rollout/solve_partial",
    "rollout/stop/max_context",
    "rollout/response_tokens_mean",
    "rollout/steps_mean",
    "batch/trained_sequences",
    "train/skipped",
    "time/rollout_s",
    "time/sync_s",
    "time/train_s",
    "time/checkpoint_s",
    "time/episode_grading_s_mean",
    "envs/started",
}


def run_train(workdir: Path, total_steps: int) -> str:
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    command = [
        sys.executable,
        "launch/train.py",
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        f"--config.rl.total_steps={total_steps}",
        *SMALL_RUN,
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    return output


def tensorboard_tags(directory: Path) -> dict[str, list[int]]:
    """Scalar tag -> steps, from the TFRecord event files in `directory`."""
    tags: dict[str, list[int]] = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4  # length, its crc, payload, payload crc
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


def test_tiny_main_job_runs_and_resumes_with_docker(tmp_path):
    workdir = tmp_path / "run"
    run_train(workdir, total_steps=1)
    output = run_train(workdir, total_steps=2)
    assert f"resuming from {workdir / 'checkpoints' / '1'}" in output

    assert TrainCheckpoints(workdir / "checkpoints").all_steps() == [1, 2]
    assert (workdir / "config.json").is_file()
    rows = read_metrics(workdir)
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert EXPECTED_KEYS <= row.keys(), EXPECTED_KEYS - row.keys()
        assert row["rollout/episodes"] == 4
        assert row["envs/start_failures"] == 0
        assert row["rollout/infra_errors"] == 0
        assert row["train/skipped"] == 0 and row["train/loss_tokens"] > 0
    tags = tensorboard_tags(workdir / "tensorboard")
    assert EXPECTED_KEYS <= tags.keys()
    assert sorted(tags["rollout/reward_mean"]) == [1, 2]

    for iteration in range(len(rows)):
        trajectories = read_trajectories(workdir / "trajectories" / f"iter_{iteration:06d}.jsonl")
        assert len(trajectories) == 4
        assert {t.policy_version for t in trajectories} == {iteration}
        assert len({t.task_id for t in trajectories}) == 2
        assert all(sum(t.loss_mask) > 0 for t in trajectories)  # the sampler was called
        assert all(t.grade is not None for t in trajectories)  # and every episode was graded
