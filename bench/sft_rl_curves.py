"""Pass@1, pass@k and Best@k of the tiny model after expert SFT, then after SFT + GRPO++.

Runs the launchers one after another, as a researcher would (each command is printed):

  1. launch/train_sft.py   scripted-expert trajectories of the shipped tasks (real Docker), SFT
  2. launch/evaluate.py    the SFT checkpoint, --num_runs candidates per task, --select
  3. launch/train.py       --rl_steps GRPO++ iterations from the SFT checkpoint (init_from)
  4. launch/evaluate.py    the RL checkpoint, same settings
  5. <workdir>/curves.png  both stages' pass@k and Best@k curves on one plot; a markdown table

Each stage resumes (the launchers do) when the script is run again with the same --workdir.
The evaluation is on the tasks the expert data came from: with 30 tasks, a 1.3M-parameter
model and no held-out repositories large enough to learn from, this measures how well the
pipeline fits and then improves its own training tasks, not generalization (for that, see
tests/test_train_sft.py: tool-call format on held-out repositories).

    PYTHONPATH=. python bench/sft_rl_curves.py --workdir=/tmp/sft_rl_curves
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from absl import app, flags

from deepswe_jax.agent.trajectory import read_trajectories
from deepswe_jax.verify.evaluation.plots import labelled_curves, plot_curves
from deepswe_jax.verify.expert import tool_call_success_rate

REPO_ROOT = Path(__file__).resolve().parents[1]

_WORKDIR = flags.DEFINE_string("workdir", "/tmp/sft_rl_curves", "Where every stage writes.")
_CONFIG = flags.DEFINE_string("config", "configs/sft_tiny.py", "Config of all stages.")
_TASKS = flags.DEFINE_string("tasks", "tasks/tasks.jsonl", "Expert, RL and evaluation tasks.")
_NUM_RUNS = flags.DEFINE_integer("num_runs", 4, "Candidates per task (the k of pass@k).")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "Evaluation sampling temperature.")
_SELECT = flags.DEFINE_list("select", ["execution"], "Best@k selectors (evaluate.py --select).")
_RL_STEPS = flags.DEFINE_integer("rl_steps", 4, "GRPO++ iterations after SFT.")
_SFT_OVERRIDES = flags.DEFINE_list("sft_overrides", [], "Extra --config.x=y for train_sft.py.")
_RL_OVERRIDES = flags.DEFINE_list("rl_overrides", [], "Extra --config.x=y for train.py.")
_EVAL_OVERRIDES = flags.DEFINE_list(
    "eval_overrides",
    ["sampler.max_batch=16", "env.max_envs=16"],
    "Extra --config.x=y for evaluate.py.",
)


def run_stage(name: str, argv: list[str], timings: dict[str, float]) -> None:
    command = [sys.executable, *argv]
    print(f"\n== {name}: {shlex.join(argv)}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, check=True)
    timings[name] = time.perf_counter() - start
    print(f"== {name}: {timings[name]:.0f} s", flush=True)


def overrides(values: list[str]) -> list[str]:
    return [f"--config.{value}" for value in values]


def plot(path: Path, summaries: dict[str, dict]) -> None:
    """Every stage's pass@k and Best@k curves (summary.json's) on one evaluation-style plot."""
    curves = {
        f"{stage}: {label}": {int(k): v for k, v in curve.items()}
        for stage, summary in summaries.items()
        for label, curve in labelled_curves(
            summary["pass_at_k"], summary.get("best_at_k", {})
        ).items()
    }
    plot_curves(path, curves, title="tiny Qwen3 on the 30 shipped tasks")


def table(summaries: dict[str, dict]) -> str:
    first = next(iter(summaries.values()))
    ks = sorted(int(k) for k in first["pass_at_k"])
    selectors = sorted(first.get("best_at_k", {}))
    header = (
        ["stage", "Pass@1 (± s.e.)"]
        + [f"pass@{k}" for k in ks[1:]]
        + [f"Best@{ks[-1]} ({name})" for name in selectors]
        + ["resolved (any run)", "tool calls parsed", "non-empty patch", "stop reasons"]
        + ["mean steps"]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for stage, s in summaries.items():
        stderr = s["pass_at_1_stderr"] or 0.0
        row = [stage, f"{100 * s['pass_at_1']:.1f}% ± {100 * stderr:.1f}"]
        row += [f"{100 * s['pass_at_k'][str(k)]:.1f}%" for k in ks[1:]]
        row += [f"{100 * s['best_at_k'][name][str(ks[-1])]:.1f}%" for name in selectors]
        row += [
            f"{s['resolved_tasks_any_run']}/{s['num_tasks']}",
            f"{100 * s['tool_calls_parsed']:.0f}%",
            f"{100 * s['non_empty_patch']:.0f}%",
            ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items()),
            f"{s['mean_steps']:.1f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def behaviour(eval_dir: Path) -> dict[str, float]:
    """What the episodes did, beyond the reward: share of agent turns that parsed into a tool
    call, and share of episodes that left a non-empty patch."""
    trajectories = read_trajectories(eval_dir / "trajectories.jsonl")
    return {
        "tool_calls_parsed": tool_call_success_rate(trajectories),
        "non_empty_patch": sum(bool(t.patch.strip()) for t in trajectories) / len(trajectories),
    }


def main(argv: list[str]) -> None:
    del argv
    workdir = Path(_WORKDIR.value).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config = f"--config={_CONFIG.value}"
    evaluate = [
        "launch/evaluate.py",
        config,
        f"--tasks={_TASKS.value}",
        f"--num_runs={_NUM_RUNS.value}",
        f"--temperature={_TEMPERATURE.value}",
        *([f"--select={','.join(_SELECT.value)}"] if _SELECT.value else []),
        *overrides(_EVAL_OVERRIDES.value),
    ]
    timings: dict[str, float] = {}
    run_stage(
        "sft",
        [
            "launch/train_sft.py",
            config,
            f"--expert_tasks={_TASKS.value}",
            f"--workdir={workdir / 'sft'}",
            *overrides(_SFT_OVERRIDES.value),
        ],
        timings,
    )
    run_stage(
        "eval_sft",
        [
            *evaluate,
            f"--policy={workdir / 'sft' / 'checkpoints'}",
            f"--output_dir={workdir / 'eval_sft'}",
        ],
        timings,
    )
    run_stage(
        "rl",
        [
            "launch/train.py",
            config,
            f"--workdir={workdir / 'rl'}",
            f"--config.init_from={workdir / 'sft' / 'checkpoints'}",
            f"--config.env.tasks={_TASKS.value}",
            f"--config.rl.total_steps={_RL_STEPS.value}",
            *overrides(_RL_OVERRIDES.value),
        ],
        timings,
    )
    run_stage(
        "eval_sft_rl",
        [
            *evaluate,
            f"--policy={workdir / 'rl' / 'checkpoints'}",
            f"--output_dir={workdir / 'eval_sft_rl'}",
        ],
        timings,
    )
    stages = {"SFT": "eval_sft", f"SFT + {_RL_STEPS.value} GRPO++": "eval_sft_rl"}
    summaries = {
        stage: {
            **json.loads((workdir / name / "summary.json").read_text()),
            **behaviour(workdir / name),
        }
        for stage, name in stages.items()
    }
    plot(workdir / "curves.png", summaries)
    print("\n" + table(summaries))
    print("\nstage wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    print(f"plots: {workdir / 'curves.png'}, {workdir}/eval_*/curves.png")


if __name__ == "__main__":
    app.run(main)
