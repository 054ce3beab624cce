import numpy as np
import pytest

from deepswe_jax.rl.advantages import (
    compact_filter,
    compute_advantages,
    drgrpo_advantages,
    group_stats,
    grpo_advantages,
    leave_one_out_advantages,
)


def reference_advantages(name, rewards, valid):
    """Group-by-group loops over the valid members only."""
    out = np.zeros(rewards.shape)
    for g in range(rewards.shape[0]):
        members = np.nonzero(valid[g])[0]
        r = rewards[g, members]
        for k, i in enumerate(members):
            if name == "loo":
                others = np.delete(r, k)
                out[g, i] = r[k] - others.mean() if len(others) else 0.0
            elif name == "grpo":
                out[g, i] = (r[k] - r.mean()) / (r.std(ddof=1) + 1e-6) if len(r) > 1 else 0.0
            else:
                out[g, i] = r[k] - r.mean()
    return out


@pytest.mark.parametrize("name", ["loo", "grpo", "drgrpo"])
def test_advantages_match_reference_on_random_and_degenerate_groups(name):
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(7, 8))
    valid = rng.random((7, 8)) < 0.8
    rewards[0] = 1.0  # all equal
    valid[0] = True
    valid[1] = False
    valid[1, 3] = True  # group of one
    valid[2] = False  # empty group
    rewards[3] = rng.integers(0, 2, size=8)  # binary
    valid[3] = True
    got = compute_advantages(name, rewards, valid)
    np.testing.assert_allclose(
        got, reference_advantages(name, rewards, valid), rtol=1e-5, atol=1e-5
    )
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got[0], 0.0)
    np.testing.assert_array_equal(got[1:3], 0.0)
    assert np.all(got[~valid] == 0.0)


def test_leave_one_out_is_deepswe_formula():
    got = leave_one_out_advantages(np.array([[1.0, 0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(got, [[1.0, -1 / 3, -1 / 3, -1 / 3]], rtol=1e-6)
    # Without a valid mask every member counts; a group of one gets no signal.
    np.testing.assert_array_equal(leave_one_out_advantages(np.array([[1.0]])), [[0.0]])


def test_grpo_and_drgrpo_scaling():
    rewards = np.array([[1.0, 0.0]])
    np.testing.assert_allclose(drgrpo_advantages(rewards), [[0.5, -0.5]])
    std = np.std([1.0, 0.0], ddof=1)
    np.testing.assert_allclose(
        grpo_advantages(rewards), [[0.5 / (std + 1e-6), -0.5 / (std + 1e-6)]], rtol=1e-6
    )


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="reshape"):
        leave_one_out_advantages(np.zeros(8))
    with pytest.raises(ValueError, match="config.rl.advantage"):
        compute_advantages("ppo", np.zeros((1, 2)))


def test_group_stats_counts_solved_groups():
    rewards = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 0, 1]], dtype=float)
    valid = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0]], dtype=bool)
    valid[2, 1:] = True
    stats = group_stats(rewards, valid)
    assert (stats.solve_all, stats.solve_none, stats.solve_partial, stats.empty) == (1, 1, 1, 1)
    # An invalid failed member does not turn a solve-all group into a partial one.
    stats = group_stats(np.array([[1.0, 0.0]]), np.array([[True, False]]))
    assert stats.solve_all == 1


def test_compact_filter_masks_unfinished_and_excludes_infra_from_baseline():
    reasons = ["finished", "max_steps", "max_context", "timeout", "env_error", "finished"]
    infra = [False, False, False, False, False, True]
    rewards = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    f = compact_filter(rewards, reasons, infra)
    np.testing.assert_array_equal(f.loss_weight, [1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(f.in_baseline, [1, 1, 1, 1, 0, 0])
    # Unfinished rollouts count as failures in the baseline, whatever the grader said.
    np.testing.assert_array_equal(f.baseline_reward, [1, 0, 0, 0, 0, 0])
    assert f.num_compact_filtered == 3 and f.num_infra_excluded == 2
    # The baseline of the finished rollout uses the three unfinished rollouts (reward 0).
    adv = leave_one_out_advantages(f.baseline_reward[None], f.in_baseline[None])
    np.testing.assert_allclose(adv[0], [1.0, -1 / 3, -1 / 3, -1 / 3, 0.0, 0.0], rtol=1e-6)

    ablation = compact_filter(rewards, reasons, infra, enabled=False)
    np.testing.assert_array_equal(ablation.loss_weight, [1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(ablation.baseline_reward, rewards)


def test_compact_filter_accepts_str_enums_and_rejects_unknown_reasons():
    import enum

    class StopReason(str, enum.Enum):
        finished = "finished"
        timeout = "timeout"

    f = compact_filter([1.0, 1.0], [StopReason.finished, StopReason.timeout], [False, False])
    np.testing.assert_array_equal(f.loss_weight, [1, 0])
    with pytest.raises(ValueError, match="unknown stop reason"):
        compact_filter([0.0], ["crashed"], [False])
