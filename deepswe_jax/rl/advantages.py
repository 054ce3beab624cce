"""Per-rollout advantages for GRPO-style training, and the compact filter.

Rollouts of one task form a group. Rewards arrive as a padded `[groups, n]` array with a
`valid` mask of the same shape: a member is valid when it has a real rollout that belongs in
the baseline. Invalid members (padding, infrastructure failures) get advantage 0 and do not
enter any group statistic. Everything here is host-side NumPy: rewards are tiny.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deepswe_jax.agent.trajectory import StopReason


def _check_rewards(rewards: np.ndarray, valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.ndim != 2:
        raise ValueError(
            f"rewards must be [groups, n] (one row per task), got shape {rewards.shape}; "
            "reshape a flat array with rewards.reshape(num_tasks, n_rollouts)"
        )
    if valid is None:
        return rewards, np.ones(rewards.shape, dtype=bool)
    valid = np.asarray(valid, dtype=bool)
    if valid.shape != rewards.shape:
        raise ValueError(f"valid has shape {valid.shape} but rewards has shape {rewards.shape}")
    return rewards, valid


def leave_one_out_advantages(rewards: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """DeepSWE's advantage: `A_i = r_i - mean(r_j for valid j != i)` within each group.

    Args:
      rewards: [groups, n] rewards.
      valid: [groups, n] bool, members that take part (default: all).
    Returns:
      [groups, n] float32 advantages; 0 for invalid members and for groups with one valid member.
    """
    rewards, valid = _check_rewards(rewards, valid)
    count = valid.sum(axis=1, keepdims=True)
    total = np.where(valid, rewards, 0.0).sum(axis=1, keepdims=True)
    others = np.maximum(count - 1, 1)
    advantages = rewards - (total - rewards) / others
    return np.where(valid & (count > 1), advantages, 0.0).astype(np.float32)


def grpo_advantages(
    rewards: np.ndarray, valid: np.ndarray | None = None, *, eps: float = 1e-6
) -> np.ndarray:
    """GRPO's advantage: `(r_i - mean(r)) / (std(r) + eps)` over the valid members of each group.

    The std is the unbiased one (ddof=1), as in DeepSeekMath's, TRL's and verl's implementations.

    Args:
      rewards: [groups, n] rewards.
      valid: [groups, n] bool, members that take part (default: all).
      eps: added to the std so groups with equal rewards give 0, not NaN.
    Returns:
      [groups, n] float32 advantages; 0 for invalid members and for groups with one valid member.
    """
    rewards, valid = _check_rewards(rewards, valid)
    count = valid.sum(axis=1, keepdims=True)
    mean = np.where(valid, rewards, 0.0).sum(axis=1, keepdims=True) / np.maximum(count, 1)
    squared = np.where(valid, (rewards - mean) ** 2, 0.0).sum(axis=1, keepdims=True)
    std = np.sqrt(squared / np.maximum(count - 1, 1))
    advantages = (rewards - mean) / (std + eps)
    return np.where(valid & (count > 1), advantages, 0.0).astype(np.float32)


def drgrpo_advantages(rewards: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Dr. GRPO's advantage: `r_i - mean(r)` over the valid members of each group (no std).

    Args:
      rewards: [groups, n] rewards.
      valid: [groups, n] bool, members that take part (default: all).
    Returns:
      [groups, n] float32 advantages; 0 for invalid members (a lone member gets 0 naturally).
    """
    rewards, valid = _check_rewards(rewards, valid)
    count = valid.sum(axis=1, keepdims=True)
    mean = np.where(valid, rewards, 0.0).sum(axis=1, keepdims=True) / np.maximum(count, 1)
    return np.where(valid, rewards - mean, 0.0).astype(np.float32)


ADVANTAGE_ESTIMATORS = {
    "loo": leave_one_out_advantages,
    "grpo": grpo_advantages,
    "drgrpo": drgrpo_advantages,
}


def compute_advantages(
    name: str, rewards: np.ndarray, valid: np.ndarray | None = None
) -> np.ndarray:
    """Dispatches on `config.rl.advantage` ('loo' | 'grpo' | 'drgrpo'); shapes as above."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise ValueError(
            f"unknown advantage estimator {name!r}; set config.rl.advantage to one of "
            f"{sorted(ADVANTAGE_ESTIMATORS)}"
        )
    return ADVANTAGE_ESTIMATORS[name](rewards, valid)


@dataclass(frozen=True)
class GroupStats:
    """How many task groups every / no / some valid rollout solved (reward > 0).

    Groups where all or none succeed have zero advantages and teach nothing; their share is
    the first thing to watch in a GRPO run. Groups without any valid member are `empty`.
    """

    solve_all: int
    solve_none: int
    solve_partial: int
    empty: int


def group_stats(rewards: np.ndarray, valid: np.ndarray | None = None) -> GroupStats:
    """Counts solve_all / solve_none / solve_partial / empty groups of a [groups, n] reward array."""
    rewards, valid = _check_rewards(rewards, valid)
    count = valid.sum(axis=1)
    solved = (valid & (rewards > 0)).sum(axis=1)
    nonempty = count > 0
    return GroupStats(
        solve_all=int((nonempty & (solved == count)).sum()),
        solve_none=int((nonempty & (solved == 0)).sum()),
        solve_partial=int((nonempty & (solved > 0) & (solved < count)).sum()),
        empty=int((~nonempty).sum()),
    )


@dataclass(frozen=True)
class RolloutFilter:
    """What the compact filter decided for each rollout (all arrays [n]).

    loss_weight: 1.0 to train on the rollout's tokens, 0.0 to mask them all.
    in_baseline: whether the rollout takes part in its group's advantage baseline.
    baseline_reward: the reward it contributes there (0 for compact-filtered rollouts).
    """

    loss_weight: np.ndarray
    in_baseline: np.ndarray
    baseline_reward: np.ndarray

    @property
    def num_compact_filtered(self) -> int:
        return int(((self.loss_weight == 0) & self.in_baseline).sum())

    @property
    def num_infra_excluded(self) -> int:
        return int((~self.in_baseline).sum())


def _stop_reason(stop_reason: object) -> StopReason:
    try:
        return StopReason(stop_reason)
    except ValueError:
        known = sorted(reason.value for reason in StopReason)
        raise ValueError(f"unknown stop reason {stop_reason!r}; expected one of {known}") from None


def compact_filter(
    rewards: Sequence[float],
    stop_reasons: Sequence[object],
    infra_errors: Sequence[bool],
    *,
    enabled: bool = True,
) -> RolloutFilter:
    """Applies DeepSWE's compact filtering to n rollouts.

    - max_steps / max_context / timeout: loss masked, kept in the baseline with reward 0.
    - env_error stop reason or infra_error (container died, grader failed): loss masked and
      excluded from the baseline, so a broken machine is never scored as a wrong answer.
    - finished: trained on, with its reward.
    With `enabled=False` (ablation) only infrastructure failures are filtered.

    Args:
      rewards: [n] rewards as graded.
      stop_reasons: [n] StopReason members or their string values.
      infra_errors: [n] bools.
    """
    reasons = [_stop_reason(reason) for reason in stop_reasons]
    if not len(reasons) == len(rewards) == len(infra_errors):
        raise ValueError(
            f"got {len(rewards)} rewards, {len(reasons)} stop reasons and "
            f"{len(infra_errors)} infra flags; pass one of each per rollout"
        )
    broken = np.array(
        [
            bool(infra) or reason.env_failure
            for reason, infra in zip(reasons, infra_errors, strict=True)
        ],
        dtype=bool,
    )
    unfinished = np.array([reason.compact_filtered for reason in reasons], dtype=bool)
    unfinished &= ~broken
    masked = broken | (unfinished & enabled)
    rewards = np.asarray(rewards, dtype=np.float32).reshape(len(reasons))
    return RolloutFilter(
        loss_weight=np.where(masked, 0.0, 1.0).astype(np.float32),
        in_baseline=~broken,
        baseline_reward=np.where(unfinished & enabled, 0.0, rewards).astype(np.float32),
    )
