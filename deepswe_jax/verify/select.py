"""Best-of-k selection over per-candidate scores (pure functions; no models, no containers).

Each selector takes one task's candidates as `CandidateScores` and returns the positions of
the chosen ones: several when they tie, and `metrics.best_at_k` scores a tie as its expected
value (a uniform pick among the tied candidates).

- `select_by_verifier`: highest execution-free verifier score.
- `select_by_execution`: most regression tests passing, then the best reproduction score.
- `select_hybrid` (R2E-Gym): keep the top half by verifier score (at least 3), then most
  regression tests passing, then the best reproduction score, then the highest verifier score.

A stage whose score no candidate has (None everywhere, e.g. no reproduction tests) is skipped;
a candidate missing a score that others have ranks below all of them in that stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

HYBRID_KEEP_FRACTION = 0.5
HYBRID_MIN_KEEP = 3


@dataclass(frozen=True)
class CandidateScores:
    """What the verifiers say about one candidate patch (None: not measured).

    verifier: execution-free verifier score, p(YES) / (p(YES) + p(NO)) in [0, 1].
    regression: the repository's existing tests passing with the patch (count or fraction).
    reproduction: reproduction tests passing with the patch (count or fraction).
    """

    verifier: float | None = None
    regression: float | None = None
    reproduction: float | None = None


def _rank_value(value: float | None) -> float:
    return -math.inf if value is None else float(value)


def best_positions(values: Sequence[float | None], among: Sequence[int]) -> tuple[int, ...]:
    """The positions in `among` whose value is the highest (all of them when tied or when no
    value is set); None ranks below any number."""
    if not among:
        raise ValueError("no candidates to select from")
    best = max(_rank_value(values[i]) for i in among)
    return tuple(i for i in among if _rank_value(values[i]) == best)


def _cascade(
    candidates: Sequence[CandidateScores], stages: Sequence[str], among: Sequence[int]
) -> tuple[int, ...]:
    """Narrow `among` to the best by each score in `stages` in turn."""
    kept = tuple(among)
    for stage in stages:
        values = [getattr(candidate, stage) for candidate in candidates]
        kept = best_positions(values, kept)
    return kept


def select_by_verifier(candidates: Sequence[CandidateScores]) -> tuple[int, ...]:
    """Positions with the highest verifier score."""
    return _cascade(candidates, ("verifier",), range(len(candidates)))


def select_by_execution(candidates: Sequence[CandidateScores]) -> tuple[int, ...]:
    """Positions with the most regression tests passing, then the best reproduction score."""
    return _cascade(candidates, ("regression", "reproduction"), range(len(candidates)))


def hybrid_shortlist(
    verifier_scores: Sequence[float | None],
    *,
    keep_fraction: float = HYBRID_KEEP_FRACTION,
    min_keep: int = HYBRID_MIN_KEEP,
) -> tuple[int, ...]:
    """The top `keep_fraction` of candidates by verifier score, at least `min_keep` (all when
    fewer). A candidate tied with the last kept score is kept too, so the shortlist does not
    depend on candidate order."""
    num = len(verifier_scores)
    if num == 0:
        raise ValueError("no candidates to select from")
    keep = min(num, max(min_keep, math.ceil(num * keep_fraction)))
    ranked = sorted((_rank_value(v) for v in verifier_scores), reverse=True)
    threshold = ranked[keep - 1]
    return tuple(i for i, v in enumerate(verifier_scores) if _rank_value(v) >= threshold)


def select_hybrid(
    candidates: Sequence[CandidateScores],
    *,
    keep_fraction: float = HYBRID_KEEP_FRACTION,
    min_keep: int = HYBRID_MIN_KEEP,
) -> tuple[int, ...]:
    """R2E-Gym's hybrid selection: verifier shortlist (`hybrid_shortlist`) -> most regression
    tests passing -> best reproduction score -> highest verifier score."""
    shortlist = hybrid_shortlist(
        [candidate.verifier for candidate in candidates],
        keep_fraction=keep_fraction,
        min_keep=min_keep,
    )
    return _cascade(candidates, ("regression", "reproduction", "verifier"), shortlist)


SELECTORS: dict[str, Callable[[Sequence[CandidateScores]], tuple[int, ...]]] = {
    "verifier": select_by_verifier,
    "execution": select_by_execution,
    "hybrid": select_hybrid,
}
# The scores each selector reads (what a scorer must provide).
SELECTOR_SCORES: dict[str, frozenset[str]] = {
    "verifier": frozenset({"verifier"}),
    "execution": frozenset({"regression", "reproduction"}),
    "hybrid": frozenset({"verifier", "regression", "reproduction"}),
}
