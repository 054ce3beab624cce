"""Qwen3ForCausalLM numerics: parity with transformers, packing, KV-cache decoding, remat."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from deepswe_jax.model import (
    REMAT_POLICIES,
    Qwen3Config,
    Qwen3ForCausalLM,
    load_hf_checkpoint,
)

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


def torch_logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.float().numpy()


def test_logits_match_transformers(tiny_hf):
    directory, hf_model = tiny_hf
    ids = np.random.default_rng(0).integers(0, 128, (2, 24))
    model = load_hf_checkpoint(directory)
    logits = np.asarray(model(jnp.asarray(ids)))
    assert logits.shape == (2, 24, 128) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, torch_logits(hf_model, ids), atol=1e-4, rtol=0)
    # hidden_states @ unembed_matrix is the same computation the RL loss uses in chunks.
    hidden = model.hidden_states(jnp.asarray(ids))
    np.testing.assert_allclose(hidden @ model.unembed_matrix(), logits, atol=1e-5, rtol=0)


def test_packed_row_equals_separate_sequences(tiny_hf):
    directory, hf_model = tiny_hf
    model = load_hf_checkpoint(directory)
    rng = np.random.default_rng(1)
    first, second = rng.integers(0, 128, (1, 9)), rng.integers(0, 128, (1, 7))
    packed = np.concatenate([first, second], axis=1)
    positions = np.concatenate([np.arange(9), np.arange(7)])[None]
    segments = np.array([[1] * 9 + [2] * 7])
    logits = np.asarray(model(jnp.asarray(packed), jnp.asarray(positions), jnp.asarray(segments)))
    np.testing.assert_allclose(logits[:, :9], torch_logits(hf_model, first), atol=1e-4, rtol=0)
    np.testing.assert_allclose(logits[:, 9:], torch_logits(hf_model, second), atol=1e-4, rtol=0)


@nnx.jit
def decode_step(model, ids, cache, num_tokens):
    return model.decode(ids, cache, num_tokens=num_tokens)


@nnx.jit
def forward(model, ids):
    return model(ids)


@pytest.fixture(scope="module")
def random_model() -> Qwen3ForCausalLM:
    return nnx.jit(lambda: Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0)))()


def test_decode_through_cache_equals_full_forward(random_model):
    """Right-padded prefill of prompts with lengths 3 and 6, then one token per row per step;
    then row 1 is reset and reused for a new sequence while row 0 keeps its own."""
    model = random_model
    rng = np.random.default_rng(3)
    sequences = rng.integers(0, 128, (2, 10))
    prompt_lengths = np.array([3, 6])
    prompts = np.where(np.arange(6) < prompt_lengths[:, None], sequences[:, :6], 0)

    cache = model.init_cache(batch_size=2, max_length=16)
    logits, cache = decode_step(model, jnp.asarray(prompts), cache, jnp.asarray(prompt_lengths))
    got = [[np.asarray(logits[row, :length])] for row, length in enumerate(prompt_lengths)]
    for step in range(4):
        next_ids = sequences[np.arange(2), prompt_lengths + step][:, None]
        logits, cache = decode_step(model, jnp.asarray(next_ids), cache, jnp.array([1, 1]))
        for row in range(2):
            got[row].append(np.asarray(logits[row]))
    np.testing.assert_array_equal(np.asarray(cache.lengths), prompt_lengths + 4)
    full = np.asarray(forward(model, jnp.asarray(sequences)))
    np.testing.assert_allclose(np.concatenate(got[0]), full[0, :7], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.concatenate(got[1]), full[1, :10], atol=1e-5, rtol=0)

    # Row 1 starts a new sequence: its first token goes in while row 0 sits out (num_tokens 0),
    # then both decode together.
    cache = cache.reset_rows(jnp.array([False, True]))
    next_ids = np.array([[0], [sequences[1, 0]]])
    logits, cache = decode_step(model, jnp.asarray(next_ids), cache, jnp.array([0, 1]))
    np.testing.assert_array_equal(np.asarray(cache.lengths), [7, 1])
    np.testing.assert_allclose(logits[1, 0], full[1, 0], atol=1e-5, rtol=0)
    next_ids = np.array([[sequences[0, 7]], [sequences[1, 1]]])
    logits, cache = decode_step(model, jnp.asarray(next_ids), cache, jnp.array([1, 1]))
    np.testing.assert_array_equal(np.asarray(cache.lengths), [8, 2])
    np.testing.assert_allclose(logits[0, 0], full[0, 7], atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits[1, 0], full[1, 1], atol=1e-5, rtol=0)


def test_remat_policies_give_the_same_gradients(random_model):
    ids = jnp.asarray(np.random.default_rng(5).integers(0, 128, (2, 8)))
    graphdef, state = nnx.split(random_model)

    def loss(state, remat):
        model = nnx.merge(graphdef, state)
        model.remat = remat
        return jnp.mean(jax.nn.log_softmax(model(ids))[..., 0])

    @jax.jit
    def all_gradients(state):
        return {remat: jax.grad(loss)(state, remat) for remat in REMAT_POLICIES}

    grads = all_gradients(state)
    for remat in REMAT_POLICIES:
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5),
            grads[remat],
            grads["none"],
        )


def test_unrolled_layer_scans_give_the_same_logits_and_gradients():
    """scan_unroll 2 of 3 layers (a loop with a remainder) and 64 (no loop) against 1."""
    ids = jnp.asarray(np.random.default_rng(6).integers(0, 128, (2, 8)))
    three = dataclasses.replace(TINY, num_hidden_layers=3)
    graphdef, state = nnx.split(Qwen3ForCausalLM(three, rngs=nnx.Rngs(1)))

    def loss(state, unroll):
        model = nnx.merge(graphdef, state)
        model.scan_unroll = unroll
        logits = model(ids)
        return jnp.mean(jax.nn.log_softmax(logits)[..., 0]), logits

    @jax.jit
    def all_gradients(state):
        return {unroll: jax.grad(loss, has_aux=True)(state, unroll) for unroll in (1, 2, 64)}

    results = all_gradients(state)
    for unroll in (2, 64):
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5),
            results[unroll],
            results[1],
        )
    with pytest.raises(ValueError, match="scan_unroll must be >= 1"):
        Qwen3ForCausalLM(three, rngs=nnx.Rngs(0), scan_unroll=0)


def test_layers_are_stacked_and_dtypes_are_separate(random_model):
    graphdef, state = nnx.split(random_model)
    model = nnx.merge(graphdef, state)
    model.dtype = jnp.bfloat16
    assert model.layers.q_proj.shape == (2, 32, 4, 16)
    assert model.layers.o_proj.shape == (2, 4, 16, 32)
    assert model.layers.q_proj.dtype == jnp.float32
    ids = jnp.asarray(np.random.default_rng(6).integers(0, 128, (1, 8)))
    hidden, logits = nnx.jit(lambda m: (m.hidden_states(ids), m(ids)))(model)
    assert hidden.dtype == jnp.bfloat16 and logits.dtype == jnp.float32
    np.testing.assert_allclose(logits, forward(random_model, ids), atol=0.05)


def test_unknown_remat_policy_is_rejected():
    with pytest.raises(ValueError, match="unknown remat policy 'sometimes'.*save_dots"):
        Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0), remat="sometimes")


def test_config_round_trips_through_hf_dict(tiny_hf):
    directory, hf_model = tiny_hf
    config = Qwen3Config.from_json_file(directory / "config.json")
    assert config.head_dim == 16 and config.num_key_value_heads == 2
    assert config.rope_theta == 10_000.0
    assert config.tie_word_embeddings == hf_model.config.tie_word_embeddings
    assert Qwen3Config.from_hf_dict(config.to_hf_dict()) == config
    # transformers<5 layout: rope_theta at top level
    legacy = {k: v for k, v in config.to_hf_dict().items() if k != "rope_parameters"}
    assert Qwen3Config.from_hf_dict(legacy) == config
    assert config.num_parameters == sum(p.numel() for p in hf_model.parameters())


def test_config_rejects_unsupported_options():
    hf = TINY.to_hf_dict()
    with pytest.raises(ValueError, match=r"my/config.json: unsupported.*rope_type='yarn'"):
        Qwen3Config.from_hf_dict(
            {**hf, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, source="my/config.json"
        )
    with pytest.raises(ValueError, match="attention_bias=true"):
        Qwen3Config.from_hf_dict({**hf, "attention_bias": True})
