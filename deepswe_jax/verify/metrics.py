"""Evaluation metrics over k runs per task: pass@k, Pass@1 averaged over runs, Best@k curves.

`resolved` arrays are [num_tasks, num_runs] booleans: did run r of task t resolve it.

- `pass_at_k`: the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), the
  probability that at least one of k candidates drawn without replacement from n (c correct)
  is correct.
- `averaged_pass_at_1`: DeepSWE's headline number: Pass@1 of each run (mean over tasks),
  averaged over the runs, with the standard error of that mean across runs.
- `best_at_k`: what a selector achieves when it picks one of k candidates: averaged over
  k-subsets of a task's candidates (all of them when few, else random ones), the expected
  resolved value of the pick; when the selector returns several tied candidates, the pick is
  uniform among them, so the value is their mean resolved value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

Candidate = TypeVar("Candidate")
# A selector gets one task's candidates (a subset, in order) and returns the positions of the
# best ones (several when tied).
Selector = Callable[[Sequence[Candidate]], Sequence[int]]


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Unbiased pass@k of one task from `num_correct` resolved among `num_samples` runs.

    1 - C(n-c, k) / C(n, k), computed as a product so large n does not overflow; exactly 1.0
    when n - c < k (every k-subset holds a resolved run).
    """
    if not 0 <= num_correct <= num_samples:
        raise ValueError(f"need 0 <= num_correct <= num_samples, got {num_correct}, {num_samples}")
    if not 1 <= k <= num_samples:
        raise ValueError(
            f"pass@{k} needs 1 <= k <= num_samples={num_samples}; run more samples per task"
        )
    if num_samples - num_correct < k:
        return 1.0
    ratios = 1.0 - k / np.arange(num_samples - num_correct + 1, num_samples + 1)
    return float(1.0 - np.prod(ratios))


def _as_matrix(resolved: Sequence[Sequence[bool]] | np.ndarray) -> np.ndarray:
    matrix = np.asarray(resolved, dtype=bool)
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(
            f"resolved must be [num_tasks, num_runs] with both at least 1, got shape {matrix.shape}"
        )
    return matrix


def mean_pass_at_k(resolved: Sequence[Sequence[bool]] | np.ndarray, k: int) -> float:
    """pass@k of `resolved` [num_tasks, num_runs], averaged over tasks."""
    matrix = _as_matrix(resolved)
    num_runs = matrix.shape[1]
    return float(np.mean([pass_at_k(num_runs, int(row.sum()), k) for row in matrix]))


def curve_ks(max_k: int) -> list[int]:
    """1, 2, 4, ... up to `max_k`, with `max_k` itself last (e.g. 6 -> [1, 2, 4, 6])."""
    if max_k < 1:
        raise ValueError(f"max_k must be at least 1, got {max_k}")
    ks = [2**i for i in range(max_k.bit_length()) if 2**i <= max_k]
    return ks if ks[-1] == max_k else [*ks, max_k]


def pass_at_k_curve(resolved: Sequence[Sequence[bool]] | np.ndarray) -> dict[int, float]:
    """{k: mean pass@k} for k in `curve_ks(num_runs)`."""
    matrix = _as_matrix(resolved)
    return {k: mean_pass_at_k(matrix, k) for k in curve_ks(matrix.shape[1])}


@dataclass(frozen=True)
class AveragedPassAt1:
    """Pass@1 averaged over runs.

    mean: mean over runs of each run's Pass@1. stderr: standard error of that mean,
    std(per_run, ddof=1) / sqrt(num_runs) (NaN with one run). per_run: [num_runs].
    """

    mean: float
    stderr: float
    per_run: tuple[float, ...]


def averaged_pass_at_1(resolved: Sequence[Sequence[bool]] | np.ndarray) -> AveragedPassAt1:
    """Pass@1 of each run (mean over tasks), averaged over the runs, with its standard error."""
    matrix = _as_matrix(resolved)
    per_run = matrix.mean(axis=0)
    num_runs = len(per_run)
    stderr = float(per_run.std(ddof=1) / math.sqrt(num_runs)) if num_runs > 1 else math.nan
    return AveragedPassAt1(float(per_run.mean()), stderr, tuple(float(p) for p in per_run))


def expected_resolved(resolved: Sequence[bool], picks: Sequence[int]) -> float:
    """Mean resolved value of the tied `picks` (positions into `resolved`): a uniform pick's
    expected value."""
    if len(picks) == 0:
        raise ValueError("a selector returned no candidate; it must return at least one position")
    return float(np.mean([bool(resolved[i]) for i in picks]))


def candidate_subsets(
    num_candidates: int, k: int, *, max_subsets: int, rng: np.random.Generator
) -> list[tuple[int, ...]]:
    """Every k-subset of range(num_candidates) when there are at most `max_subsets`, else
    `max_subsets` random ones (each uniform, sorted)."""
    if not 1 <= k <= num_candidates:
        raise ValueError(f"need 1 <= k <= num_candidates={num_candidates}, got k={k}")
    if math.comb(num_candidates, k) <= max_subsets:
        return list(itertools.combinations(range(num_candidates), k))
    return [
        tuple(sorted(rng.choice(num_candidates, size=k, replace=False).tolist()))
        for _ in range(max_subsets)
    ]


def best_at_k(
    resolved: Sequence[bool],
    candidates: Sequence[Candidate],
    select: Selector,
    k: int,
    *,
    max_subsets: int = 1000,
    rng: np.random.Generator | None = None,
) -> float:
    """Best@k of one task: the expected resolved value of `select`'s pick among k of the
    task's candidates, averaged over k-subsets (see `candidate_subsets`).

    resolved: [n] per candidate; candidates: [n] whatever `select` reads (e.g. scores).
    """
    if len(resolved) != len(candidates):
        raise ValueError(
            f"{len(resolved)} resolved flags for {len(candidates)} candidates; pass one each"
        )
    rng = rng if rng is not None else np.random.default_rng(0)
    values = []
    for subset in candidate_subsets(len(candidates), k, max_subsets=max_subsets, rng=rng):
        picks = select([candidates[i] for i in subset])
        values.append(expected_resolved([resolved[i] for i in subset], picks))
    return float(np.mean(values))


def best_at_k_curve(
    resolved: Sequence[Sequence[bool]] | np.ndarray,
    candidates: Sequence[Sequence[Candidate]],
    select: Selector,
    *,
    max_subsets: int = 1000,
    seed: int = 0,
) -> dict[int, float]:
    """{k: Best@k averaged over tasks} for k in `curve_ks(num_runs)`.

    resolved: [num_tasks, num_runs]; candidates: [num_tasks][num_runs].
    """
    matrix = _as_matrix(resolved)
    if len(candidates) != matrix.shape[0]:
        raise ValueError(f"{len(candidates)} candidate lists for {matrix.shape[0]} tasks")
    rng = np.random.default_rng(seed)
    return {
        k: float(
            np.mean(
                [
                    best_at_k(row, task_candidates, select, k, max_subsets=max_subsets, rng=rng)
                    for row, task_candidates in zip(matrix, candidates, strict=True)
                ]
            )
        )
        for k in curve_ks(matrix.shape[1])
    }
