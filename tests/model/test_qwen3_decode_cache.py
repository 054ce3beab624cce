"""Qwen3ForCausalLM.decode: multi-token chunks on a filled cache, reads bounded by the longest live
row (model/cache_attention.py), and a donated cache updated in place (no full copy of the keys/values per
step)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, cache_attention
from deepswe_jax.model.qwen3 import unstack_layers

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


@pytest.fixture(scope="module")
def random_model() -> Qwen3ForCausalLM:
    return nnx.jit(lambda: Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0)))()


@nnx.jit
def decode_step(model, ids, cache, num_tokens):
    return model.decode(ids, cache, num_tokens=num_tokens)


def test_chunks_on_a_filled_cache_equal_the_full_forward(random_model):
    """Rows at different lengths take right-padded chunks of 4 tokens (3 and 2 real), twice:
    each token sees its row's cached slots and the chunk's earlier tokens, never the padding."""
    model = random_model
    sequences = np.random.default_rng(5).integers(0, 128, (2, 12))
    full = np.asarray(nnx.jit(lambda m, ids: m(ids))(model, jnp.asarray(sequences)))
    cache = model.init_cache(batch_size=2, max_length=16)
    prompt_lengths = np.array([5, 2])
    prompts = np.where(np.arange(5) < prompt_lengths[:, None], sequences[:, :5], 0)
    _, cache = decode_step(model, jnp.asarray(prompts), cache, jnp.asarray(prompt_lengths))

    chunk_lengths = np.array([3, 2])
    for _ in range(2):
        starts = np.asarray(cache.lengths)
        chunk = np.zeros((2, 4), np.int64)
        for row in range(2):
            real = sequences[row, starts[row] : starts[row] + chunk_lengths[row]]
            chunk[row, : chunk_lengths[row]] = real
        logits, cache = decode_step(model, jnp.asarray(chunk), cache, jnp.asarray(chunk_lengths))
        for row in range(2):
            real = slice(starts[row], starts[row] + chunk_lengths[row])
            np.testing.assert_allclose(
                logits[row, : chunk_lengths[row]], full[row, real], atol=1e-5, rtol=0
            )
    np.testing.assert_array_equal(np.asarray(cache.lengths), prompt_lengths + 2 * chunk_lengths)


def test_chunks_into_a_subset_of_rows_equal_the_full_forward(random_model):
    """`rows` sends 2 input rows to cache rows 2 and 0 of 3 (a prompt extending a cached
    prefix); `logits_at` keeps each row's last real token; row 1 is left untouched."""
    model = random_model
    sequences = np.random.default_rng(6).integers(0, 128, (3, 12))
    full = np.asarray(nnx.jit(lambda m, ids: m(ids))(model, jnp.asarray(sequences)))
    cache = model.init_cache(batch_size=3, max_length=16)
    _, cache = decode_step(model, jnp.asarray(sequences[:, :6]), cache, jnp.full(3, 6))
    rows, chunk_lengths = np.array([2, 0]), np.array([5, 3])
    chunk = np.zeros((2, 5), np.int64)
    chunk[0], chunk[1, :3] = sequences[2, 6:11], sequences[0, 6:9]
    logits, cache = nnx.jit(
        lambda m, ids, c: m.decode(
            ids, c, num_tokens=jnp.asarray(chunk_lengths), rows=jnp.asarray(rows),
            logits_at=jnp.asarray(chunk_lengths - 1),
        )
    )(model, jnp.asarray(chunk), cache)  # fmt: skip
    assert logits.shape == (2, 1, 128)
    np.testing.assert_allclose(logits[0, 0], full[2, 10], atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits[1, 0], full[0, 8], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(np.asarray(cache.lengths), [9, 6, 11])


def test_read_lengths_step_by_at_most_a_quarter_up_to_the_cache_length():
    assert cache_attention.read_lengths(80) == (32, 48, 64, 80)
    reads = cache_attention.read_lengths(288)
    assert reads[:9] == (32, 48, 64, 80, 96, 112, 128, 160, 192) and reads[-1] == 288
    steps = zip(reads[:-1], reads[1:], strict=True)
    assert all(longer <= shorter * 1.5 for shorter, longer in steps)
    assert cache_attention.read_lengths(16) == (16,)


@pytest.mark.parametrize(
    "each_row, read_bytes, row_groups",
    [
        (False, cache_attention.CPU_READ_BYTES, 8),
        (False, 1, 8),
        (True, cache_attention.CPU_READ_BYTES, 8),
        (True, cache_attention.CPU_READ_BYTES, 2),
        (True, 2 * 48 * 272, 2),
        (True, 1, 1),
    ],
    ids=[
        "longest row, all rows at once",
        "longest row, row by row",
        "each row its own",
        "each row, in 2 groups by length",
        "each row, 2 groups: the short one together, the long one row by row",
        "each row, 1 group read row by row",
    ],
)
def test_bounded_reads_equal_the_full_forward(
    random_model, monkeypatch, each_row, read_bytes, row_groups
):
    """Steps read only the first R of 80 slots, R in (32, 48, 64, 80). Batch-wide, R is the
    shortest holding every row with real tokens: while the longest row (60 slots) pauses
    (num_tokens 0) the others read 48 slots, then 64 once a row passes 48 (a read one slot too
    short would hide a key), read whole or a row at a time (as on a CPU for large caches). Each
    row its own (`attend_each_row_cache`, the CPU default): row 1 (5 slots) reads 32, row 0 48
    then 64 (it passes 48), the paused row nothing; in groups of rows sorted by length, a group
    reads for its longest row (in 2 groups, row 1 reads with row 2 and row 0 with row 3, or with
    the paused row, which reads nothing); a group whose rows do not fit CPU_READ_BYTES together
    reads row by row (at 272 bytes a slot and 2 rows a group, 2 * 48 * 272 bytes read groups up
    to 48 slots together). Every live row's logits equal the full forward's, and the paused row
    resumes unharmed."""
    monkeypatch.setattr(cache_attention, "CPU_READ_BYTES", read_bytes)
    monkeypatch.setattr(cache_attention, "ROW_GROUPS", row_groups)
    step = nnx.jit(  # traced afresh
        lambda m, ids, c, n: m.decode(ids, c, num_tokens=n, each_row_reads=each_row)
    )
    model = random_model
    sequences = np.random.default_rng(7).integers(0, 128, (4, 72))
    full = np.asarray(nnx.jit(lambda m, ids: m(ids))(model, jnp.asarray(sequences)))
    lengths = np.array([48, 5, 33, 60])
    prompts = np.where(np.arange(60) < lengths[:, None], sequences[:, :60], 0)
    cache = model.init_cache(batch_size=4, max_length=80)
    _, cache = step(model, jnp.asarray(prompts), cache, jnp.asarray(lengths))
    for live in ([1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]):
        ids = sequences[np.arange(4), lengths][:, None]
        logits, cache = step(model, jnp.asarray(ids), cache, jnp.asarray(live))
        for row in np.flatnonzero(live):
            np.testing.assert_allclose(logits[row, 0], full[row, lengths[row]], atol=1e-5, rtol=0)
        lengths = lengths + np.array(live)
    np.testing.assert_array_equal(np.asarray(cache.lengths), [51, 8, 36, 61])


def test_init_cache_outside_jit_can_be_donated(random_model):
    cache = random_model.init_cache(batch_size=2, max_length=8)
    assert cache.keys.unsafe_buffer_pointer() != cache.values.unsafe_buffer_pointer()
    step = nnx.jit(lambda m, ids, c: m.decode(ids, c), donate_argnums=2)
    _, new_cache = step(random_model, jnp.ones((2, 1), jnp.int32), cache)
    assert cache.keys.is_deleted() and cache.values.is_deleted()
    np.testing.assert_array_equal(np.asarray(new_cache.lengths), [1, 1])


def test_decode_step_updates_a_donated_cache_in_place():
    """The compiled one-token step writes its outputs into the donated keys/values and needs
    scratch memory far below the cache size (per-layer working sets, not a rewritten cache)."""
    config = dataclasses.replace(TINY, num_hidden_layers=8)
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    def step(state, cache, ids):
        return nnx.merge(graphdef, state).decode(ids, cache)

    cache = jax.eval_shape(lambda: model.init_cache(batch_size=4, max_length=512))
    ids = jax.ShapeDtypeStruct((4, 1), jnp.int32)
    compiled = jax.jit(step, donate_argnums=1).lower(state, cache, ids).compile()
    memory = compiled.memory_analysis()
    cache_bytes = cache.keys.size * cache.keys.dtype.itemsize * 2
    assert memory.alias_size_in_bytes >= cache_bytes
    assert memory.temp_size_in_bytes < cache_bytes / 4


def test_per_layer_weights_decode_as_the_stacked_ones_with_the_cache_in_place():
    """`decode(layer_weights=)` (the CPU sampler's layout: each layer's weights arrays of their
    own, picked by a switch on the layer) gives the stacked scan's logits, for a step of every row
    and for prompts continuing a subset of rows (the extend), and its compiled step still writes
    the donated cache in place. Three layers, so a switch picking the wrong layer would show."""
    config = dataclasses.replace(TINY, num_hidden_layers=3)
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(3))
    graphdef, state = nnx.split(model)
    layer_weights = unstack_layers(model.layers.stacked_params())

    def step(state, layer_weights, cache, ids, num_tokens, rows=None, logits_at=None):
        return nnx.merge(graphdef, state).decode(
            ids, cache, num_tokens=num_tokens, rows=rows, logits_at=logits_at,
            layer_weights=layer_weights,
        )  # fmt: skip

    step = jax.jit(step)
    sequences = np.random.default_rng(8).integers(0, 128, (3, 20))
    full = np.asarray(nnx.jit(lambda m, ids: m(ids))(model, jnp.asarray(sequences)))
    lengths = np.array([9, 4, 12])
    prompts = jnp.asarray(np.where(np.arange(12) < lengths[:, None], sequences[:, :12], 0))
    results = {}
    for name, weights in (("stacked", None), ("per layer", layer_weights)):
        cache = model.init_cache(batch_size=3, max_length=32)
        _, cache = step(state, weights, cache, prompts, jnp.asarray(lengths))
        ids = jnp.asarray(sequences[np.arange(3), lengths][:, None])
        decoded, cache = step(state, weights, cache, ids, jnp.ones(3, jnp.int32))
        # rows 2 and 0 (at 13 and 10 slots) continue 4 and 2 tokens
        suffix = jnp.asarray(np.stack([sequences[2, 13:17], sequences[0, [10, 11, 0, 0]]]))
        extended, cache = step(
            state, weights, cache, suffix, jnp.array([4, 2]), jnp.array([2, 0]), jnp.array([3, 1])
        )
        results[name] = (np.asarray(decoded[:, 0]), np.asarray(extended[:, 0]))
    for decoded, extended in results.values():
        np.testing.assert_allclose(decoded, full[np.arange(3), lengths], atol=1e-5, rtol=0)
        np.testing.assert_allclose(extended, full[[2, 0], [16, 11]], atol=1e-5, rtol=0)
    for stacked, per_layer in zip(results["stacked"], results["per layer"], strict=True):
        np.testing.assert_allclose(per_layer, stacked, atol=1e-6, rtol=0)

    cache = jax.eval_shape(lambda: model.init_cache(batch_size=4, max_length=512))
    ids = jax.ShapeDtypeStruct((4, 1), jnp.int32)
    num_tokens = jax.ShapeDtypeStruct((4,), jnp.int32)
    compiled = (
        jax.jit(step.__wrapped__, donate_argnums=2)
        .lower(state, layer_weights, cache, ids, num_tokens)
        .compile()
    )
    memory = compiled.memory_analysis()
    cache_bytes = cache.keys.size * cache.keys.dtype.itemsize * 2
    assert memory.alias_size_in_bytes >= cache_bytes
    assert memory.temp_size_in_bytes < cache_bytes / 4
