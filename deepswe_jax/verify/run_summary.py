"""The one-screen summary the main job prints at its end: the training reward by iteration
(first and last third with standard errors, collapses), the held-out Pass@1, where the
pictures are, and the wall time of each stage.

    text = main_job_summary(rl_dir, eval_dir, stage_seconds={"sft": 61.0, "rl": 540.0})

It also draws `<rl_dir>/rewards.png` (the training reward against the step, with +-1 s.e.).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from deepswe_jax.rl.curve import compare_thirds, reward_curve, reward_drops
from deepswe_jax.rl.metrics import METRICS_FILE, read_metrics
from deepswe_jax.verify.evaluation.plots import CURVES_FILE, plot_series
from deepswe_jax.verify.evaluation.summary import SUMMARY_FILE

REWARDS_FILE = "rewards.png"


def _reward_lines(rl_dir: Path) -> list[str]:
    if not (rl_dir / METRICS_FILE).exists():
        return [f"training reward: no {rl_dir / METRICS_FILE} (the RL stage has not run)"]
    curve = reward_curve(read_metrics(rl_dir))
    if not curve:
        return [f"training reward: {rl_dir / METRICS_FILE} has no iteration yet"]
    plot_series(
        rl_dir / REWARDS_FILE,
        {
            "training reward": {p.step: p.reward for p in curve},
            "+1 s.e.": {p.step: p.reward + p.stderr for p in curve},
            "-1 s.e.": {p.step: p.reward - p.stderr for p in curve},
        },
        xlabel="step",
        ylabel="mean reward",
        title=f"training reward ({curve[0].episodes} episodes per step)",
    )
    lines = ["training reward by step (+- s.e.):"]
    for p in curve:
        extra = ""
        if p.kl is not None:
            # k3 KL of the last optimizer step's policy to the sampling policy: 1e-6..1e-3 on
            # a healthy run, so in exponent form (4 decimals printed 0.0000 on most iterations).
            extra = f"   policy KL {p.kl:.1e}, entropy {p.entropy:.3f}"
        lines.append(f"  {p.step:3d}  {p.reward:.2f} +- {p.stderr:.2f}{extra}")
    if len(curve) >= 2:
        thirds = compare_thirds(curve)
        lines.append(
            f"first third {thirds.first:.2f} +- {thirds.first_stderr:.2f}, last third "
            f"{thirds.last:.2f} +- {thirds.last_stderr:.2f}: change {thirds.gain:+.2f} "
            f"+- {thirds.gain_stderr:.2f}"
        )
    drops = reward_drops(curve)
    lines += [f"WARNING: {drop}" for drop in drops] or ["no step fell 3 s.e. below the best"]
    lines.append(f"training curve: {rl_dir / REWARDS_FILE}")
    return lines


def _held_out_lines(eval_dir: Path) -> list[str]:
    summary_path = eval_dir / SUMMARY_FILE
    if not summary_path.exists():
        return [f"held-out Pass@1: no {summary_path} (the evaluation has not finished)"]
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return [
        f"held-out Pass@1 {100 * summary['pass_at_1']:.1f}% +- "
        f"{100 * (summary.get('pass_at_1_stderr') or 0.0):.1f} "
        f"({summary['num_tasks']} tasks x {summary['num_runs']} runs; "
        f"statuses {summary.get('statuses', {})})",
        f"pass@k curve: {eval_dir / CURVES_FILE}",
    ]


def main_job_summary(
    rl_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    *,
    stage_seconds: Mapping[str, float] | None = None,
) -> str:
    """The summary of an RL run directory and its held-out evaluation (either may be missing:
    the summary says so); `stage_seconds` gives the wall time of each stage of this invocation."""
    lines = ["== main job summary"]
    lines += _reward_lines(Path(rl_dir))
    lines += _held_out_lines(Path(eval_dir))
    if stage_seconds:
        times = ", ".join(
            f"{name} {seconds / 60:.1f} min" for name, seconds in stage_seconds.items()
        )
        lines.append(f"wall time: {times} ({sum(stage_seconds.values()) / 60:.1f} min in all)")
    return "\n".join(lines)
