"""Qwen3ForCausalLM.decode: multi-token chunks on a filled cache, and a donated cache updated in
place (no full copy of the keys/values per step)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM

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
