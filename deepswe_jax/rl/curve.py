"""The training reward curve of a run, read from its metrics rows: standard errors, the first
and last thirds, and iterations that fell well below the best before them (a collapse).

    curve = reward_curve(read_metrics(workdir))
    thirds = compare_thirds(curve)                 # last third's mean - first third's, +- s.e.
    for drop in reward_drops(curve): print(drop)   # each fall of > 3 s.e. below the best so far

An iteration's reward is the mean of its episodes' 0/1 rewards, so its standard error is the
binomial one, sqrt(p (1 - p) / episodes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

REWARD_KEY = "rollout/reward_mean"
EPISODES_KEY = "rollout/episodes"
# A fall larger than this many standard errors of the difference is reported as a collapse.
DROP_STANDARD_ERRORS = 3.0


@dataclasses.dataclass(frozen=True)
class IterationReward:
    """One iteration's mean training reward over `episodes` episodes (0/1 rewards)."""

    step: int
    reward: float
    episodes: int
    entropy: float | None = None
    # KL(sampling policy || updated policy) per token at the iteration's last optimizer step.
    kl: float | None = None

    @property
    def stderr(self) -> float:
        p = min(max(self.reward, 0.0), 1.0)
        return math.sqrt(p * (1.0 - p) / self.episodes) if self.episodes else 0.0


@dataclasses.dataclass(frozen=True)
class RewardDrop:
    """Iteration `step` fell to `reward`, `standard_errors` below `best` (at `best_step`)."""

    step: int
    reward: float
    best_step: int
    best: float
    standard_errors: float

    def __str__(self) -> str:
        return (
            f"step {self.step}: training reward {self.reward:.2f} fell "
            f"{self.standard_errors:.1f} standard errors below the best so far "
            f"({self.best:.2f} at step {self.best_step}); if the next steps stay low, lower "
            "config.rl.lr or lengthen config.rl.warmup_steps"
        )


@dataclasses.dataclass(frozen=True)
class ThirdsComparison:
    """Mean reward of the first and last third of the iterations, each +- its standard error
    (over episodes), and their difference."""

    first: float
    first_stderr: float
    last: float
    last_stderr: float

    @property
    def gain(self) -> float:
        return self.last - self.first

    @property
    def gain_stderr(self) -> float:
        return math.hypot(self.first_stderr, self.last_stderr)


def iteration_reward(row: Mapping[str, object]) -> IterationReward | None:
    """The reward, entropy and policy KL of one metrics row (rl.metrics.read_metrics, or the
    loop's metrics with their "step"); None for a row without a reward."""
    reward = row.get(REWARD_KEY)
    if reward is None:
        return None
    entropy, kl = row.get("train/entropy"), row.get("train/policy_approx_kl")
    return IterationReward(
        step=int(row["step"]),
        reward=float(reward),
        episodes=int(row.get(EPISODES_KEY) or 0),
        entropy=None if entropy is None else float(entropy),
        kl=None if kl is None else float(kl),
    )


def reward_curve(rows: Sequence[Mapping[str, object]]) -> list[IterationReward]:
    """The iterations of metrics `rows` that logged a reward, by step."""
    points = (iteration_reward(row) for row in rows)
    return sorted((p for p in points if p is not None), key=lambda p: p.step)


class DropWatch:
    """Follows a run's iterations as they come and tells when one falls more than
    `standard_errors` standard errors of the difference below the best iteration before it."""

    def __init__(self, standard_errors: float = DROP_STANDARD_ERRORS):
        self.standard_errors = standard_errors
        self.best: IterationReward | None = None

    def observe(self, point: IterationReward) -> RewardDrop | None:
        best, drop = self.best, None
        if best is not None:
            stderr = math.hypot(best.stderr, point.stderr)
            fall = best.reward - point.reward
            # A zero standard error (all 0 or all 1 on both sides) counts any fall as a drop.
            sizes = fall / stderr if stderr > 0 else (math.inf if fall > 0 else 0.0)
            if sizes > self.standard_errors:
                drop = RewardDrop(point.step, point.reward, best.step, best.reward, sizes)
        if best is None or point.reward > best.reward:
            self.best = point
        return drop


def reward_drops(
    curve: Sequence[IterationReward], standard_errors: float = DROP_STANDARD_ERRORS
) -> list[RewardDrop]:
    """Each iteration of `curve` that DropWatch reports."""
    watch = DropWatch(standard_errors)
    return [drop for point in curve if (drop := watch.observe(point)) is not None]


def _pooled(points: Sequence[IterationReward]) -> tuple[float, float]:
    """Episode-weighted mean reward of `points` and its binomial standard error."""
    episodes = sum(p.episodes for p in points)
    if episodes == 0:
        return float("nan"), float("nan")
    mean = sum(p.reward * p.episodes for p in points) / episodes
    return mean, math.sqrt(max(mean * (1.0 - mean), 0.0) / episodes)


def compare_thirds(curve: Sequence[IterationReward]) -> ThirdsComparison:
    """The first and last third of `curve` (at least one iteration each), pooled over episodes.

    Raises ValueError for fewer than 2 iterations.
    """
    if len(curve) < 2:
        raise ValueError(f"{len(curve)} iteration(s) logged a reward; thirds need at least 2")
    third = max(len(curve) // 3, 1)
    first, first_stderr = _pooled(curve[:third])
    last, last_stderr = _pooled(curve[-third:])
    return ThirdsComparison(first, first_stderr, last, last_stderr)
