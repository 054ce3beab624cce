"""Rejection sampling for fine-tuning (SWE-Gym): which trajectories an SFT round trains on.

Keep trajectories the agent finished with a patch the grader resolved (`Trajectory.resolved`;
a resolving patch left behind when a budget ran out does not count, since its conversation
never calls finish, the behaviour SFT should teach), at most `max_per_task` per task (SWE-Gym:
a cap of 2 beat no cap and caps of 1 or 3, because easy tasks otherwise dominate the data),
preferring the ones that took fewer steps (then fewer tokens). Identical token sequences count
once, so repeated deterministic rollouts (e.g. the scripted expert) do not fill a task's cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from deepswe_jax.agent.trajectory import StopReason, Trajectory

SWE_GYM_MAX_PER_TASK = 2


@dataclass(frozen=True)
class SFTSelection:
    """The chosen trajectories (task order of first appearance, fewest steps first within a task)
    and what was left out."""

    trajectories: tuple[Trajectory, ...]
    num_candidates: int
    num_resolved: int
    num_duplicates: int  # resolved but the same token sequence as a kept or earlier one
    num_over_cap: int  # resolved and distinct but past the per-task cap
    num_tasks: int  # tasks with at least one chosen trajectory


def select_for_sft(
    trajectories: Iterable[Trajectory], *, max_per_task: int = SWE_GYM_MAX_PER_TASK
) -> SFTSelection:
    """Resolved trajectories, at most `max_per_task` distinct ones per task, fewest steps first.

    Within a task the order is (num_steps, response tokens, input order), so ties keep the
    order they came in.
    """
    if max_per_task < 1:
        raise ValueError(
            f"max_per_task={max_per_task}; keep at least 1 trajectory per task (SWE-Gym: 2)"
        )
    candidates = list(trajectories)
    resolved = [t for t in candidates if t.resolved and t.stop_reason is StopReason.finished]
    by_task: dict[str, list[Trajectory]] = {}
    for trajectory in resolved:
        by_task.setdefault(trajectory.task_id, []).append(trajectory)
    chosen: list[Trajectory] = []
    duplicates = over_cap = 0
    for group in by_task.values():
        ranked = sorted(group, key=lambda t: (t.num_steps, t.num_response_tokens))
        seen: set[tuple[int, ...]] = set()
        kept = 0
        for trajectory in ranked:
            if trajectory.token_ids in seen:
                duplicates += 1
            elif kept == max_per_task:
                over_cap += 1
            else:
                seen.add(trajectory.token_ids)
                chosen.append(trajectory)
                kept += 1
    return SFTSelection(
        trajectories=tuple(chosen),
        num_candidates=len(candidates),
        num_resolved=len(resolved),
        num_duplicates=duplicates,
        num_over_cap=over_cap,
        num_tasks=len(by_task),
    )
