"""Attention of a decode step's new tokens over a KV cache (kv_cache.py, dense or paged).

Shapes: b = batch, t = new tokens per row, h = query heads, k = kv heads, g = h // k,
d = head_dim, c = cache slots read.

A step reads, per layer, only the first R slots of a row, R one of the static
``read_lengths(C)`` (all multiples of ``kv_cache.PAGE``), so its attention costs what the live
rows hold rather than the whole cache:

  * ``attend_each_row_cache`` (the CPU default): about every row its own R: the rows sorted by
    length, in groups of a few neighbours, each group the shortest R holding its longest row
    (rows that take no token read nothing). A decode step at agent length is bound by these
    reads, and the rows' lengths differ by thousands of slots (episodes at different turns);
  * ``attend_layer_cache``: one R for the whole batch, the shortest holding every row with real
    tokens (one ``lax.switch`` branch per R), the rows read together (a few at a time on CPU);
    with ``rows``, the given rows one by one (a prompt extending a cached prefix).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from deepswe_jax.model.kv_cache import Cache, KVCache
from deepswe_jax.model.paged_kernel import attend_paged

# XLA:CPU gives a library matmul (YNNPACK) a materialized copy of any sliced operand, so a
# layer's cache slots are copied before they are read. Reading a few rows at a time keeps that
# copy in the CPU's caches (about 2x faster at 64 rows x 288 slots of the 100M model).
CPU_READ_BYTES = 4 << 20
# attend_each_row_cache's groups of rows of similar lengths (row_group_size).
ROW_GROUPS = 8
ROWS_PER_GROUP = 8


def read_lengths(max_length: int, shortest: int = 32) -> tuple[int, ...]:
    """The static cache-read lengths a decode step picks from: 32, 48, 64, 80, 96, 112, 128, 160,
    192, ... (four per doubling from 64 on, so a read passes the longest row by at most a
    quarter) below ``max_length``, and ``max_length`` itself."""
    lengths, size = {max_length}, shortest
    while size < max_length:
        lengths.add(size)
        size += max(shortest // 2, 1 << (size.bit_length() - 3))
    return tuple(sorted(lengths))


def attend_cache(
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    cache: Cache,
    layer: jax.Array,
    num_tokens: jax.Array,
    rows: jax.Array | None = None,
    each_row_reads: bool | None = None,
) -> jax.Array:
    """A decode step's attention for one layer: the new tokens of each row (num_tokens [b] of
    them real; a row with none reads nothing it needs) against its filled cache slots and
    themselves, reading as the module docstring says. ``each_row_reads`` default: on CPU.
    ``rows``: see ``attend_layer_cache`` (always read one by one). -> [b, t, h, d]."""
    if cache.attention == "pallas":
        return attend_paged(q, new_k, new_v, cache, layer, num_tokens, rows)
    reads = read_lengths(cache.max_length)
    if each_row_reads is None:
        each_row_reads = jax.default_backend() == "cpu"
    if each_row_reads and rows is None:
        return attend_each_row_cache(q, new_k, new_v, cache, layer, reads, num_tokens > 0)
    lengths = cache.lengths if rows is None else cache.lengths[rows]
    longest = jnp.max(jnp.where(num_tokens > 0, lengths, 0))
    branches = [
        functools.partial(attend_layer_cache, cache=cache, layer=layer, read_length=n, rows=rows)
        for n in reads
    ]
    return jax.lax.switch(_read_index(reads, longest), branches, q, new_k, new_v)


def attend_cache_and_new(
    q: jax.Array,
    cached_k: jax.Array,
    cached_v: jax.Array,
    cached_lengths: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    keys_by_slot: bool = False,
) -> jax.Array:
    """Grouped-query attention of t new tokens to a row's filled cache slots and to themselves.

    New token i of row b sees cache slots 0 .. cached_lengths[b] - 1 and new tokens 0 .. i. Both
    parts share one softmax (float32 logits, shared max) without concatenating the cache with the
    new block. The cache is read in its stored layouts (``KVCache``), never transposed.

    Args:
      q: [b, t, h, d] queries of the new tokens.
      cached_k: [b, k, d, c] ([b, k, c, d] with ``keys_by_slot``: a paged read), cached_v:
        [b, k, c, d] the cache (slots past cached_lengths are ignored).
      cached_lengths: [b] int, filled cache slots per row.
      new_k, new_v: [b, t, k, d] keys/values of the new tokens.

    Returns:
      [b, t, h, d] in the dtype of q.
    """
    b, t, h, d = q.shape
    kv_heads, c = cached_v.shape[1], cached_v.shape[2]
    q = q.reshape(b, t, kv_heads, h // kv_heads, d).transpose(0, 2, 3, 1, 4)  # [b, k, g, t, d]
    hidden = jnp.finfo(jnp.float32).min
    cached_visible = jnp.arange(c) < cached_lengths[:, None]  # [b, c]
    new_visible = jnp.tril(jnp.ones((t, t), bool))  # [t, s]
    keys = "bkcd" if keys_by_slot else "bkdc"
    cached_logits = jnp.einsum(
        f"bkgtd,{keys}->bkgtc", q, cached_k, preferred_element_type=jnp.float32
    )
    cached_logits = jnp.where(cached_visible[:, None, None, None], cached_logits * d**-0.5, hidden)
    new_logits = jnp.einsum("bkgtd,bskd->bkgts", q, new_k, preferred_element_type=jnp.float32)
    new_logits = jnp.where(new_visible, new_logits * d**-0.5, hidden)
    peak = jnp.maximum(cached_logits.max(-1, keepdims=True), new_logits.max(-1, keepdims=True))
    cached_weights = jnp.exp(cached_logits - peak)  # [b, k, g, t, c]
    new_weights = jnp.exp(new_logits - peak)  # [b, k, g, t, s]
    denominator = cached_weights.sum(-1) + new_weights.sum(-1)  # [b, k, g, t]
    value_dtype = cached_v.dtype
    attended = jnp.einsum(
        "bkgtc,bkcd->bkgtd",
        cached_weights.astype(value_dtype),
        cached_v,
        preferred_element_type=jnp.float32,
    )
    attended += jnp.einsum(
        "bkgts,bskd->bkgtd",
        new_weights.astype(value_dtype),
        new_v,
        preferred_element_type=jnp.float32,
    )
    attended = attended / denominator[..., None]  # [b, k, g, t, d]
    return attended.transpose(0, 3, 1, 2, 4).reshape(b, t, h, d).astype(q.dtype)


def attend_layer_cache(
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    cache: Cache,
    layer: jax.Array,
    read_length: int,
    rows: jax.Array | None = None,
) -> jax.Array:
    """``attend_cache_and_new`` against the first ``read_length`` slots of one cache layer.

    q [b, t, h, d] and new_k, new_v [b, t, k, d] in the compute dtype; layer: int scalar; rows
    must hold at most ``read_length`` filled slots. ``rows`` [b] int: the cache rows the b query
    rows continue (gathered; default cache rows 0 .. b - 1, sliced). On CPU the rows are read a
    few at a time (``CPU_READ_BYTES``). -> [b, t, h, d].
    """
    if rows is not None:
        return _attend_gathered_rows(q, new_k, new_v, cache, layer, read_length, rows)
    batch, kv_heads, head_dim = q.shape[0], new_k.shape[2], new_k.shape[3]
    rows = batch
    if jax.default_backend() == "cpu":
        row_bytes = 2 * kv_heads * read_length * head_dim * cache.values.dtype.itemsize
        rows = max(1, min(batch, CPU_READ_BYTES // row_bytes))
        while batch % rows:
            rows -= 1

    def attend_rows(first_row, q, new_k, new_v, lengths):
        keys, values = cache.read_rows(layer, first_row, q.shape[0], read_length)
        return attend_cache_and_new(
            q,
            keys.astype(q.dtype),
            values.astype(q.dtype),
            lengths,
            new_k,
            new_v,
            cache.keys_by_slot,
        )

    if rows == batch:
        return attend_rows(0, q, new_k, new_v, cache.lengths)
    groups = [x.reshape(batch // rows, rows, *x.shape[1:]) for x in (q, new_k, new_v)]
    attended = jax.lax.map(
        lambda group: attend_rows(*group),
        (jnp.arange(0, batch, rows), *groups, cache.lengths.reshape(batch // rows, rows)),
    )
    return attended.reshape(q.shape)


def _attend_gathered_rows(
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    cache: Cache,
    layer: jax.Array,
    read_length: int,
    rows: jax.Array,
) -> jax.Array:
    """``attend_layer_cache`` for query rows continuing cache rows ``rows`` [b], one row at a time
    (a prompt's many new tokens make [t, read_length] logits per head). -> [b, t, h, d]."""
    attend_row = functools.partial(_attend_row, cache, layer, read_length)
    return jax.lax.map(lambda inputs: attend_row(*inputs), (rows, q, new_k, new_v))


def _attend_row(
    cache: Cache,
    layer: jax.Array,
    read_length: int,
    row: jax.Array,
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
) -> jax.Array:
    """``attend_cache_and_new`` of one row's new tokens (q [t, h, d], new_k and new_v [t, k, d])
    against the first ``read_length`` slots of cache row ``row`` in layer ``layer``."""
    keys, values = cache.read_rows(layer, row, 1, read_length)
    return attend_cache_and_new(
        q[None],
        keys.astype(q.dtype),
        values.astype(q.dtype),
        cache.lengths[row][None],
        new_k[None],
        new_v[None],
        cache.keys_by_slot,
    )[0]


def attend_each_row_cache(
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
    cache: Cache,
    layer: jax.Array,
    reads: tuple[int, ...],
    live: jax.Array,
) -> jax.Array:
    """``attend_cache_and_new`` of every cache row against its own filled slots only; a row that
    is not ``live`` [b] bool reads nothing (its output is zeros).

    In a dense cache the rows are sorted by filled slots and cut into groups of
    ``row_group_size(b)`` neighbours in that order; a device loop runs the groups one after
    another. A group whose longest row is short enough that several of its rows fit
    ``CPU_READ_BYTES`` reads them together, as far as that row (the shortest of ``reads``
    holding it, a ``lax.switch``); a longer one reads row by row, each row its own length. So
    a step reads about what the live rows hold, in a few device-loop iterations per layer where
    rows are short: each iteration costs tens of microseconds of XLA:CPU's own work, which at 64
    short rows was two thirds of the attention's time, while long rows gain nothing from
    sharing a read but its waste.
    -> [b, t, h, d]."""
    batch = q.shape[0]
    # A paged cache's rows are gathered page by page: reading several at once gained nothing
    # (measured slower, bench/decode_reads.py), so they keep one row an iteration.
    size = row_group_size(batch) if isinstance(cache, KVCache) else 1
    lengths = jnp.where(live, cache.lengths, -1)  # -1: reads nothing
    nothing = lambda rows, q, new_k, new_v: jnp.zeros_like(q)  # noqa: E731
    row_branches = [functools.partial(_attend_row, cache, layer, n) for n in reads] + [nothing]

    def row_by_row(rows, q, new_k, new_v):
        def attend_row(inputs):
            row = inputs[0]
            read = jnp.where(lengths[row] < 0, len(reads), _read_index(reads, lengths[row]))
            return jax.lax.switch(read, row_branches, *inputs)

        return jax.lax.map(attend_row, (rows, q, new_k, new_v))

    if size == 1:
        return row_by_row(jnp.arange(batch), q, new_k, new_v)
    # The reads at which a group's rows are read several at a time.
    together = tuple(n for n in reads if _rows_per_read(q, new_k, cache, n, size) > 1)
    group_branches = [functools.partial(_attend_group, cache, layer, n) for n in together]
    group_branches += [nothing, row_by_row]

    def attend_group(rows):
        longest = jnp.max(lengths[rows])
        # together's reads, then nothing (no row of the group takes a token), then row by row
        read = jnp.where(longest < 0, len(together), len(together) + 1)
        if together:
            short = (longest >= 0) & (longest <= together[-1])
            read = jnp.where(short, _read_index(together, longest), read)
        return jax.lax.switch(read, group_branches, rows, q[rows], new_k[rows], new_v[rows])

    order = jnp.argsort(lengths)  # rows that read nothing first
    attended = jax.lax.map(attend_group, order.reshape(batch // size, size))
    return jnp.zeros_like(q).at[order].set(attended.reshape(q.shape))


def _read_index(reads: tuple[int, ...], length: jax.Array) -> jax.Array:
    """Index of the shortest of ``reads`` holding ``length`` filled slots."""
    return jnp.searchsorted(jnp.asarray(reads), length)


def row_group_size(batch: int) -> int:
    """Rows per group of ``attend_each_row_cache``: at least ``ROW_GROUPS`` groups (rows of very
    different lengths share a group's read less often), at most ``ROWS_PER_GROUP`` rows each;
    a divisor of ``batch``."""
    size = max(1, min(ROWS_PER_GROUP, batch // ROW_GROUPS))
    while batch % size:
        size -= 1
    return size


def _rows_per_read(
    q: jax.Array, new_k: jax.Array, cache: Cache, read_length: int, count: int
) -> int:
    """How many of ``count`` rows ``_attend_group`` reads at a time at ``read_length`` slots: the
    most, dividing count, whose keys, values and logits fit ``CPU_READ_BYTES``."""
    _, t, heads, _ = q.shape
    kv_heads, head_dim = new_k.shape[2], new_k.shape[3]
    itemsize = cache.values.dtype.itemsize
    row_bytes = read_length * (2 * kv_heads * head_dim * itemsize + heads * t * 4)
    chunk = count
    while chunk > 1 and (count % chunk or chunk * row_bytes > CPU_READ_BYTES):
        chunk -= 1
    return chunk


def _attend_group(
    cache: Cache,
    layer: jax.Array,
    read_length: int,
    rows: jax.Array,
    q: jax.Array,
    new_k: jax.Array,
    new_v: jax.Array,
) -> jax.Array:
    """``attend_cache_and_new`` of the new tokens of cache rows ``rows`` [n] (q [n, t, h, d],
    new_k and new_v [n, t, k, d]) against their first ``read_length`` slots in layer ``layer``,
    as many rows at a time as fit ``CPU_READ_BYTES`` (their keys, values and logits)."""
    count = q.shape[0]
    chunk = _rows_per_read(q, new_k, cache, read_length, count)

    def attend(inputs):
        rows, q, new_k, new_v = inputs
        keys, values = cache.gather_rows(layer, rows, read_length)
        return attend_cache_and_new(
            q,
            keys.astype(q.dtype),
            values.astype(q.dtype),
            cache.lengths[rows],
            new_k,
            new_v,
            cache.keys_by_slot,
        )

    if chunk == count:
        return attend((rows, q, new_k, new_v))
    chunks = [x.reshape(count // chunk, chunk, *x.shape[1:]) for x in (rows, q, new_k, new_v)]
    return jax.lax.map(attend, chunks).reshape(q.shape)
