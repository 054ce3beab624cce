"""model/attention.py: the flash kernel (Pallas, interpret mode on CPU), the sequence-length
path and the XLA path's query blocks equal jax.nn's XLA attention with a dense mask, forward and gradients, packed and unpacked rows,
on one device and sharded over 8."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.attention import (
    MAX_QUERY_BLOCKS,
    causal_attention,
    query_block_attention,
)
from deepswe_jax.parallel import DEFAULT_RULES, make_mesh, use_rules

BATCH, SEQ, HEADS, KV_HEADS, HEAD_DIM = 4, 64, 4, 2, 16


def segment_ids(packed: bool) -> np.ndarray:
    """[4, 64]: packed rows of 2-3 sequences, or one sequence per row, then padding (0)."""
    ids = np.zeros((BATCH, SEQ), np.int32)
    cuts = [(0, 30, 50), (0, 64), (0, 10, 33, 60), (0, 7)] if packed else [(0, 50), (0, 64)] * 2
    for row, bounds in enumerate(cuts):
        for segment, (start, stop) in enumerate(zip(bounds, bounds[1:], strict=False), 1):
            ids[row, start:stop] = segment if packed else 1
    return ids


def qkv(seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(keys[0], (BATCH, SEQ, HEADS, HEAD_DIM))
    k = jax.random.normal(keys[1], (BATCH, SEQ, KV_HEADS, HEAD_DIM))
    v = jax.random.normal(keys[2], (BATCH, SEQ, KV_HEADS, HEAD_DIM))
    weights = jax.random.normal(keys[3], (BATCH, SEQ, HEADS, HEAD_DIM))
    return q, k, v, weights


def dense_attention(q, k, v, ids):
    """The reference: jax.nn's XLA attention with a dense causal + same-segment mask."""
    mask = ids[:, None, :, None] == ids[:, None, None, :]  # [b, 1, s, s]
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation="xla")


def value_and_grads(impl, packed, ids, mesh=None):
    """sum(out * weights) over real tokens, and its gradients w.r.t. q, k, v. `impl` "dense" is
    `dense_attention`; a callable is called as `impl(q, k, v, ids)`."""
    q, k, v, weights = qkv()
    real = jnp.asarray(ids > 0)[:, :, None, None]
    if impl == "dense":
        impl = dense_attention

    def loss(q, k, v):
        if callable(impl):
            out = impl(q, k, v, jnp.asarray(ids))
        else:
            out = causal_attention(q, k, v, jnp.asarray(ids), impl=impl, packed=packed)
        return jnp.sum(jnp.where(real, out * weights, 0.0)), out

    fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))
    if mesh is None:
        (total, out), grads = fn(q, k, v)
    else:
        with jax.set_mesh(mesh), use_rules(DEFAULT_RULES):
            (total, out), grads = fn(q, k, v)
    return float(total), np.where(ids[:, :, None, None] > 0, out, 0.0), jax.device_get(grads)


def assert_same(got, want):
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], atol=2e-5)
    for g, w in zip(got[2], want[2], strict=True):
        np.testing.assert_allclose(g, w, atol=5e-5)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
def test_flash_kernel_matches_xla_with_a_dense_mask(packed):
    ids = segment_ids(packed)
    want = value_and_grads("dense", True, ids)
    assert_same(value_and_grads("pallas", packed, ids), want)
    if not packed:  # sequence lengths instead of a mask: the path cuDNN takes
        assert_same(value_and_grads("xla", False, ids), want)
    else:  # cudnn hands packed rows to the flash kernel
        assert_same(value_and_grads("cudnn", True, ids), want)


def test_flash_kernel_sharded_over_batch_and_heads_equals_one_device():
    ids = segment_ids(packed=True)
    want = value_and_grads("dense", True, ids)
    assert_same(value_and_grads("pallas", True, ids, mesh=make_mesh(2, 2, 2)), want)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "unpacked"])
@pytest.mark.parametrize("block", [16, 24], ids=["4-blocks", "ragged-last-block"])
def test_query_blocks_equal_the_dense_attention(packed, block):
    # The XLA path computes each query block against the keys up to its end only (issue 29's
    # speed-up); on real tokens it must equal the dense mask's attention, forward and gradients.
    ids = segment_ids(packed)

    def blocks(q, k, v, ids):
        return query_block_attention(q, k, v, ids, packed=packed, block=block)

    assert_same(value_and_grads(blocks, packed, ids), value_and_grads("dense", True, ids))


def test_query_blocks_sharded_over_batch_and_heads_equal_the_dense_attention():
    ids = segment_ids(packed=True)

    def blocks(q, k, v, ids):
        return query_block_attention(q, k, v, ids, block=24)

    got = value_and_grads(blocks, True, ids, mesh=make_mesh(2, 2, 2))
    assert_same(got, value_and_grads("dense", True, ids))


def test_long_rows_take_larger_query_blocks_not_more_of_them():
    # A 32K-token prefill must not unroll 256 blocks into every layer: past MAX_QUERY_BLOCKS
    # the blocks grow instead (two matmuls per block).
    q, k, v, _ = qkv()
    jaxpr = jax.make_jaxpr(lambda q, k, v: query_block_attention(q, k, v, None, block=1))(q, k, v)
    matmuls = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(matmuls) == 2 * MAX_QUERY_BLOCKS
    got = query_block_attention(q, k, v, None, block=1)
    want = dense_attention(q, k, v, jnp.ones((BATCH, SEQ), jnp.int32))
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_query_blocks_without_segment_ids_are_causal_over_the_whole_row():
    q, k, v, _ = qkv()
    ids = np.ones((BATCH, SEQ), np.int32)
    got = query_block_attention(q, k, v, None, block=24)
    np.testing.assert_allclose(got, dense_attention(q, k, v, jnp.asarray(ids)), atol=2e-6)


def test_model_with_flash_kernel_matches_xla_logits_and_gradients():
    config = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    )
    ids = segment_ids(packed=True)
    positions = np.zeros_like(ids)
    for row in range(BATCH):
        for segment in np.unique(ids[row]):
            at = ids[row] == segment
            positions[row, at] = np.arange(at.sum())
    tokens = jax.random.randint(jax.random.key(1), (BATCH, SEQ), 0, config.vocab_size)

    def logits_and_grads(impl):
        model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), attention_impl=impl)
        graphdef, params = nnx.split(model)

        def loss(params):
            logits = nnx.merge(graphdef, params)(tokens, positions, ids)
            return jnp.sum(jnp.where(ids[..., None] > 0, jax.nn.log_softmax(logits), 0.0)), logits

        (_, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
        return np.asarray(logits)[ids > 0], jax.device_get(grads)

    want_logits, want_grads = logits_and_grads("xla")
    logits, grads = logits_and_grads("pallas")
    np.testing.assert_allclose(logits, want_logits, atol=1e-4)
    jax.tree.map(
        lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4), grads, want_grads
    )


def test_bad_implementation_and_row_length_are_explained():
    with pytest.raises(ValueError, match="config.attention"):
        causal_attention(*qkv()[:3], None, impl="flash")
    q = jnp.zeros((1, 200, 2, 8))
    with pytest.raises(ValueError, match="multiple of 128"):
        causal_attention(q, q, q, jnp.ones((1, 200), jnp.int32), impl="pallas")


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN attention needs a GPU")
def test_cudnn_with_sequence_lengths_matches_xla_on_gpu():
    ids = segment_ids(packed=False)
    want = value_and_grads("dense", True, ids)
    assert_same(value_and_grads("cudnn", False, ids), want)
