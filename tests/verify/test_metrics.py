"""Evaluation metrics against hand-computed values."""

import math

import numpy as np
import pytest

from deepswe_jax.verify import metrics
from deepswe_jax.verify.select import CandidateScores, select_by_verifier


def oracle(candidates):
    """Picks a resolved candidate when there is one (candidates are resolved flags)."""
    resolved = [i for i, flag in enumerate(candidates) if flag]
    return resolved or list(range(len(candidates)))


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (4, 1, 1, 0.25),  # pass@1 = c / n
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2) / C(5,2)
        (10, 3, 4, 1 - 35 / 210),  # 1 - C(7,4) / C(10,4)
        (4, 0, 2, 0.0),
        (4, 3, 2, 1.0),  # n - c = 1 < k: every pair holds a resolved run
        (4, 4, 4, 1.0),
        (8, 1, 8, 1.0),
        (200, 1, 100, 0.5),  # large n, no overflow: 1 - C(199,100)/C(200,100) = 100/200
    ],
)
def test_pass_at_k_matches_the_combinatorial_formula(n, c, k, expected):
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
    assert metrics.pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="need|needs"):
        metrics.pass_at_k(n, c, k)


def test_mean_pass_at_k_averages_tasks():
    resolved = [[1, 0, 0, 0], [1, 1, 0, 0]]
    # task 0: 1 - C(3,2)/C(4,2) = 1/2; task 1: 1 - C(2,2)/C(4,2) = 5/6
    assert metrics.mean_pass_at_k(resolved, 2) == pytest.approx((1 / 2 + 5 / 6) / 2)
    assert metrics.pass_at_k_curve(resolved) == pytest.approx({1: 3 / 8, 2: 2 / 3, 4: 1.0})


def test_curve_ks_are_powers_of_two_then_max():
    assert metrics.curve_ks(1) == [1]
    assert metrics.curve_ks(8) == [1, 2, 4, 8]
    assert metrics.curve_ks(6) == [1, 2, 4, 6]
    assert metrics.curve_ks(16) == [1, 2, 4, 8, 16]


def test_averaged_pass_at_1_and_its_standard_error():
    # 3 tasks x 4 runs; per-run Pass@1 = 2/3, 1/3, 1, 0 -> mean 1/2.
    resolved = [[1, 1, 1, 0], [1, 0, 1, 0], [0, 0, 1, 0]]
    result = metrics.averaged_pass_at_1(resolved)
    assert result.per_run == pytest.approx((2 / 3, 1 / 3, 1.0, 0.0))
    assert result.mean == pytest.approx(0.5)
    # deviations 1/6, -1/6, 1/2, -1/2: sample variance (5/9) / 3 = 5/27; stderr sqrt(5/27) / 2
    assert result.stderr == pytest.approx(math.sqrt(5 / 27) / 2)
    single = metrics.averaged_pass_at_1([[1], [0]])
    assert single.mean == 0.5 and math.isnan(single.stderr)


def test_best_at_k_scores_ties_as_expected_value():
    # Candidates 0 and 1 tie at the top of the verifier; only 0 and 2 resolve.
    scores = [CandidateScores(verifier=v) for v in (0.9, 0.9, 0.1)]
    resolved = [True, False, True]
    # k=1: each candidate alone: 2/3. k=2: {0,1} tie -> 1/2, {0,2} -> 1, {1,2} -> 0: mean 1/2.
    # k=3: tie of 0 and 1 -> 1/2.
    for k, expected in [(1, 2 / 3), (2, 1 / 2), (3, 1 / 2)]:
        assert metrics.best_at_k(resolved, scores, select_by_verifier, k) == pytest.approx(expected)
    curve = metrics.best_at_k_curve([resolved], [scores], select_by_verifier)
    assert curve == pytest.approx({1: 2 / 3, 2: 1 / 2, 3: 1 / 2})


def test_best_at_k_with_an_oracle_selector_is_pass_at_k():
    rng = np.random.default_rng(1)
    resolved = rng.random((5, 8)) < 0.3
    best = metrics.best_at_k_curve(resolved, [list(row) for row in resolved], oracle)
    assert best == pytest.approx(metrics.pass_at_k_curve(resolved))


def test_best_at_k_samples_subsets_when_there_are_too_many():
    resolved = np.zeros((1, 16), bool)
    resolved[0, :3] = True
    subsets = metrics.candidate_subsets(16, 8, max_subsets=500, rng=np.random.default_rng(0))
    assert len(subsets) == 500
    assert all(len(set(s)) == 8 and list(s) == sorted(s) and max(s) < 16 for s in subsets)
    sampled = metrics.best_at_k_curve(resolved, [list(resolved[0])], oracle, max_subsets=500)
    exact = metrics.pass_at_k(16, 3, 8)  # 1 - C(13,8)/C(16,8) = 0.9
    assert sampled[8] == pytest.approx(exact, abs=0.03)
    assert sampled[1] == pytest.approx(3 / 16)  # C(16,1) = 16 subsets: enumerated exactly


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"\[num_tasks, num_runs\]"):
        metrics.averaged_pass_at_1([])
    with pytest.raises(ValueError, match="selector returned no candidate"):
        metrics.best_at_k([True, False], [0, 1], lambda candidates: [], 1)
    with pytest.raises(ValueError, match="one each"):
        metrics.best_at_k([True], [0, 1], oracle, 1)
