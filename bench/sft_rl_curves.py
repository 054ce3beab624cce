"""Pass@1, pass@k and Best@k of the tiny model after expert SFT, then after SFT + GRPO++.

Runs the launchers one after another, as a researcher would (each command is printed):

  1. launch/train_sft.py   scripted-expert trajectories of --expert_tasks (real Docker), or the
                           given --sft_trajectories, then SFT
  2. launch/evaluate.py    the SFT checkpoint on --eval_tasks, --num_runs candidates per task
  3. launch/train.py       --rl_steps GRPO++ iterations on --rl_tasks from the SFT checkpoint
  4. launch/evaluate.py    the RL checkpoint, same settings
  5. with --control: the same train.py command at rl.lr=0 (learning off, same sampling), and
     its evaluation: a rise must stand clear of what the control moves by resampling alone
  6. <workdir>/curves.png  every stage's pass@k and Best@k curves on one plot; rewards.png the
                           training reward by iteration of GRPO++ (and the control); a
                           markdown table, Pass@1 changes against the SFT stage's standard error

Each stage resumes (the launchers do) when the script is run again with the same --workdir.
By default every stage uses --tasks, so the evaluation measures how well the pipeline fits and
then improves its own training tasks, not generalization; give --eval_tasks held-out tasks
(e.g. tasks/oneline/held_out.jsonl) to measure that.

    # issue 6: the 30 shipped tasks, configs/sft_tiny.py
    PYTHONPATH=. python bench/sft_rl_curves.py --workdir=/tmp/sft_rl_curves
    # issue 15: the learn_tiny recipe with its lr-0 control (BENCHMARKS.md, "Learning")
    PYTHONPATH=. python bench/sft_rl_curves.py --workdir=/tmp/bench15 \
        --config=configs/learn_tiny.py --tasks=tasks/oneline/train_small.jsonl --num_runs=16 \
        --rl_steps=6 --control --select= --eval_overrides=sampler.max_batch=32,env.max_envs=8
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
from deepswe_jax.rl.metrics import read_metrics
from deepswe_jax.verify.evaluation.plots import labelled_curves, plot_curves, plot_series
from deepswe_jax.verify.expert import tool_call_success_rate

REPO_ROOT = Path(__file__).resolve().parents[1]

_WORKDIR = flags.DEFINE_string("workdir", "/tmp/sft_rl_curves", "Where every stage writes.")
_CONFIG = flags.DEFINE_string("config", "configs/sft_tiny.py", "Config of all stages.")
_TASKS = flags.DEFINE_string("tasks", "tasks/tasks.jsonl", "Expert, RL and evaluation tasks.")
_EXPERT_TASKS = flags.DEFINE_string("expert_tasks", None, "Expert tasks (default: --tasks).")
_SFT_TRAJECTORIES = flags.DEFINE_list(
    "sft_trajectories", [], "SFT on these trajectory files instead of collecting expert data."
)
_RL_TASKS = flags.DEFINE_string("rl_tasks", None, "GRPO++ tasks (default: --tasks).")
_EVAL_TASKS = flags.DEFINE_string("eval_tasks", None, "Evaluation tasks (default: --tasks).")
_CONTROL = flags.DEFINE_bool("control", False, "Also run and evaluate the lr-0 control.")
_TITLE = flags.DEFINE_string("title", "tiny Qwen3 on the 30 shipped tasks", "Plot titles.")
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
    plot_curves(path, curves, title=_TITLE.value)


def plot_rewards(path: Path, runs: dict[str, Path]) -> dict[str, list[float]]:
    """rewards.png: each run's training reward (rollout/reward_mean) by iteration; the values."""
    rewards = {
        label: {
            row["step"]: row["rollout/reward_mean"]
            for row in read_metrics(workdir)
            if "rollout/reward_mean" in row
        }
        for label, workdir in runs.items()
    }
    plot_series(
        path,
        rewards,
        xlabel="GRPO++ iteration",
        ylabel="training reward (mean over episodes)",
        title=_TITLE.value,
    )
    return {label: [curve[step] for step in sorted(curve)] for label, curve in rewards.items()}


def changes(summaries: dict[str, dict]) -> str:
    """Each later stage's Pass@1 change from the first stage's, in units of its standard error."""
    (first, base), *rest = summaries.items()
    stderr = base["pass_at_1_stderr"] or 0.0
    lines = []
    for stage, s in rest:
        delta = 100 * (s["pass_at_1"] - base["pass_at_1"])
        ratio = f" ({delta / (100 * stderr):+.1f} s.e.)" if stderr else ""
        lines.append(f"{stage}: Pass@1 {delta:+.1f} points from {first}{ratio}")
    return "\n".join(lines)


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
    tasks = _TASKS.value
    evaluate = [
        "launch/evaluate.py",
        config,
        f"--tasks={_EVAL_TASKS.value or tasks}",
        f"--num_runs={_NUM_RUNS.value}",
        f"--temperature={_TEMPERATURE.value}",
        *([f"--select={','.join(_SELECT.value)}"] if _SELECT.value else []),
        *overrides(_EVAL_OVERRIDES.value),
    ]
    sft_data = (
        [f"--trajectories={','.join(_SFT_TRAJECTORIES.value)}"]
        if _SFT_TRAJECTORIES.value
        else [f"--expert_tasks={_EXPERT_TASKS.value or tasks}"]
    )
    rl = [
        "launch/train.py",
        config,
        f"--config.init_from={workdir / 'sft' / 'checkpoints'}",
        f"--config.env.tasks={_RL_TASKS.value or tasks}",
        f"--config.rl.total_steps={_RL_STEPS.value}",
        *overrides(_RL_OVERRIDES.value),
    ]
    timings: dict[str, float] = {}
    run_stage(
        "sft",
        [
            "launch/train_sft.py",
            config,
            *sft_data,
            f"--workdir={workdir / 'sft'}",
            *overrides(_SFT_OVERRIDES.value),
        ],
        timings,
    )

    def evaluate_policy(run: str) -> str:
        """Evaluates <workdir>/<run>/checkpoints into eval_sft[_<run>]; that directory's name."""
        name = "eval_sft" if run == "sft" else f"eval_sft_{run}"
        run_stage(
            name,
            [
                *evaluate,
                f"--policy={workdir / run / 'checkpoints'}",
                f"--output_dir={workdir / name}",
            ],
            timings,
        )
        return name

    stages = {"SFT": evaluate_policy("sft")}
    runs = {f"SFT + {_RL_STEPS.value} GRPO++": ("rl", [])}
    if _CONTROL.value:
        runs[f"SFT + {_RL_STEPS.value} control (lr 0)"] = ("control", ["--config.rl.lr=0"])
    for label, (run, extra) in runs.items():
        run_stage(run, [*rl, f"--workdir={workdir / run}", *extra], timings)
        stages[label] = evaluate_policy(run)
    summaries = {
        stage: {
            **json.loads((workdir / name / "summary.json").read_text()),
            **behaviour(workdir / name),
        }
        for stage, name in stages.items()
    }
    plot(workdir / "curves.png", summaries)
    rewards = plot_rewards(
        workdir / "rewards.png", {label: workdir / run for label, (run, _) in runs.items()}
    )
    print("\n" + table(summaries))
    print("\n" + changes(summaries))
    for label, values in rewards.items():
        print(f"training reward by iteration, {label}: " + " ".join(f"{v:.2f}" for v in values))
    print("\nstage wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    print(
        f"plots: {workdir / 'curves.png'}, {workdir / 'rewards.png'}, {workdir}/eval_*/curves.png"
    )


if __name__ == "__main__":
    app.run(main)
