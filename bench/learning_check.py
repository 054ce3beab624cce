"""Does GRPO++ raise the reward? A learning check through the launchers and real Docker (issue 15).

From a small SFT warm start on a few tasks of tasks/oneline (the scripted expert's "edit"
demonstrations; --sft_steps chosen for partial competence, so groups have mixed outcomes),
launch/train.py runs --rl_steps GRPO++ iterations at T=1.0 on those tasks, then the control:
the same command with --config.rl.lr=0. Prints both runs' training reward per iteration
(metrics.jsonl's rollout/reward_mean) and the rise of each.

Meant to become the CI learning test once a setting is found whose rise clears the control by
a wide margin within ~5 minutes. BENCHMARKS.md ("Learning") has what was measured: at these
defaults the rise shows over 20-40 iterations (in memory), and at 4 iterations of lr 1e-3 the
two runs did not separate through Docker.

    PYTHONPATH=. python bench/learning_check.py --workdir=/tmp/learning_check
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from absl import app, flags

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAIN_TASKS = REPO_ROOT / "tasks" / "oneline" / "train.jsonl"

_WORKDIR = flags.DEFINE_string("workdir", "/tmp/learning_check", "Where every run writes.")
_TASK_IDS = flags.DEFINE_list(
    "task_ids", ["dials-biropa", "switches-bulela"], "Training tasks (tasks/oneline/train.jsonl)."
)
_SFT_STEPS = flags.DEFINE_integer("sft_steps", 100, "SFT steps (batch 2) on their demonstrations.")
_RL_STEPS = flags.DEFINE_integer("rl_steps", 20, "GRPO++ iterations of each run.")
_RL_LR = flags.DEFINE_float("rl_lr", 5e-4, "GRPO++ learning rate (the control's is 0).")
_WARMUP = flags.DEFINE_integer("warmup_steps", 5, "GRPO++ learning-rate warmup steps.")
_N_ROLLOUTS = flags.DEFINE_integer("n_rollouts", 16, "Rollouts per task per iteration.")

# One CPU device: the launchers as ./run.sh runs them.
ENV = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}


def launch(script: str, *flag_values: str) -> float:
    common = [
        "--config=configs/learn_tiny.py",
        f"--config.sft.num_steps={_SFT_STEPS.value}",
        "--config.sft.batch_size=2",
        "--config.sft.micro_batch_size=2",
        "--config.sft.warmup_steps=2",
        f"--config.rl.total_steps={_RL_STEPS.value}",
        f"--config.rl.tasks_per_step={len(_TASK_IDS.value)}",
        f"--config.rl.n_rollouts={_N_ROLLOUTS.value}",
        f"--config.rl.warmup_steps={_WARMUP.value}",
        "--config.checkpoint.every=1000",
    ]
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, f"launch/{script}", *common, *flag_values],
        cwd=REPO_ROOT,
        env=ENV,
        check=True,
    )
    return time.perf_counter() - start


def rewards(workdir: Path) -> list[float]:
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [row["rollout/reward_mean"] for row in rows if "rollout/reward_mean" in row]


def main(argv: list[str]) -> None:
    del argv
    workdir = Path(_WORKDIR.value).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tasks_file = workdir / "tasks.jsonl"  # the few tasks, sources as absolute paths
    rows = [json.loads(line) for line in TRAIN_TASKS.read_text().splitlines()]
    rows = [
        {**row, "source": str(TRAIN_TASKS.parent / row["source"])}
        for row in rows
        if row["instance_id"] in _TASK_IDS.value
    ]
    if len(rows) != len(_TASK_IDS.value):
        raise SystemExit(f"--task_ids {_TASK_IDS.value}: not all are in {TRAIN_TASKS}")
    tasks_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sft = workdir / "sft"
    times = {"sft": launch("train_sft.py", f"--workdir={sft}", f"--expert_tasks={tasks_file}")}
    runs = {}
    for name, lr in (("grpo", _RL_LR.value), ("control", 0.0)):
        times[name] = launch(
            "train.py",
            f"--workdir={workdir / name}",
            f"--config.init_from={sft / 'checkpoints'}",
            f"--config.env.tasks={tasks_file}",
            f"--config.rl.lr={lr}",
            "--config.seed=1",
        )
        runs[name] = rewards(workdir / name)
    for name, curve in runs.items():
        print(f"{name}: {[round(r, 3) for r in curve]}, rise {curve[-1] - curve[0]:+.3f}")
    print("wall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))


if __name__ == "__main__":
    app.run(main)
