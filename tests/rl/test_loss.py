import jax
import jax.numpy as jnp
import numpy as np
import pytest

from deepswe_jax.rl.loss import LOSS_MODES, SEQUENCE_DENOMINATORS, policy_loss, ratio_metrics

EPS_LOW, EPS_HIGH, MAX_LEN = 0.2, 0.28, 64


def random_batch(seed, batch=5, seq=12, packed=False):
    rng = np.random.default_rng(seed)
    logprobs = rng.normal(-1.0, 0.3, (batch, seq)).astype(np.float32)
    old = (logprobs + rng.normal(0, 0.3, (batch, seq))).astype(np.float32)
    mask = (rng.random((batch, seq)) < 0.7).astype(np.float32)
    mask[1] = 0.0  # a compact-filtered row: no loss tokens
    if packed:
        # Rows hold 1-3 sequences, then padding (segment 0, mask 0).
        segment_ids = np.zeros((batch, seq), np.int32)
        for row in range(batch):
            cuts = np.sort(
                rng.choice(np.arange(1, seq - 2), size=rng.integers(0, 3), replace=False)
            )
            bounds = [0, *cuts, seq - 2]
            for k in range(len(bounds) - 1):
                segment_ids[row, bounds[k] : bounds[k + 1]] = k + 1
        mask[segment_ids == 0] = 0.0
        advantages = rng.normal(size=(batch, seq)).astype(np.float32)
        # One advantage per sequence.
        for row in range(batch):
            for s in np.unique(segment_ids[row]):
                advantages[row, segment_ids[row] == s] = rng.normal()
    else:
        segment_ids = None
        advantages = rng.normal(size=(batch,)).astype(np.float32)
    return logprobs, old, advantages, mask, segment_ids


def sequences_of(mask, segment_ids):
    """List of boolean [batch, seq] masks, one per sequence (row, segment)."""
    if segment_ids is None:
        segment_ids = np.ones(mask.shape, np.int32)
    out = []
    for row in range(mask.shape[0]):
        for s in np.unique(segment_ids[row]):
            if s == 0:
                continue
            member = np.zeros(mask.shape, bool)
            member[row] = segment_ids[row] == s
            out.append(member)
    return out


def numpy_loss(logprobs, old, advantages, mask, segment_ids, mode, sequences="all", absent=0):
    """Plain NumPy: returns (sum, denominator) and d(sum)/d(logprobs). sequences='all' counts
    every sequence (and `absent` more), 'trained' those with a loss token."""
    adv = advantages[:, None] * np.ones_like(mask) if advantages.ndim == 1 else advantages
    ratio = np.exp(np.clip(logprobs.astype(np.float64) - old, -20, 20))
    surrogate = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - EPS_LOW, 1 + EPS_HIGH))
    # Gradient of one token's loss: -A r unless the clip is active (then 0).
    clipped = ((adv > 0) & (ratio > 1 + EPS_HIGH)) | ((adv < 0) & (ratio < 1 - EPS_LOW))
    token_grad = np.where(clipped, 0.0, -adv * ratio)
    weights = np.zeros(mask.shape)
    num_sequences = 0
    for member in sequences_of(mask, segment_ids):
        tokens = mask[member].sum()
        if tokens == 0:
            num_sequences += sequences == "all"
            continue
        num_sequences += 1
        if mode == "seq_sum_const":
            weights[member] = mask[member] / MAX_LEN
        elif mode == "seq_mean_token_mean":
            weights[member] = mask[member] / tokens
    if mode == "token_mean":
        weights = mask.astype(np.float64)
        denominator = mask.sum()
    else:
        denominator = num_sequences + (absent if sequences == "all" else 0)
    return (surrogate * weights).sum(), denominator, token_grad * weights


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("packed", [False, True], ids=["row_per_sequence", "packed"])
@pytest.mark.parametrize("sequences", SEQUENCE_DENOMINATORS)
@pytest.mark.parametrize("mode", LOSS_MODES)
def test_loss_and_gradient_match_numpy(mode, sequences, packed, seed):
    logprobs, old, advantages, mask, segment_ids = random_batch(seed, packed=packed)
    absent = np.array([2.0, 0.0, 1.0, 0.0, 0.0], np.float32)  # left out of the arrays

    def loss_sum(lp):
        return policy_loss(
            lp,
            old,
            advantages,
            mask,
            mode=mode,
            max_response_len=MAX_LEN,
            segment_ids=segment_ids,
            sequences=sequences,
            absent_sequences=absent,
        )

    total, denominator = loss_sum(logprobs)
    grad = jax.grad(lambda lp: loss_sum(lp)[0])(logprobs)
    want_total, want_denominator, want_grad = numpy_loss(
        logprobs, old, advantages, mask, segment_ids, mode, sequences, absent.sum()
    )
    np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(denominator, want_denominator, rtol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("sequences", SEQUENCE_DENOMINATORS)
def test_gradient_equals_jnp_restatement(sequences):
    """Restated as DeepSWE's verl computes it (agentica-project/verl core_algos.agg_loss,
    seq-mean-token-sum): -min(rA, clip(r)A) summed per row / L, mean over all rows ('all'; the
    compact-filtered row 1 counts) or over the rows with a loss token ('trained')."""
    logprobs, old, advantages, mask, _ = random_batch(7)

    def restated(lp):
        r = jnp.exp(lp - old)
        a = advantages[:, None]
        objective = jnp.minimum(r * a, jnp.clip(r, 1 - EPS_LOW, 1 + EPS_HIGH) * a)
        per_sequence = (-objective * mask).sum(-1) / MAX_LEN
        if sequences == "all":
            return per_sequence.mean()
        counted = mask.sum(-1) > 0
        return jnp.where(counted, per_sequence, 0.0).sum() / counted.sum()

    def ours(lp):
        total, denominator = policy_loss(
            lp, old, advantages, mask, max_response_len=MAX_LEN, sequences=sequences
        )
        return total / denominator

    np.testing.assert_allclose(ours(logprobs), restated(logprobs), rtol=1e-6)
    np.testing.assert_allclose(
        jax.grad(ours)(logprobs), jax.grad(restated)(logprobs), rtol=1e-5, atol=1e-7
    )


def test_all_sequences_make_the_gradient_smaller_by_n_all_over_n_trained():
    logprobs, old, advantages, mask, _ = random_batch(5, batch=6)
    mask[[1, 4]] = 0.0  # two compact-filtered rows of six

    def gradient(sequences):
        def mean_loss(lp):
            total, denominator = policy_loss(
                lp, old, advantages, mask, max_response_len=MAX_LEN, sequences=sequences
            )
            return total / denominator

        return np.asarray(jax.grad(mean_loss)(logprobs))

    np.testing.assert_allclose(gradient("trained"), gradient("all") * 6 / 4, rtol=1e-6)


def test_clip_high_applies_only_above_one_plus_eps_high_for_positive_advantages():
    ratios = np.array([0.5, 0.75, 0.9, 1.1, 1.25, 1.3, 2.0])
    old = np.zeros((2, len(ratios)), np.float32)
    logprobs = np.log(ratios)[None].repeat(2, 0).astype(np.float32)
    advantages = np.array([1.0, -1.0], np.float32)
    mask = np.ones_like(old)
    grad = jax.grad(lambda lp: policy_loss(lp, old, advantages, mask, mode="token_mean")[0])(
        logprobs
    )
    grad = np.asarray(grad)
    # A > 0: only ratios above 1.28 lose their gradient (1.25 would be clipped by a symmetric 0.2).
    np.testing.assert_array_equal(grad[0] == 0, ratios > 1.28)
    # A < 0: only ratios below 0.8 lose their gradient.
    np.testing.assert_array_equal(grad[1] == 0, ratios < 0.8)
    np.testing.assert_allclose(grad[0][grad[0] != 0], -ratios[ratios <= 1.28], rtol=1e-6)

    metrics = ratio_metrics(logprobs, old, advantages, mask)
    assert int(metrics["clipped_high"]) == 2 and int(metrics["clipped_low"]) == 2


def test_log_ratio_is_clamped():
    logprobs = jnp.array([[60.0, -60.0]])
    old = jnp.zeros((1, 2))
    total, _ = policy_loss(logprobs, old, jnp.array([-1.0]), jnp.ones((1, 2)), mode="token_mean")
    np.testing.assert_allclose(total, np.exp(20.0) - (1 - EPS_LOW), rtol=1e-5)
    grad = jax.grad(
        lambda lp: policy_loss(lp, old, jnp.array([-1.0]), jnp.ones((1, 2)), mode="token_mean")[0]
    )(logprobs)
    assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("mode", LOSS_MODES)
def test_micro_batch_sums_combine_exactly(mode):
    logprobs, old, advantages, mask, _ = random_batch(3, batch=8)
    whole = policy_loss(logprobs, old, advantages, mask, mode=mode, max_response_len=MAX_LEN)
    parts = [
        policy_loss(
            logprobs[s], old[s], advantages[s], mask[s], mode=mode, max_response_len=MAX_LEN
        )
        for s in (slice(0, 3), slice(3, 8))
    ]
    np.testing.assert_allclose(sum(p[0] for p in parts), whole[0], rtol=1e-6)
    np.testing.assert_allclose(sum(p[1] for p in parts), whole[1], rtol=1e-6)


def test_all_masked_batch_gives_zero_sum_and_denominator():
    zeros = jnp.zeros((2, 4))
    for mode in LOSS_MODES:
        total, denominator = policy_loss(
            zeros, zeros, jnp.ones(2), zeros, mode=mode, max_response_len=8, sequences="trained"
        )
        assert float(total) == 0.0 and float(denominator) == 0.0
        total, denominator = policy_loss(
            zeros, zeros, jnp.ones(2), zeros, mode=mode, max_response_len=8, sequences="all"
        )
        # Without segment ids every row is a sequence; token_mean counts loss tokens only.
        assert float(total) == 0.0 and float(denominator) == (0 if mode == "token_mean" else 2)


def test_ratio_metrics_match_numpy():
    logprobs, old, advantages, mask, _ = random_batch(11)
    got = ratio_metrics(logprobs, old, advantages, mask)
    ratio = np.exp(logprobs.astype(np.float64) - old)
    on = mask > 0
    adv = np.broadcast_to(advantages[:, None], mask.shape)
    np.testing.assert_allclose(got["tokens"], on.sum())
    np.testing.assert_allclose(got["ratio_sum"], ratio[on].sum(), rtol=1e-5)
    np.testing.assert_allclose(got["ratio_min"], ratio[on].min(), rtol=1e-5)
    np.testing.assert_allclose(got["ratio_max"], ratio[on].max(), rtol=1e-5)
    np.testing.assert_allclose(
        got["approx_kl_sum"], (ratio - 1 - np.log(ratio))[on].sum(), rtol=1e-4
    )
    assert got["clipped_high"] == (on & (adv > 0) & (ratio > 1 + EPS_HIGH)).sum()
    assert got["clipped_low"] == (on & (adv < 0) & (ratio < 1 - EPS_LOW)).sum()


def test_bad_mode_and_missing_length_are_explained():
    x = jnp.zeros((1, 2))
    with pytest.raises(ValueError, match="config.rl.loss_mode"):
        policy_loss(x, x, jnp.zeros(1), x, mode="sum")
    with pytest.raises(ValueError, match="config.rl.loss_sequences"):
        policy_loss(x, x, jnp.zeros(1), x, mode="token_mean", sequences="kept")
    with pytest.raises(ValueError, match="max_response_len"):
        policy_loss(x, x, jnp.zeros(1), x, mode="seq_sum_const")
