"""The main job's end-of-run summary (issue 27): curve, thirds, collapses, held-out Pass@1,
pictures and wall times, from a run directory as the launchers write it."""

import json
import subprocess
import sys
from pathlib import Path

from deepswe_jax.rl.metrics import MetricsWriter
from deepswe_jax.verify.run_summary import main_job_summary

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_run(tmp_path, rewards):
    rl_dir, eval_dir = tmp_path / "rl", tmp_path / "eval"
    with MetricsWriter(rl_dir) as writer:
        for step, reward in enumerate(rewards, start=1):
            writer.write(
                step,
                {
                    "rollout/reward_mean": reward,
                    "rollout/episodes": 32.0,
                    "train/entropy": 0.1,
                    "train/policy_approx_kl": 0.002,
                },
            )
    eval_dir.mkdir()
    summary = {"pass_at_1": 0.125, "pass_at_1_stderr": 0.03, "num_tasks": 64, "num_runs": 4}
    (eval_dir / "summary.json").write_text(json.dumps(summary))
    return rl_dir, eval_dir


def test_summary_of_a_collapsing_run(tmp_path):
    rl_dir, eval_dir = write_run(tmp_path, [0.53, 0.50, 0.47, 0.72, 0.16, 0.31])
    text = main_job_summary(rl_dir, eval_dir, stage_seconds={"sft": 60.0, "rl": 540.0})
    lines = text.splitlines()
    assert "    5  0.16 +- 0.06   policy KL 2.0e-03, entropy 0.100" in lines
    assert any(line.startswith("first third 0.52 +- 0.06, last third 0.23") for line in lines)
    assert any(line.startswith("WARNING: step 5: training reward 0.16") for line in lines)
    assert "held-out Pass@1 12.5% +- 3.0 (64 tasks x 4 runs; statuses {})" in lines
    assert "wall time: sft 1.0 min, rl 9.0 min (10.0 min in all)" in lines
    png = rl_dir / "rewards.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"training curve: {png}" in lines


def test_summary_says_which_stage_has_not_run(tmp_path):
    text = main_job_summary(tmp_path / "rl", tmp_path / "eval")
    assert "the RL stage has not run" in text
    assert "the evaluation has not finished" in text


def test_the_launcher_prints_it_and_refuses_a_malformed_stage_time(tmp_path):
    rl_dir, eval_dir = write_run(tmp_path, [0.2, 0.4, 0.6])
    script = [sys.executable, str(REPO_ROOT / "launch" / "summarize_run.py")]
    args = [f"--rl_dir={rl_dir}", f"--eval_dir={eval_dir}"]
    done = subprocess.run([*script, *args, "--stage_seconds=rl=90"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no step fell 3 s.e. below the best" in done.stdout
    assert "wall time: rl 1.5 min" in done.stdout
    bad = subprocess.run([*script, *args, "--stage_seconds=rl"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "write NAME=SECONDS" in bad.stderr
