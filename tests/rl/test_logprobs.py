import jax
import jax.numpy as jnp
import numpy as np
import pytest

from deepswe_jax.rl.logprobs import loss_position_index, scored_logprobs, token_logprobs


def unchunked(hidden, unembed, targets, temperature=1.0):
    """The obvious version: full [batch, seq, vocab] logits."""
    logits = (hidden @ unembed) / temperature
    logp = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    entropy = -(jnp.exp(logp) * logp).sum(-1)
    return chosen, entropy


@pytest.mark.parametrize("chunk_size", [4, 7, 64], ids=["divides", "ragged", "larger_than_seq"])
def test_chunked_equals_unchunked_values_and_gradients(chunk_size):
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.normal(size=(2, 20, 16)), jnp.float32)
    unembed = jnp.asarray(rng.normal(size=(16, 50)) * 0.3, jnp.float32)
    targets = jnp.asarray(rng.integers(0, 50, size=(2, 20)), jnp.int32)
    weights = jnp.asarray(rng.normal(size=(2, 20)), jnp.float32)

    logprobs, entropy = token_logprobs(
        hidden, unembed, targets, chunk_size=chunk_size, temperature=0.7
    )
    want_logprobs, want_entropy = unchunked(hidden, unembed, targets, temperature=0.7)
    np.testing.assert_allclose(logprobs, want_logprobs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(entropy, want_entropy, rtol=1e-5, atol=1e-5)

    def objective(fn):
        def scalar(h, u):
            lp, ent = fn(h, u)
            return (lp * weights).sum() + 0.1 * ent.sum()

        return jax.grad(scalar, argnums=(0, 1))(hidden, unembed)

    got = objective(
        lambda h, u: token_logprobs(h, u, targets, chunk_size=chunk_size, temperature=0.7)
    )
    want = objective(lambda h, u: unchunked(h, u, targets, temperature=0.7))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_logprobs_are_normalized_and_shapes_checked():
    hidden = jnp.ones((1, 3, 4))
    unembed = jnp.zeros((4, 10))
    logprobs, entropy = token_logprobs(hidden, unembed, jnp.zeros((1, 3), jnp.int32), chunk_size=2)
    np.testing.assert_allclose(logprobs, np.log(0.1), rtol=1e-6)
    np.testing.assert_allclose(entropy, np.log(10.0), rtol=1e-6)
    with pytest.raises(ValueError, match="unembed"):
        token_logprobs(hidden, jnp.zeros((5, 10)), jnp.zeros((1, 3), jnp.int32))


def test_chunked_temp_memory_is_a_quarter_of_naive_at_qwen3_vocab():
    """Forward + backward at vocab 151,936 and seq 4096: compile only, never run."""
    hidden = jax.ShapeDtypeStruct((1, 4096, 8), jnp.float32)
    unembed = jax.ShapeDtypeStruct((8, 151_936), jnp.float32)
    targets = jax.ShapeDtypeStruct((1, 4096), jnp.int32)

    def temp_bytes(fn):
        def scalar(h, u, t):
            lp, ent = fn(h, u, t)
            return lp.sum() + ent.sum()

        compiled = (
            jax.jit(jax.grad(scalar, argnums=(0, 1))).lower(hidden, unembed, targets).compile()
        )
        return compiled.memory_analysis().temp_size_in_bytes

    chunked = temp_bytes(lambda h, u, t: token_logprobs(h, u, t, chunk_size=512))
    naive = temp_bytes(unchunked)
    full_logits = 4096 * 151_936 * 4
    assert naive >= full_logits
    assert chunked <= naive / 4, (chunked, naive)


def test_loss_position_index_packs_each_rows_loss_positions_into_a_bucketed_capacity():
    mask = np.zeros((3, 16), np.float32)
    mask[0, [2, 3, 9]] = 1
    mask[1, 5:10] = 1  # the fullest row: 5 tokens -> capacity 8 of 16 with 4 buckets
    index = loss_position_index(mask, buckets=4)
    np.testing.assert_array_equal(
        index,
        [[2, 3, 9, 16, 16, 16, 16, 16], [5, 6, 7, 8, 9, 16, 16, 16], [16] * 8],
    )
    assert index.dtype == np.int32
    assert loss_position_index(mask, buckets=1) is None  # off
    assert loss_position_index(mask, buckets=2).shape == (3, 8)  # half of 16
    assert loss_position_index(mask, buckets=16).shape == (3, 5)
    mask[2, :13] = 1
    assert loss_position_index(mask, buckets=4) is None  # 13 tokens need the whole row
    assert loss_position_index(np.zeros((2, 16)), buckets=4).shape == (2, 4)


@pytest.mark.parametrize("chunk_size", [3, 64], ids=["chunked", "one_chunk"])
def test_scoring_loss_positions_only_equals_scoring_all_of_them(chunk_size):
    """Values and gradients at the loss positions are those of every-position scoring; the
    others are 0 and add nothing to the gradient; the head's matmul covers the capacity only."""
    rng = np.random.default_rng(1)
    hidden = jnp.asarray(rng.normal(size=(2, 20, 16)), jnp.float32)
    unembed = jnp.asarray(rng.normal(size=(16, 50)) * 0.3, jnp.float32)
    targets = jnp.asarray(rng.integers(0, 50, size=(2, 20)), jnp.int32)
    mask = (rng.random((2, 20)) < 0.3).astype(np.float32)
    mask[0, -1] = 1  # the last position is a loss position too (padding reads it)
    weights = jnp.asarray(rng.normal(size=(2, 20)) * mask, jnp.float32)
    index = loss_position_index(mask, buckets=4)
    assert index is not None and index.shape[1] < 20

    def objective(score):
        def scalar(h, u):
            lp, ent = score(h, u)
            return (lp * weights).sum() + 0.1 * (ent * mask).sum(), (lp, ent)

        return jax.grad(scalar, argnums=(0, 1), has_aux=True)(hidden, unembed)

    def some(h, u):
        return scored_logprobs(h, u, targets, jnp.asarray(index), chunk_size=chunk_size)

    def every(h, u):
        return token_logprobs(h, u, targets, chunk_size=chunk_size)

    (got_grads, (lp, ent)), (want_grads, (want_lp, want_ent)) = objective(some), objective(every)
    loss = mask > 0
    np.testing.assert_allclose(lp[loss], want_lp[loss], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ent[loss], want_ent[loss], rtol=1e-5, atol=1e-6)
    assert not np.asarray(lp)[~loss].any() and not np.asarray(ent)[~loss].any()
    for g, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert not np.asarray(got_grads[0])[~loss].any()  # no gradient into unscored positions

    capacity = index.shape[1]
    head_shapes = [
        eqn.outvars[0].aval.shape
        for eqn in jax.make_jaxpr(some)(hidden, unembed).jaxpr.eqns
        if eqn.primitive.name == "dot_general"
    ]
    if chunk_size >= capacity:
        assert head_shapes == [(2, capacity, 50)]
