"""Qwen3ForCausalLM.decode on a PagedKVCache (model/kv_cache.py): rows of very different lengths,
whose pages are scattered over the pool and partly shared, give the logits of the dense cache and
of the full forward; a row never writes a page it does not own."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.kv_cache import PAGE

TINY = Qwen3Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rope_theta=10_000.0,
)
MAX_LEN = 12 * PAGE


@pytest.fixture(scope="module")
def random_model() -> Qwen3ForCausalLM:
    return nnx.jit(lambda: Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0)))()


@nnx.jit(static_argnames="each_row")
def decode(model, ids, cache, num_tokens, each_row):
    return model.decode(ids, cache, num_tokens=num_tokens, each_row_reads=each_row)


@nnx.jit
def prefill(model, ids, lengths, cache, rows):
    _, keys, values = model.prefill(ids, lengths)
    return cache.with_prompts(keys, values, rows, lengths)


@pytest.mark.parametrize(
    ("each_row", "attention"),
    [(True, "xla"), (False, "xla"), (False, "pallas")],
    ids=["each row its own", "longest row", "pallas kernel"],
)
def test_paged_rows_of_very_different_lengths_equal_the_dense_cache(
    random_model, each_row, attention
):
    """Four rows of 150, 3, 70 and 40 prompt tokens (the last two share their first two pages:
    the same 35 first tokens), their pages in a shuffled order. Prompts go in by the prefill
    (rows 0, 2) and by decode (rows 1, 3, continuing row 2's shared pages); then decode steps
    with one row paused. Every live row's logits equal the dense cache's and the full
    forward's; pages no row owns stay zero. The Pallas kernel (model/paged_kernel.py, interpret
    mode here) reads the same pages where they lie. A fifth row that takes no token while its table names
    row 0's pages (a request gone, its pages handed on) writes nothing into them."""
    model = random_model
    rng = np.random.default_rng(0)
    sequences = rng.integers(0, TINY.vocab_size, (5, 170))
    sequences[3, :35] = sequences[2, :35]
    full = np.asarray(nnx.jit(lambda m, ids: m(ids))(model, jnp.asarray(sequences)))
    lengths = np.array([150, 3, 70, 40, 40])
    pool = 40
    order = rng.permutation(pool)
    table = np.full((5, MAX_LEN // PAGE), pool, np.int32)
    owned = {0: order[:10], 1: order[10:12], 2: order[12:18], 3: order[18:22]}
    for row, pages in owned.items():
        table[row, : len(pages)] = pages
    table[3, :2] = table[2, :2]  # the shared prompt's two full pages
    table[4, :3] = table[0, :3]
    paged = model.init_paged_cache(5, pool, MAX_LEN, attention=attention)
    paged = dataclasses.replace(paged, table=jnp.asarray(table))
    dense = model.init_cache(batch_size=5, max_length=MAX_LEN)

    ids = np.where(np.arange(160) < lengths[:, None], sequences[:, :160], 0)
    paged = prefill(
        model, jnp.asarray(ids[[0, 2]]), jnp.asarray(lengths[[0, 2]]), paged, jnp.asarray([0, 2])
    )
    dense = prefill(
        model, jnp.asarray(ids[[0, 2]]), jnp.asarray(lengths[[0, 2]]), dense, jnp.asarray([0, 2])
    )
    # Row 3 starts after the shared 32 slots; row 1 from empty: decode writes their prompts.
    paged = dataclasses.replace(paged, lengths=paged.lengths.at[3].set(32).at[4].set(40))
    dense = dense.__class__(dense.keys, dense.values, dense.lengths.at[3].set(32).at[4].set(40))
    dense_keys = np.asarray(dense.keys)
    dense = dense.__class__(
        dense.keys.at[:, 3, :, :, :32].set(dense_keys[:, 2, :, :, :32]),
        dense.values.at[:, 3, :, :32].set(np.asarray(dense.values)[:, 2, :, :32]),
        dense.lengths,
    )
    chunk = np.zeros((5, 8), np.int64)
    chunk[1, :3] = sequences[1, :3]
    chunk[3, :8] = sequences[3, 32:40]
    take = jnp.asarray([0, 3, 0, 8, 0])
    logits_p, paged = decode(model, jnp.asarray(chunk), paged, take, each_row)
    logits_d, dense = decode(model, jnp.asarray(chunk), dense, take, each_row)
    logits_p, logits_d = np.asarray(logits_p), np.asarray(logits_d)
    np.testing.assert_allclose(logits_p[1, :3], full[1, :3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits_p[3, :8], full[3, 32:40], atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits_p[[1, 3]], logits_d[[1, 3]], atol=1e-5, rtol=0)

    for live in ([1, 1, 1, 1, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 0]):
        ids = sequences[np.arange(5), lengths][:, None]
        logits_p, paged = decode(model, jnp.asarray(ids), paged, jnp.asarray(live), each_row)
        logits_d, dense = decode(model, jnp.asarray(ids), dense, jnp.asarray(live), each_row)
        for row in np.flatnonzero(live):
            np.testing.assert_allclose(logits_p[row, 0], full[row, lengths[row]], atol=1e-5, rtol=0)
            np.testing.assert_allclose(logits_p[row, 0], logits_d[row, 0], atol=1e-5, rtol=0)
        lengths = lengths + np.array(live)
    np.testing.assert_array_equal(np.asarray(paged.lengths), [153, 5, 73, 43, 40])
    # Row 3's writes began in its own third page: the pages it shares with row 2 hold row 2's
    # keys (equal to the dense row 2's first 32 slots), and unowned pages are untouched.
    keys = np.asarray(paged.keys)  # [k, L, pages, B, d]
    shared = keys[:, :, table[2, :2]].reshape(2, 2, 32, 16)
    np.testing.assert_array_equal(
        shared, np.asarray(dense.keys)[:, 2, :, :, :32].transpose(1, 0, 3, 2)
    )
    unowned = np.setdiff1d(np.arange(pool), table[table < pool])
    assert not np.any(keys[:, :, unowned]) and not np.any(np.asarray(paged.values)[:, :, unowned])
