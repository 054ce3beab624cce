"""Best-of-k selection: verifier, execution and hybrid cascades on hand-worked examples."""

import pytest

from deepswe_jax.verify import metrics
from deepswe_jax.verify.select import (
    SELECTORS,
    CandidateScores,
    hybrid_shortlist,
    select_by_execution,
    select_by_verifier,
    select_hybrid,
)


def candidates(verifier, regression, reproduction):
    return [
        CandidateScores(verifier=v, regression=g, reproduction=p)
        for v, g, p in zip(verifier, regression, reproduction, strict=True)
    ]


# Six candidates; each selector picks a different one.
SIX = candidates(
    verifier=[0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
    regression=[3, 5, 5, 9, 9, 5],
    reproduction=[1, 0, 1, 1, 1, 1],
)


def test_verifier_picks_its_top_score_and_keeps_ties():
    assert select_by_verifier(SIX) == (0,)
    tied = [CandidateScores(verifier=v) for v in (0.2, 0.7, 0.7)]
    assert select_by_verifier(tied) == (1, 2)


def test_execution_picks_max_regression_then_max_reproduction():
    # regression 9 for candidates 3 and 4; both reproduce: a tie.
    assert select_by_execution(SIX) == (3, 4)
    narrowed = candidates([None] * 4, [5, 7, 7, 3], [1, 0, 1, 1])
    assert select_by_execution(narrowed) == (2,)


def test_hybrid_cascade_matches_the_hand_worked_example():
    # 6 candidates: keep max(3, ceil(6/2)) = 3 by verifier -> {0, 1, 2}; max regression among
    # them (5) -> {1, 2}; max reproduction -> {2}.
    assert hybrid_shortlist([c.verifier for c in SIX]) == (0, 1, 2)
    assert select_hybrid(SIX) == (2,)
    # Regression and reproduction tie -> the verifier decides among the survivors.
    ties = candidates([0.3, 0.9, 0.6, 0.1], [4, 4, 4, 9], [1, 1, 1, 1])
    assert hybrid_shortlist([c.verifier for c in ties]) == (0, 1, 2)  # at least 3 of 4
    assert select_hybrid(ties) == (1,)


def test_hybrid_shortlist_sizes_and_boundary_ties():
    assert hybrid_shortlist([0.1 * i for i in range(10)]) == (5, 6, 7, 8, 9)  # half of 10
    assert hybrid_shortlist([0.5, 0.6]) == (0, 1)  # fewer than 3: all
    assert hybrid_shortlist([0.1, 0.2, 0.3, 0.4, 0.5]) == (2, 3, 4)  # ceil(5/2) = 3
    # The third place is shared by three candidates: all of them stay.
    assert hybrid_shortlist([0.9, 0.5, 0.5, 0.5, 0.1, 0.0]) == (0, 1, 2, 3)


def test_missing_scores_rank_last_and_absent_stages_are_skipped():
    # No reproduction tests anywhere: execution selection is regression alone.
    no_repro = candidates([None] * 3, [2, 8, 8], [None] * 3)
    assert select_by_execution(no_repro) == (1, 2)
    # A candidate whose regression run failed (None) loses to any measured one.
    partial = candidates([0.9, 0.8, 0.7], [None, 0, 1], [1, 1, 1])
    assert select_hybrid(partial) == (2,)


def test_selection_picks_the_resolved_candidate_when_the_verifier_ranks_it_first():
    resolved = [False, False, True, False]
    scores = candidates([0.2, 0.3, 0.95, 0.1], [6, 6, 6, 5], [0, 0, 1, 0])
    for name in ("verifier", "hybrid"):
        assert SELECTORS[name](scores) == (2,)
        assert metrics.best_at_k(resolved, scores, SELECTORS[name], 4) == 1.0
    # Best@k over subsets: whenever candidate 2 is in the subset it is chosen, so Best@k equals
    # the chance that it is drawn: C(3, k-1) / C(4, k) = k / 4.
    curve = metrics.best_at_k_curve([resolved], [scores], select_by_verifier)
    assert curve == pytest.approx({1: 1 / 4, 2: 2 / 4, 4: 1.0})
