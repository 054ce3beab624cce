import numpy as np
import pytest

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.rl.batch import assemble_batch, bucket_length


def make_rollout(
    task_id, prompt_len, turns, reward, seed, stop_reason="finished", infra_error=False
):
    """A prompt (mask 0) then alternating assistant (mask 1) / observation (mask 0) spans."""
    rng = np.random.default_rng(seed)
    tokens, mask = [int(t) for t in rng.integers(1, 100, prompt_len)], [0] * prompt_len
    for i, length in enumerate(turns):
        tokens += [int(t) for t in rng.integers(1, 100, length)]
        mask += [1 - i % 2] * length
    return trajectory(task_id, tokens, mask, reward, stop_reason, infra_error, prompt_len, seed)


def trajectory(
    task_id,
    tokens,
    mask,
    reward,
    stop_reason="finished",
    infra_error=False,
    prompt_len=1,
    seed=0,
    logprobs=None,
):
    rng = np.random.default_rng(seed)
    if logprobs is None:
        logprobs = [float(-rng.random()) if m else 0.0 for m in mask]
    return Trajectory(
        task_id=task_id,
        rollout_index=seed,
        policy_version=0,
        prompt_ids=tuple(tokens[:prompt_len]),
        token_ids=tuple(tokens),
        loss_mask=tuple(mask),
        sampler_logprobs=tuple(logprobs),
        reward=reward,
        stop_reason=StopReason(stop_reason),
        infra_error=infra_error,
        num_steps=1,
        patch="",
        timings={},
        steps=(),
        grade=None,
    )


def rebuild(batch):
    """Maps each packed sequence back to (input_ids, targets, mask, sampler_logprobs, advantages)."""
    out = []
    for mb in batch.micro_batches:
        for row in range(mb.shape[0]):
            for segment in np.unique(mb.segment_ids[row]):
                if segment == 0:
                    continue
                at = mb.segment_ids[row] == segment
                np.testing.assert_array_equal(mb.positions[row, at], np.arange(at.sum()))
                assert len(np.unique(mb.advantages[row, at])) == 1
                out.append(
                    (
                        mb.input_ids[row, at],
                        mb.targets[row, at],
                        mb.loss_mask[row, at],
                        mb.sampler_logprobs[row, at],
                        float(mb.advantages[row, at][0]),
                    )
                )
    return out


def test_bucket_length():
    assert [bucket_length(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]
    assert bucket_length(33, [16, 48, 32]) == 48
    with pytest.raises(ValueError, match="larger bucket"):
        bucket_length(49, [16, 48])


@pytest.mark.parametrize("pack_length", [None, 64], ids=["row_per_sequence", "packed"])
def test_shapes_shift_masks_and_advantages(pack_length):
    rollouts = [
        make_rollout("a", 5, (4, 3, 6), 1.0, 0),
        make_rollout("a", 5, (9,), 0.0, 1),
        make_rollout("a", 5, (3, 2, 3, 2, 3), 0.0, 2),
        make_rollout("a", 5, (20,), 1.0, 3, stop_reason="max_steps"),  # masked, baseline reward 0
        make_rollout("b", 3, (2,), 1.0, 4),
        make_rollout("b", 3, (30,), 0.0, 5, infra_error=True),  # masked, out of the baseline
        make_rollout("c", 4, (5, 5, 5), 0.0, 6),  # lone valid member: advantage 0
    ]
    batch = assemble_batch(rollouts, micro_batch_size=2, pack_length=pack_length)

    for mb in batch.micro_batches:
        assert mb.shape[0] == 2 and mb.shape[1] == bucket_length(mb.shape[1])
        for name in ("input_ids", "targets", "positions", "segment_ids"):
            assert getattr(mb, name).dtype == np.int32 and getattr(mb, name).shape == mb.shape
        for name in ("loss_mask", "advantages", "sampler_logprobs"):
            assert getattr(mb, name).dtype == np.float32 and getattr(mb, name).shape == mb.shape
        padding = mb.segment_ids == 0
        assert not mb.loss_mask[padding].any() and not mb.advantages[padding].any()
    if pack_length is None:
        assert [mb.shape[1] for mb in batch.micro_batches] == [32, 32, 4]  # longest first

    # Group a's baseline has four members (the max_steps one with reward 0); group b only one.
    want_advantage = {0: 1.0, 1: -1 / 3, 2: -1 / 3, 4: 0.0, 6: 0.0}
    got = rebuild(batch)
    assert len(got) == len(want_advantage)  # masked rollouts are not trained on
    for index, advantage in want_advantage.items():
        rollout = rollouts[index]
        tokens = np.array(rollout.token_ids)
        match = [g for g in got if len(g[0]) == len(tokens) - 1 and (g[0] == tokens[:-1]).all()]
        assert len(match) == 1
        input_ids, targets, mask, logprobs, adv = match[0]
        np.testing.assert_array_equal(targets, tokens[1:])
        np.testing.assert_array_equal(mask, np.array(rollout.loss_mask)[1:])
        np.testing.assert_allclose(logprobs, np.array(rollout.sampler_logprobs)[1:])
        assert adv == pytest.approx(advantage, abs=1e-6)

    stats = batch.stats
    assert stats.num_trajectories == 7 and stats.num_trained == 5
    assert stats.num_compact_filtered == 1 and stats.num_infra_excluded == 1
    assert stats.stop_reasons == {"finished": 6, "max_steps": 1}
    assert (stats.groups.solve_partial, stats.groups.solve_all, stats.groups.solve_none) == (
        1,
        1,
        1,
    )
    assert stats.loss_tokens == sum(sum(rollouts[i].loss_mask) for i in want_advantage)
    assert 0 < stats.padding_fraction < 1


def test_packing_fills_rows_and_counts_sequences():
    rollouts = [make_rollout(f"t{i // 4}", 2, (3 + i,), float(i % 2), i) for i in range(12)]
    batch = assemble_batch(rollouts, micro_batch_size=2, pack_length=32, length_buckets=[16, 32])
    lengths = sorted(int(n) for mb in batch.micro_batches for n in mb.sequence_lengths())
    assert lengths == sorted(len(r.token_ids) - 1 for r in rollouts)
    assert all((mb.segment_ids > 0).sum(axis=1).max() <= 32 for mb in batch.micro_batches)
    rows = sum(mb.shape[0] for mb in batch.micro_batches)
    assert rows < len(rollouts)  # several sequences share a row
    assert {mb.shape[1] for mb in batch.micro_batches} <= {16, 32}


def test_bad_trajectories_are_explained():
    first_trained = trajectory("a", [1, 2], [1, 1], 1.0)
    with pytest.raises(ValueError, match="first token"):
        assemble_batch([first_trained], micro_batch_size=1)
    with pytest.raises(ValueError, match="pack length"):
        assemble_batch(
            [make_rollout("a", 3, (40,), 1.0, 0)] * 2, micro_batch_size=1, pack_length=16
        )


def test_failed_groups_are_kept_with_zero_advantage_and_masked_ones_dropped():
    # Zero-advantage sequences still count in the loss denominator, so they stay.
    batch = assemble_batch(
        [make_rollout("a", 3, (4,), 0.0, i) for i in range(2)], micro_batch_size=4, advantage="grpo"
    )
    (mb,) = batch.micro_batches
    assert (mb.segment_ids > 0).any(axis=1).sum() == 2 and not mb.advantages.any()
    assert batch.stats.groups.solve_none == 1
    timed_out = [make_rollout("a", 3, (4,), 0.0, i, stop_reason="timeout") for i in range(2)]
    assert assemble_batch(timed_out, micro_batch_size=4).micro_batches == ()
