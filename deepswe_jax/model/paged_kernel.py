"""A decode step's attention over a ``PagedKVCache`` with one Pallas kernel (Triton on GPU; Pallas
interpret mode on CPU, which is how tests compare it with the XLA gather).

    attended = attend_paged(q, new_k, new_v, cache, layer, num_tokens, rows)   # [b, t, h, d]

Shapes: b = rows, t = new tokens per row, h = query heads, k = kv heads, g = h // k,
d = head_dim, L = layers, P = pages per layer, B = ``PAGE`` slots a page.

The XLA path (cache_attention.py) gathers every row's pages into a dense [b, k, c, d] copy per
layer, c the longest row's read: on a GPU with 64 rows at 32K slots that copy alone is ~5 GB
per layer. The kernel reads each row's own pages where they lie, ``PAGES_PER_BLOCK`` pages at a
time, and keeps only a running softmax (flash-decoding: max, sum and unnormalized output). It
returns those three instead of the normalized output, because a decode step attends to its own
new tokens too, which are not in the cache yet (the layer scan writes them after the last
layer): ``combine_with_new`` merges the cache part with the new tokens' part under one softmax,
as ``attend_cache_and_new`` does in one pass. (jax's own
``jax.experimental.pallas.ops.gpu.paged_attention`` takes the same per-layer page layout but
returns the normalized output only, so it cannot be merged.)

Grid: (row, kv head, block of ``BLOCK_Q`` queries); a kv head's queries are its g query heads x
t tokens, so grouped-query heads share each page they read. Under a mesh the kernel runs per
device through ``jax.shard_map``: kv heads split as the pool is (PAGED_KEYS_LOGICAL_AXES), rows
over the batch axes (the pool is whole on each of them).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from deepswe_jax.model.kv_cache import PAGE, PagedKVCache
from deepswe_jax.parallel.sharding import logical_to_spec

# Pages a kernel iteration reads per row (8 x 16 = 128 slots, the block jax's paged kernel
# reads); queries per program: Triton's dots want at least 16 rows, powers of two.
PAGES_PER_BLOCK = 8
BLOCK_Q = 16
MAX_BLOCK_Q = 64
# jax.nn's mask value for float32 logits: large, finite (no inf - inf).
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)
PAGED_KERNELS: tuple[str, ...] = ("xla", "pallas")


def check_paged_kernel(kernel: str) -> None:
    if kernel not in PAGED_KERNELS:
        raise ValueError(
            f"unknown paged attention {kernel!r}; set config.sampler.paged_attention to one of "
            f"{PAGED_KERNELS} ('pallas' on GPU; 'xla' gathers every row's pages into a copy)"
        )


def _cache_part_kernel(
    table_ref, length_ref, q_ref, k_ref, v_ref, out_ref, peak_ref, total_ref, *, scale: float
):
    """One program: block_q queries of one kv head of one row against the row's first
    length_ref[0] slots. Writes the unnormalized output [block_q, d], the logits' max and the
    sum of exp(logit - max) [block_q] (zeros and MASKED for a row with nothing cached)."""
    block_q, head_dim = q_ref.shape
    slots = PAGES_PER_BLOCK * k_ref.shape[1]
    length = length_ref[0]
    q = q_ref[...]

    def read_block(i, carry):
        out, peak, total = carry
        pages = table_ref[pl.ds(i * PAGES_PER_BLOCK, PAGES_PER_BLOCK)]
        keys = k_ref[pages].reshape(slots, head_dim).astype(q.dtype)
        values = v_ref[pages].reshape(slots, head_dim).astype(q.dtype)
        logits = plgpu.dot(q, keys, trans_b=True).astype(jnp.float32) * scale  # [block_q, slots]
        visible = i * slots + jnp.arange(slots) < length
        logits = jnp.where(visible[None, :], logits, MASKED)
        # A masked slot's weight is 0, but 0 x inf is NaN: whatever a page past the row's
        # length holds (another row's data, stale data) never reaches the output.
        values = jnp.where(visible[:, None], values, 0)
        new_peak = jnp.maximum(peak, logits.max(axis=-1))
        correction = jnp.exp(peak - new_peak)
        weights = jnp.exp(logits - new_peak[:, None])
        total = total * correction + weights.sum(axis=-1)
        out = out * correction[:, None] + plgpu.dot(weights.astype(q.dtype), values).astype(
            jnp.float32
        )
        return out, new_peak, total

    init = (
        jnp.zeros((block_q, head_dim), jnp.float32),
        jnp.full((block_q,), MASKED, jnp.float32),
        jnp.zeros((block_q,), jnp.float32),
    )
    # Every block read holds at least one visible slot, so each block's max is a real logit.
    out, peak, total = jax.lax.fori_loop(0, pl.cdiv(length, slots), read_block, init)
    out_ref[...] = out
    peak_ref[...] = peak
    total_ref[...] = total


def attend_cached_pages(
    q: jax.Array,
    keys: jax.Array,
    values: jax.Array,
    table: jax.Array,
    lengths: jax.Array,
    *,
    interpret: bool,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The kernel over rows' cached slots, one layer's pages.

    Args:
      q: [b, k, n, d] queries per kv head (n = g query heads x t tokens).
      keys, values: [k, pages, B, d] the pool (one layer's pages, or all layers' flattened).
      table: [b, m] int32 page of each row's m-th page (entries past the row's pages must
        still name a page of the pool: they are read and masked).
      lengths: [b] int32 slots to attend to per row (0: none).

    Returns:
      (out [b, k, n, d], peak [b, k, n], total [b, k, n]) float32: unnormalized output, the
      logits' max and sum of exp(logit - peak), for ``combine_with_new``.
    """
    b, kv_heads, n, head_dim = q.shape
    pages = keys.shape[1]
    block_q = min(MAX_BLOCK_Q, max(BLOCK_Q, 1 << (n - 1).bit_length()))
    padded = -(-n // block_q) * block_q
    q = jnp.pad(q, ((0, 0), (0, 0), (0, padded - n), (0, 0)))
    table = jnp.pad(table, ((0, 0), (0, -table.shape[1] % PAGES_PER_BLOCK)))
    columns = table.shape[1]
    kernel = functools.partial(_cache_part_kernel, scale=head_dim**-0.5)
    pool_spec = pl.BlockSpec((None, pages, PAGE, head_dim), lambda r, h, i: (h, 0, 0, 0))
    row_spec = pl.BlockSpec((None, None, block_q), lambda r, h, i: (r, h, i))
    out, peak, total = pl.pallas_call(
        kernel,
        grid=(b, kv_heads, padded // block_q),
        in_specs=[
            pl.BlockSpec((None, columns), lambda r, h, i: (r, 0)),  # table
            pl.BlockSpec((1,), lambda r, h, i: (r,)),  # lengths
            pl.BlockSpec((None, None, block_q, head_dim), lambda r, h, i: (r, h, i, 0)),  # q
            pool_spec,
            pool_spec,
        ],
        out_specs=[
            pl.BlockSpec((None, None, block_q, head_dim), lambda r, h, i: (r, h, i, 0)),
            row_spec,
            row_spec,
        ],
        out_shape=[
            jax.ShapeDtypeStruct((b, kv_heads, padded, head_dim), jnp.float32),
            jax.ShapeDtypeStruct((b, kv_heads, padded), jnp.float32),
            jax.ShapeDtypeStruct((b, kv_heads, padded), jnp.float32),
        ],
        interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
        name="paged_decode_attention",
    )(table, lengths, q, keys, values)
    return out[:, :, :n], peak[:, :, :n], total[:, :, :n]


def combine_with_new(
    cached: tuple[jax.Array, jax.Array, jax.Array],
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
) -> jax.Array:
    """The cache part (``attend_cached_pages``'s three outputs, n = g x t as [b, k, g, t]) and
    each new token's attention to the row's new tokens up to itself, under one softmax.

    q [b, k, g, t, d]; new_k, new_v [b, t, k, d]. -> [b, k, g, t, d] float32."""
    out, peak, total = cached
    d = q.shape[-1]
    t = q.shape[3]
    logits = jnp.einsum("bkgtd,bskd->bkgts", q, new_k, preferred_element_type=jnp.float32)
    logits = jnp.where(jnp.tril(jnp.ones((t, t), bool)), logits * d**-0.5, MASKED)
    new_peak = jnp.maximum(peak, logits.max(-1))  # [b, k, g, t]
    weights = jnp.exp(logits - new_peak[..., None])
    correction = jnp.exp(peak - new_peak)
    numerator = out * correction[..., None] + jnp.einsum(
        "bkgts,bskd->bkgtd", weights.astype(new_v.dtype), new_v, preferred_element_type=jnp.float32
    )
    return numerator / (total * correction + weights.sum(-1))[..., None]


def _attend(q, new_k, new_v, keys, values, table, lengths, *, interpret: bool) -> jax.Array:
    """``attend_paged`` on whole arrays (one device's share of the kv heads)."""
    b, t, h, d = q.shape
    kv_heads = new_k.shape[2]
    g = h // kv_heads
    grouped = q.reshape(b, t, kv_heads, g, d).transpose(0, 2, 3, 1, 4)  # [b, k, g, t, d]
    out, peak, total = attend_cached_pages(
        grouped.reshape(b, kv_heads, g * t, d), keys, values, table, lengths, interpret=interpret
    )
    cached = (
        out.reshape(b, kv_heads, g, t, d),
        peak.reshape(b, kv_heads, g, t),
        total.reshape(b, kv_heads, g, t),
    )
    attended = combine_with_new(cached, grouped, new_k, new_v)
    return attended.transpose(0, 3, 1, 2, 4).reshape(b, t, h, d).astype(q.dtype)


def attend_paged(
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    cache: PagedKVCache,
    layer: jax.Array,
    num_tokens: jax.Array,
    rows: jax.Array | None = None,
) -> jax.Array:
    """``cache_attention.attend_cache`` of a paged cache through the kernel: the new tokens of
    each row (num_tokens [b] real; a row with none reads nothing) against its filled slots in
    layer ``layer`` and themselves. ``rows`` [b]: the cache rows the query rows continue (out of
    range: skipped, their output unspecified). -> [b, t, h, d]."""
    kv_heads, layers, pages = cache.keys.shape[:3]
    batch = cache.table.shape[0]
    valid = num_tokens > 0
    if rows is not None:
        valid &= (rows >= 0) & (rows < batch)
        rows = jnp.clip(rows, 0, batch - 1)
    table = cache.table if rows is None else cache.table[rows]
    lengths = cache.lengths if rows is None else cache.lengths[rows]
    # At most the table's slots: past them the kernel would read beyond the table.
    lengths = jnp.clip(jnp.where(valid, lengths, 0), 0, cache.max_length).astype(jnp.int32)
    # This layer's pages in the flattened [layers x pages] axis; entries past a row's pages
    # (``pages``, out of range) read page 0 of the layer, masked.
    table = jnp.where((table >= 0) & (table < pages), table, 0) + layer * pages
    shape = (kv_heads, layers * pages, PAGE, cache.keys.shape[-1])
    keys, values = cache.keys.reshape(shape), cache.values.reshape(shape)
    call = functools.partial(_attend, interpret=jax.default_backend() == "cpu")
    operands = (q, new_k, new_v, keys, values, table, lengths)
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return call(*operands)
    # Rows split over the batch axes (the pool is whole on each of them), q's heads as the kv
    # heads are: h = k x g heads in kv-head order, so each device's query heads are the groups
    # of its own kv heads. An axis that does not divide its dimension is dropped (replicated).
    mesh_shape = dict(mesh.shape.items())

    def axis(name: str, size: int):
        spec = logical_to_spec(
            (name,), shape=(size,), mesh_shape=mesh_shape, drop_non_dividing=True
        )
        return spec[0] if len(spec) else None

    rows_axis, kv_axis = axis("batch", q.shape[0]), axis("act_kv_heads", kv_heads)
    heads = jax.P(rows_axis, None, kv_axis, None)
    return jax.shard_map(
        call,
        in_specs=(
            heads,
            heads,
            heads,
            jax.P(kv_axis),
            jax.P(kv_axis),
            jax.P(rows_axis),
            jax.P(rows_axis),
        ),
        out_specs=heads,
        check_vma=False,
    )(*operands)
