"""The training reward curve: standard errors, thirds and collapse warnings (issue 27)."""

import math

import pytest

from deepswe_jax.rl.curve import (
    DropWatch,
    IterationReward,
    compare_thirds,
    iteration_reward,
    reward_curve,
    reward_drops,
)

# The curve issue 27 saw from ./run.sh (32 episodes per iteration): 0.72 -> 0.16 at step 5.
ISSUE_27_CURVE = [0.53, 0.50, 0.47, 0.72, 0.16, 0.31, 0.31, 0.31, 0.44, 0.41, 0.38, 0.47]


def curve_of(rewards, episodes=32):
    return [IterationReward(step, r, episodes) for step, r in enumerate(rewards, start=1)]


def test_binomial_standard_error():
    assert IterationReward(1, 0.5, 100).stderr == pytest.approx(0.05)
    assert IterationReward(1, 1.0, 100).stderr == 0.0
    assert IterationReward(1, 0.5, 0).stderr == 0.0


def test_the_issue_27_collapse_is_reported_against_the_best_before_it():
    drops = reward_drops(curve_of(ISSUE_27_CURVE))
    # 0.16 at step 5, then 0.31 three times: each > 3 s.e. below step 4's 0.72; 0.44 is not.
    assert [d.step for d in drops] == [5, 6, 7, 8]
    drop = drops[0]
    assert (drop.best_step, drop.best, drop.reward) == (4, 0.72, 0.16)
    # 0.56 over sqrt(0.72*0.28/32 + 0.16*0.84/32) = 0.102
    assert drop.standard_errors == pytest.approx(0.56 / math.hypot(0.0794, 0.0648), rel=1e-2)
    assert "step 5" in str(drop) and "config.rl.lr" in str(drop)


def test_a_fall_within_noise_is_not_a_drop():
    assert reward_drops(curve_of([0.5, 0.7, 0.55, 0.6, 0.65])) == []
    # The same fall with many more episodes is significant.
    assert [d.step for d in reward_drops(curve_of([0.5, 0.7, 0.55], episodes=2000))] == [3]


def test_a_fall_from_all_resolved_to_some_failing_counts_with_zero_stderr_on_both_sides():
    assert [d.step for d in reward_drops(curve_of([1.0, 0.0]))] == [2]
    assert reward_drops(curve_of([0.0, 0.0, 0.0])) == []


def test_drop_watch_follows_iterations_as_they_come():
    watch = DropWatch()
    observed = [watch.observe(p) for p in curve_of(ISSUE_27_CURVE)]
    assert [o.step for o in observed if o is not None] == [5, 6, 7, 8]
    assert watch.best.step == 4


def test_thirds_pool_their_episodes():
    thirds = compare_thirds(curve_of(ISSUE_27_CURVE))
    assert thirds.first == pytest.approx((0.53 + 0.50 + 0.47 + 0.72) / 4)
    assert thirds.last == pytest.approx((0.44 + 0.41 + 0.38 + 0.47) / 4)
    assert thirds.gain == pytest.approx(thirds.last - thirds.first)
    assert thirds.first_stderr == pytest.approx(math.sqrt(0.555 * 0.445 / 128), rel=1e-3)
    with pytest.raises(ValueError, match="at least 2"):
        compare_thirds(curve_of([0.5]))


def test_curve_from_metrics_rows_skips_rows_without_reward_and_sorts_by_step():
    rows = [
        {"step": 2, "rollout/reward_mean": 0.25, "rollout/episodes": 8.0},
        {
            "step": 1,
            "rollout/reward_mean": 0.5,
            "rollout/episodes": 8.0,
            "train/entropy": 0.2,
            "train/policy_approx_kl": 0.01,
        },
        {"step": 3, "train/loss": 0.0},
    ]
    curve = reward_curve(rows)
    assert [(p.step, p.reward, p.episodes) for p in curve] == [(1, 0.5, 8), (2, 0.25, 8)]
    assert (curve[0].entropy, curve[0].kl) == (0.2, 0.01)
    assert curve[1].kl is None
    assert iteration_reward({"step": 3}) is None
