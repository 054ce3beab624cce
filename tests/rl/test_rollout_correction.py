"""Rollout correction (rl/rollout_correction.py): off is today's loss bit for bit; with an injected
sampler mismatch the weights truncate at C and the masks drop exactly the tokens and sequences
verl's rules name (tests/rl/test_verl_crosscheck.py runs verl's own code on random tensors)."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from deepswe_jax.rl.loss import policy_loss
from deepswe_jax.rl.objectives import LossSettings, PolicyGradientLoss
from deepswe_jax.rl.rollout_correction import RolloutCorrectionSettings, summarize
from deepswe_jax.rl.rollout_correction import correct_rollout as eager_correct_rollout
from deepswe_jax.rl.rollout_correction import mismatch_sums as eager_mismatch_sums

# Compiled once per settings and shape: op-by-op dispatch made this module slow.
correct_rollout = jax.jit(eager_correct_rollout, static_argnames="settings")
mismatch_sums = jax.jit(eager_mismatch_sums)

MAX_LEN = 64


def micro_batch(seed=0, rows=4, length=10):
    """Random [rows, length] arrays, one sequence per row (rows 0-2 have loss tokens)."""
    rng = np.random.default_rng(seed)
    logprobs = rng.normal(-1.0, 0.3, (rows, length)).astype(np.float32)
    old = (logprobs + rng.normal(0, 0.3, (rows, length))).astype(np.float32)
    mask = (rng.random((rows, length)) < 0.8).astype(np.float32)
    mask[:, 0] = 0.0
    return {
        "logprobs": jnp.asarray(logprobs),
        "old_logprobs": jnp.asarray(old),
        "sampler_logprobs": jnp.asarray(old + rng.normal(0, 0.5, old.shape).astype(np.float32)),
        "advantages": jnp.asarray(
            np.repeat(rng.normal(size=(rows, 1)), length, 1).astype(np.float32)
        ),
        "loss_mask": jnp.asarray(mask),
        "segment_ids": jnp.ones((rows, length), jnp.int32),
        "absent_sequences": jnp.zeros(rows, jnp.float32),
    }


def loss_and_grad(settings, batch):
    objective = PolicyGradientLoss(settings)

    def loss(logprobs):
        total, denominator, _ = objective(logprobs, jnp.zeros_like(logprobs), batch)
        return total / denominator

    return jax.jit(jax.value_and_grad(loss))(batch["logprobs"])


@pytest.mark.parametrize("mode", ["seq_sum_const", "token_mean", "seq_mean_token_mean"])
def test_off_is_todays_loss_bit_for_bit(mode):
    """Correction off (the default, and explicitly) = the plain GRPO++ policy_loss, loss and
    gradient equal to the last bit."""
    batch = micro_batch()
    settings = LossSettings(mode=mode, max_response_len=MAX_LEN)

    def plain(logprobs):
        total, denominator = policy_loss(
            logprobs,
            batch["old_logprobs"],
            batch["advantages"],
            batch["loss_mask"],
            mode=mode,
            max_response_len=MAX_LEN,
            segment_ids=batch["segment_ids"],
            absent_sequences=batch["absent_sequences"],
        )
        return total / denominator

    want_loss, want_grad = jax.jit(jax.value_and_grad(plain))(batch["logprobs"])
    for rollout in (RolloutCorrectionSettings(), RolloutCorrectionSettings(rollout_is=None)):
        got_loss, got_grad = loss_and_grad(
            LossSettings(mode=mode, max_response_len=MAX_LEN, rollout_correction=rollout), batch
        )
        assert np.asarray(got_loss).tobytes() == np.asarray(want_loss).tobytes()
        assert np.asarray(got_grad).tobytes() == np.asarray(want_grad).tobytes()
    assert not settings.rollout_correction.enabled


def injected(log_ratios, mask=None):
    """old = 0, sampler = -log_ratios: rho = exp(log_ratios) exactly where chosen."""
    log_ratios = np.asarray(log_ratios, np.float32)
    mask = np.ones_like(log_ratios) if mask is None else np.asarray(mask, np.float32)
    return jnp.zeros_like(log_ratios), jnp.asarray(-log_ratios), jnp.asarray(mask)


def test_token_tis_truncates_weights_at_c():
    old, sampler, mask = injected(
        [[0.0, 0.5, 1.0, -2.0], [3.0, 0.1, -0.1, 0.0]], [[1, 1, 1, 1], [1, 1, 1, 0]]
    )
    weights, new_mask, sums = correct_rollout(
        old, sampler, mask, RolloutCorrectionSettings(rollout_is="token", rollout_is_threshold=2.0)
    )
    want = np.minimum(np.exp([[0.0, 0.5, 1.0, -2.0], [3.0, 0.1, -0.1, 0.0]]), 2.0) * mask
    np.testing.assert_allclose(weights, want, rtol=1e-6)
    assert new_mask is not None and np.array_equal(new_mask, mask)
    assert float(sums["rollout_is_high_tokens"]) == 2  # e^1 and e^3 truncated
    assert float(sums["rollout_is_low_tokens"]) == 1  # e^-2 < 1/2
    assert float(sums["rollout_is_weight_max"]) == 2.0


def test_weights_multiply_the_clipped_loss_and_have_no_gradient():
    """Token TIS: each token's loss (and gradient) is the uncorrected one times its weight."""
    batch = micro_batch(seed=1)
    plain = LossSettings(mode="token_mean")
    tis = LossSettings(
        mode="token_mean", rollout_correction=RolloutCorrectionSettings(rollout_is="token")
    )
    weights, _, _ = correct_rollout(
        batch["old_logprobs"], batch["sampler_logprobs"], batch["loss_mask"], tis.rollout_correction
    )
    _, plain_grad = loss_and_grad(plain, batch)
    _, tis_grad = loss_and_grad(tis, batch)
    np.testing.assert_allclose(tis_grad, plain_grad * weights, rtol=1e-5, atol=1e-8)


def test_sequence_is_uses_the_product_of_the_sequence_ratios():
    log_ratios = [[0.2, 0.3, 0.1, 0.0], [1.0, 0.5, -0.2, 0.9]]
    old, sampler, mask = injected(log_ratios, [[1, 1, 1, 0], [1, 1, 0, 1]])
    weights, _, sums = correct_rollout(
        old,
        sampler,
        mask,
        RolloutCorrectionSettings(rollout_is="sequence", rollout_is_threshold=2.0),
    )
    want = np.array([[math.exp(0.6)] * 3 + [0.0], [2.0, 2.0, 0.0, 2.0]])
    np.testing.assert_allclose(weights, want, rtol=1e-6)
    assert float(sums["rollout_is_high_sequences"]) == 1


def test_masked_is_zeroes_weights_outside_the_bounds_but_keeps_the_tokens():
    old, sampler, mask = injected([[0.0, 1.0, -1.0, 0.3]])
    settings = RolloutCorrectionSettings(rollout_is="token", rollout_is_threshold="0.5_2.0")
    weights, new_mask, sums = correct_rollout(old, sampler, mask, settings)
    np.testing.assert_allclose(weights, [[1.0, 0.0, 0.0, math.exp(0.3)]], rtol=1e-6)
    assert np.array_equal(new_mask, mask)  # verl's IcePop zeroes weights, not the mask
    assert float(sums["rollout_is_masked_tokens"]) == 2


@pytest.mark.parametrize(
    "option, threshold, kept",
    [
        # token_k1: keep log(1/2) <= -log rho <= log 2.
        ("token_k1", "2.0", [[1, 1, 0, 0, 1], [1, 1, 1, 1, 0]]),
        # token_k2: keep (log rho)^2 / 2 <= 0.5, i.e. |log rho| <= 1.
        ("token_k2", "0.5", [[1, 1, 0, 0, 1], [1, 1, 1, 1, 0]]),
        # seq_mean_k1 (geometric mean): keep log 0.6 <= mean(-log rho) <= log 1.6; row 0's
        # mean log rho is 0.06, row 1's 0.6.
        ("seq_mean_k1", "0.6_1.6", [[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]),
        # seq_sum_k1: row 0's sum 0.3 in [log 0.1, log 10]; row 1's 2.4 outside.
        ("seq_sum_k1", "10", [[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]),
        # seq_max_k3: row 0 holds rho = e^1.1 (k3 = 0.90); row 1's largest k3 is e^0.6 - 1.6
        # = 0.22 (its e^5 token is off the mask).
        ("seq_max_k3", "0.45", [[0, 0, 0, 0, 0], [1, 1, 1, 1, 0]]),
    ],
)
def test_rejection_drops_what_verl_drops(option, threshold, kept):
    log_ratios = [[0.0, 0.5, -1.2, 1.1, -0.1], [0.6, 0.6, 0.6, 0.6, 5.0]]
    mask = [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    old, sampler, mask = injected(log_ratios, mask)
    settings = RolloutCorrectionSettings(rollout_rs=option, rollout_rs_threshold=threshold)
    weights, new_mask, sums = correct_rollout(old, sampler, mask, settings)
    assert weights is None
    np.testing.assert_array_equal(new_mask, np.asarray(kept, np.float32) * np.asarray(mask))
    dropped = np.asarray(mask) * (1 - np.asarray(kept))
    assert float(sums["rollout_rs_masked_tokens"]) == dropped.sum()
    assert float(sums["rollout_rs_masked_sequences"]) == (dropped.sum(axis=1) > 0).sum()


def test_rejected_tokens_leave_numerator_and_token_denominators():
    """token_mean divides by the kept tokens; seq_sum_const with sequences='all' still counts a
    fully rejected sequence (verl divides by the mini-batch's rows), 'trained' does not."""
    batch = micro_batch(seed=2, rows=3)
    # Row 2: every token far off (rejected); rows 0-1 close.
    sampler = np.asarray(batch["old_logprobs"]).copy()
    sampler[2] -= 3.0
    batch["sampler_logprobs"] = jnp.asarray(sampler)
    rejection = RolloutCorrectionSettings(rollout_rs="seq_mean_k1", rollout_rs_threshold="2.0")
    kept = np.asarray(batch["loss_mask"]).copy()
    kept[2] = 0.0
    for mode, sequences in [
        ("token_mean", "all"),
        ("seq_sum_const", "all"),
        ("seq_sum_const", "trained"),
    ]:
        total, denominator, _ = PolicyGradientLoss(
            LossSettings(
                mode=mode,
                max_response_len=MAX_LEN,
                sequences=sequences,
                rollout_correction=rejection,
            )
        )(batch["logprobs"], batch["logprobs"], batch)
        want_total, want_denominator = policy_loss(
            batch["logprobs"],
            batch["old_logprobs"],
            batch["advantages"],
            jnp.asarray(kept),
            mode=mode,
            max_response_len=MAX_LEN,
            segment_ids=batch["segment_ids"],
            sequences=sequences,
        )
        np.testing.assert_allclose(total, want_total, rtol=1e-6)
        assert float(denominator) == float(want_denominator)
    assert float(want_denominator) == 2.0  # 'trained': the rejected row is out


def test_packed_rows_give_the_same_correction_as_one_sequence_per_row():
    rng = np.random.default_rng(3)
    old = rng.normal(-1, 0.3, (2, 6)).astype(np.float32)
    sampler = old + rng.normal(0, 0.6, (2, 6)).astype(np.float32)
    mask = np.array([[0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 1]], np.float32)
    packed = {
        name: np.concatenate([a[0], a[1]])[None]
        for name, a in [("o", old), ("s", sampler), ("m", mask)]
    }
    segments = np.array([[1] * 6 + [2] * 6], np.int32)
    for settings in [
        RolloutCorrectionSettings(rollout_is="sequence", rollout_is_threshold=1.5),
        RolloutCorrectionSettings(
            rollout_rs="seq_mean_k3,seq_max_k2,seq_sum_k1", rollout_rs_threshold="0.05,0.3,3"
        ),
    ]:
        rows = correct_rollout(jnp.asarray(old), jnp.asarray(sampler), jnp.asarray(mask), settings)
        one = correct_rollout(
            jnp.asarray(packed["o"]),
            jnp.asarray(packed["s"]),
            jnp.asarray(packed["m"]),
            settings,
            jnp.asarray(segments),
        )
        for a, b in zip(rows[:2], one[:2], strict=True):
            if a is not None:
                np.testing.assert_allclose(
                    np.asarray(a).reshape(-1), np.asarray(b).reshape(-1), rtol=1e-6
                )
        for key in rows[2]:
            np.testing.assert_allclose(rows[2][key], one[2][key], rtol=1e-6)
    want = mismatch_sums(jnp.asarray(old), jnp.asarray(sampler), jnp.asarray(mask))
    got = mismatch_sums(
        jnp.asarray(packed["o"]),
        jnp.asarray(packed["s"]),
        jnp.asarray(packed["m"]),
        jnp.asarray(segments),
    )
    for key in want:
        np.testing.assert_allclose(want[key], got[key], rtol=1e-6)
    assert float(got["mismatch_sequences"]) == 2


def test_mismatch_metrics():
    log_ratios = np.array([[0.1, -0.2, 0.3, 0.0], [0.05, 0.05, -0.4, 9.0]], np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 0]], np.float32)
    old, sampler, mask = injected(log_ratios, mask)
    metrics = summarize(jax.device_get(mismatch_sums(old, sampler, mask)))
    on = log_ratios[np.asarray(mask) > 0].astype(np.float64)
    assert metrics["mismatch_kl_k1"] == pytest.approx(np.mean(-on), abs=1e-7)
    assert metrics["mismatch_kl_k3"] == pytest.approx(np.mean(np.exp(on) - on - 1), rel=1e-5)
    assert metrics["mismatch_chi2_token"] == pytest.approx(np.mean(np.exp(2 * on)) - 1, rel=1e-5)
    sequence = np.exp(2 * np.array([0.2, -0.3])).mean() - 1
    assert metrics["mismatch_chi2_seq"] == pytest.approx(sequence, rel=1e-5)
    # The median of rho is e^0.05, reported rounded toward 1 by at most one 1.31x bin.
    assert math.exp(0.05 / 1.32) <= metrics["sampler_ratio_q50"] <= math.exp(0.05)
    assert metrics["sampler_ratio_q01"] <= math.exp(-0.4 / 1.31 / 1.01)
    # An exact sampler (fp32, same weights): everything is 0 and every quantile exactly 1.
    exact = summarize(jax.device_get(mismatch_sums(old, old, mask)))
    assert exact["mismatch_kl_k1"] == exact["mismatch_kl_k3"] == exact["mismatch_chi2_seq"] == 0.0
    assert all(exact[f"sampler_ratio_q{q}"] == 1.0 for q in ("01", "05", "50", "95", "99"))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"rollout_is": "tokens"}, "rollout_is='tokens'"),
        ({"rollout_is": "token", "rollout_is_threshold": "2_1"}, "lower > upper"),
        ({"rollout_rs": "token_k4", "rollout_rs_threshold": "2"}, "rollout_rs='token_k4'"),
        ({"rollout_rs": "token_k1"}, "rollout_rs_threshold is not"),
        ({"rollout_rs": "seq_max_k2", "rollout_rs_threshold": "0.1_2"}, "one upper bound"),
        ({"rollout_rs": "token_k1,token_k2", "rollout_rs_threshold": "2,3,4"}, "3 thresholds"),
    ],
)
def test_bad_settings_are_refused_with_the_field_to_fix(fields, message):
    with pytest.raises(ValueError, match=message):
        RolloutCorrectionSettings(**fields)


def test_the_trainer_applies_the_correction_exactly_over_micro_batches():
    """Through Trainer: token TIS with a sequence rejection; one micro-batch of 8 rows or two of
    4 give the same gradient and the same step metrics (the correction's sums merge exactly)."""
    from flax import nnx

    from deepswe_jax.model import Qwen3ForCausalLM
    from deepswe_jax.parallel import make_mesh
    from deepswe_jax.rl.batch import assemble_batch
    from deepswe_jax.rl.objectives import LossSettings as Settings
    from deepswe_jax.rl.optimizer import make_optimizer
    from deepswe_jax.rl.train_step import Trainer
    from tests.rl.test_train_step import MODEL, fresh_params, make_trajectories, rl_config

    correction = RolloutCorrectionSettings(
        rollout_is="token", rollout_rs="seq_max_k2", rollout_rs_threshold="1"
    )
    trainer = Trainer(
        Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0)),
        make_optimizer(rl_config()),
        Settings(max_response_len=64, logprob_chunk=16, rollout_correction=correction),
        mesh=make_mesh(devices=jax.devices()[:1]),
    )
    params = jax.device_put(fresh_params(), trainer.param_shardings)
    # Half the rollouts sampled close to the random model's log-probs (~ -4.85), half far off.
    trajectories = [
        dataclasses.replace(t, sampler_logprobs=tuple(-4.85 * m for m in t.loss_mask))
        if i % 2
        else t
        for i, t in enumerate(make_trajectories())
    ]
    results = []
    for rows in (8, 4):
        batch = assemble_batch(trajectories, micro_batch_size=rows).micro_batches
        grads, sums = trainer.accumulate_gradients(params, batch)
        metrics = trainer.loss_fn.summarize(jax.device_get(sums))
        results.append((jax.device_get(grads), float(sums["loss_sum"]), metrics))
    (grads, loss, metrics), (split_grads, split_loss, split_metrics) = results
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), grads, split_grads
    )
    np.testing.assert_allclose(loss, split_loss, rtol=1e-5)
    assert metrics.keys() == split_metrics.keys()
    for key in metrics:
        np.testing.assert_allclose(metrics[key], split_metrics[key], rtol=1e-5, err_msg=key)
    # The far half (sampler log-prob -0.5: weights ~e^-4.4, k2 ~9.5) is rejected.
    assert metrics["rollout_is_min"] < 0.05 and 0.5 < metrics["rollout_is_max"] <= 2.0
    assert metrics["rollout_rs_seq_masked_fraction"] == 0.5
