"""What one RL iteration logs: rollout and batch summaries, written to TensorBoard and jsonl.

    with MetricsWriter(workdir) as writer:
        writer.write(step, {**rollout_metrics(trajectories), **batch_metrics(batch.stats), ...})

Keys are "<group>/<name>" (rollout/, batch/, train/, time/, envs/); TensorBoard shows each
group as a section. `metrics.jsonl` holds one object per step: {"step": k, key: value, ...}.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.rl.batch import BatchStats

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def _import_tensorboardx():
    """tensorboardX, without torch when nothing imported torch yet. tensorboardX imports torch
    whenever it is installed (it is, for the parity tests) only to accept torch.Tensor values;
    this module writes floats. That import cost every launch script 1.5-3 s of CPU at start-up
    (`python -X importtime -c "import launch.train"`: 4.7 -> 2.9 s user, torch no longer
    loaded). A None entry in sys.modules makes `import torch` raise ImportError, which
    tensorboardX catches; the entry is removed at once, so a later `import torch` works."""
    if "torch" in sys.modules:
        return importlib.import_module("tensorboardX")
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("tensorboardX")
    finally:
        del sys.modules["torch"]


tensorboardX = _import_tensorboardx()

# Per-episode wall-clock timings the agent loop records (Trajectory.timings keys).
EPISODE_TIMINGS = ("acquire_s", "generation_s", "tool_s", "patch_s", "grading_s", "total_s")


def _mean_max(prefix: str, values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return {f"{prefix}_mean": 0.0, f"{prefix}_max": 0.0}
    return {f"{prefix}_mean": float(array.mean()), f"{prefix}_max": float(array.max())}


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Outcome, length and timing summary of one iteration's episodes.

    reward_mean and pass_at_1 are over all episodes (infrastructure failures included, as 0);
    pass_at_n is the share of tasks with at least one resolved episode; solve_all / solve_none /
    solve_partial are shares of tasks by how many episodes resolved them. Response tokens are
    everything after the prompt, assistant tokens the sampled (loss-mask 1) ones.
    """
    resolved_by_task: dict[str, list[bool]] = {}
    for trajectory in trajectories:
        resolved_by_task.setdefault(trajectory.task_id, []).append(trajectory.reward > 0)
    groups = list(resolved_by_task.values())
    num_tasks = max(len(groups), 1)
    stops = Counter(t.stop_reason for t in trajectories)
    metrics = {
        "rollout/episodes": float(len(trajectories)),
        "rollout/tasks": float(len(groups)),
        "rollout/reward_mean": float(np.mean([t.reward for t in trajectories]))
        if trajectories
        else 0.0,
        "rollout/pass_at_1": float(np.mean([r for g in groups for r in g])) if groups else 0.0,
        "rollout/pass_at_n": sum(any(g) for g in groups) / num_tasks,
        "rollout/solve_all": sum(all(g) for g in groups) / num_tasks,
        "rollout/solve_none": sum(not any(g) for g in groups) / num_tasks,
        "rollout/solve_partial": sum(any(g) and not all(g) for g in groups) / num_tasks,
        "rollout/infra_errors": float(sum(t.infra_error for t in trajectories)),
        **{f"rollout/stop/{reason.value}": float(stops[reason]) for reason in StopReason},
        **_mean_max("rollout/prompt_tokens", [len(t.prompt_ids) for t in trajectories]),
        **_mean_max("rollout/response_tokens", [t.num_response_tokens for t in trajectories]),
        **_mean_max("rollout/assistant_tokens", [sum(t.loss_mask) for t in trajectories]),
        **_mean_max("rollout/steps", [t.num_steps for t in trajectories]),
    }
    for name in EPISODE_TIMINGS:
        values = [t.timings.get(name, 0.0) for t in trajectories]
        metrics[f"time/episode_{name}_mean"] = float(np.mean(values)) if values else 0.0
    return metrics


def batch_metrics(stats: BatchStats, num_micro_batches: int) -> dict[str, float]:
    """What went into the training batch (see rl.batch.BatchStats)."""
    return {
        "batch/trained_sequences": float(stats.num_trained),
        "batch/compact_filtered": float(stats.num_compact_filtered),
        "batch/infra_excluded": float(stats.num_infra_excluded),
        "batch/baseline_reward_mean": stats.reward_mean,
        "batch/loss_tokens": float(stats.loss_tokens),
        "batch/padding_fraction": stats.padding_fraction,
        "batch/micro_batches": float(num_micro_batches),
    }


class MetricsWriter:
    """Appends scalar metrics to `<workdir>/metrics.jsonl` and TensorBoard event files in
    `<workdir>/tensorboard/`. Non-finite values are written to jsonl as null.

    resume_step: the step a (re)started run continues after (0: from step 1, -1: from step 0);
    rows of later steps (logged by an interrupted run after its last finished checkpoint, about
    to be redone) are dropped from both logs, and so is a line a crash left torn (with a warning).
    """

    def __init__(self, workdir: str | os.PathLike, *, resume_step: int = 0):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.workdir / METRICS_FILE
        if self.jsonl_path.exists():
            kept = [row for row in read_metrics(self.workdir) if row["step"] <= resume_step]
            partial = self.jsonl_path.with_suffix(".jsonl.tmp")
            try:
                partial.write_text("".join(json.dumps(row) + "\n" for row in kept))
                os.replace(partial, self.jsonl_path)
            except BaseException:  # Ctrl-C mid-write: no half-written file stays
                partial.unlink(missing_ok=True)
                raise
        self._jsonl = self.jsonl_path.open("a", encoding="utf-8")
        self._tensorboard = tensorboardX.SummaryWriter(
            str(self.workdir / TENSORBOARD_DIR), purge_step=resume_step + 1
        )

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Records every metric at `step` and flushes both files (a crash loses nothing logged)."""
        row: dict[str, float | int | None] = {"step": step}
        for key, value in sorted(metrics.items()):
            value = float(value)
            row[key] = value if math.isfinite(value) else None
            self._tensorboard.add_scalar(key, value, global_step=step)
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        self._tensorboard.flush()

    def close(self) -> None:
        self._jsonl.close()
        self._tensorboard.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_metrics(workdir: str | os.PathLike) -> list[dict]:
    """The rows `MetricsWriter` appended to `<workdir>/metrics.jsonl`, in order; a line that is
    not a whole row (torn by a crash mid-write) is skipped with a warning naming it."""
    path = Path(workdir) / METRICS_FILE
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            if not isinstance(row, dict) or not isinstance(row.get("step"), int):
                logger.warning(
                    "%s:%d is not a whole metrics row (torn by a crash?); skipped: %.80r",
                    path,
                    number,
                    line,
                )
                continue
            rows.append(row)
    return rows
