"""model/paged_kernel.py (Pallas interpret mode) against a float64 NumPy attention: each row
attends to its own cached slots and its new token only, whatever the pool holds elsewhere, even
inf in the slots a row's read passes over (the red-team's case: 0 x inf was NaN)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from deepswe_jax.model.kv_cache import PAGE, PagedKVCache
from deepswe_jax.model.paged_kernel import attend_paged

KV_HEADS, HEADS, HEAD_DIM, LAYERS, POOL = 2, 4, 16, 2, 12


def reference(q, new_k, new_v, keys, values, layer, tables, lengths):
    """[b, 1, h, d]: row b's query heads over its first lengths[b] slots and its new token."""
    out = np.zeros(q.shape)
    for b, (table, length) in enumerate(zip(tables, lengths, strict=True)):
        slots = [(page, i) for page in table for i in range(PAGE)][:length]
        for head in range(HEADS):
            kv = head // (HEADS // KV_HEADS)
            k = [keys[kv, layer, p, i] for p, i in slots] + [new_k[b, 0, kv]]
            v = [values[kv, layer, p, i] for p, i in slots] + [new_v[b, 0, kv]]
            logits = np.array(k, np.float64) @ q[b, 0, head] / np.sqrt(HEAD_DIM)
            weights = np.exp(logits - logits.max())
            out[b, 0, head] = weights @ np.array(v, np.float64) / weights.sum()
    return out


def test_rows_read_only_their_own_slots_even_with_inf_beyond_them():
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((KV_HEADS, LAYERS, POOL, PAGE, HEAD_DIM)).astype(np.float32)
    values = rng.standard_normal((KV_HEADS, LAYERS, POOL, PAGE, HEAD_DIM)).astype(np.float32)
    tables = [[3], [7, 4, 9], []]
    lengths = [5, 40, 0]  # a row ending inside a page, one crossing pages, one with nothing
    # Read but never attended: page 0 (where a row's unused table entries point) and the
    # slots of row 0's page past its length.
    keys[:, :, 0], values[:, :, 0] = np.inf, np.inf
    keys[:, :, 3, 5:], values[:, :, 3, 5:] = np.inf, np.nan
    table = np.full((3, 8), POOL, np.int32)
    for row, pages in enumerate(tables):
        table[row, : len(pages)] = pages
    cache = PagedKVCache(
        jnp.asarray(keys),
        jnp.asarray(values),
        jnp.asarray(table),
        jnp.asarray(lengths, jnp.int32),
        attention="pallas",
    )
    q = rng.standard_normal((3, 1, HEADS, HEAD_DIM)).astype(np.float32)
    new_k = rng.standard_normal((3, 1, KV_HEADS, HEAD_DIM)).astype(np.float32)
    new_v = rng.standard_normal((3, 1, KV_HEADS, HEAD_DIM)).astype(np.float32)
    live = jnp.ones(3, jnp.int32)
    for layer in range(LAYERS):
        got = attend_paged(*map(jnp.asarray, (q, new_k, new_v)), cache, jnp.int32(layer), live)
        want = reference(q, new_k, new_v, keys, values, layer, tables, lengths)
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)

    # Rows given (a prompt continuing cached rows): row 1 twice, an out-of-range row skipped.
    rows = jnp.asarray([1, 5, 1])
    got = attend_paged(*map(jnp.asarray, (q, new_k, new_v)), cache, jnp.int32(1), live, rows=rows)
    want = reference(q, new_k, new_v, keys, values, 1, [tables[1]] * 3, [40, 0, 40])
    np.testing.assert_allclose(np.asarray(got)[[0, 2]], want[[0, 2]], atol=1e-5, rtol=0)
