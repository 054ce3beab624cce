"""The KV caches of incremental decoding (``Qwen3ForCausalLM.decode``; attention over them is in
cache_attention.py).

Shapes: b = batch, t = new tokens per row, k = kv heads, d = head_dim, c = cache slots read,
L = layers, C = slots per row, P = pages per layer, B = ``PAGE`` slots a page.

Two caches, one interface (``read_rows``, ``gather_rows``, ``with_new_tokens``, ``with_prompts``):

  * ``KVCache`` (dense): every row owns ``C`` slots, keys [L, b, k, d, C] and values
    [L, b, k, C, d];
  * ``PagedKVCache``: rows own pages of ``PAGE`` slots in proportion to their length, named by a
    page table [b, C // B]; keys and values [k, L, P, B, d]. Rows may share pages (a group's
    common prompt), so one prompt's keys and values are held once; the host
    (sampling/block_manager.py) owns the table.

In the dense layouts both attention products (q . keys over d, weights . values over c) are
plain matmuls per row and head, so a decode step never transposes the cache. A paged read is a
gather of whole pages (B x d contiguous values) per kv head, straight into [k, c, d] (keys by
slot: q . keys contracts their last axis), again with no transpose. On XLA:CPU a row's paged
attention still costs about 2x its dense one (a gather is slower than a slice; measured in
microbenchmarks: pages gathered heads-first 16 slots at a time, or gathered then transposed
into the dense layouts, cost 4-7x).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from deepswe_jax.parallel.sharding import constrain

# Slots per page of a PagedKVCache: vLLM's default block size, and the grain at which the
# sampler's prefix index hashes tokens.
PAGE = 16


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KVCache:
    """Per-layer keys/values for incremental decoding (a pytree: pass it through jit).

    keys: [layers, batch, kv_heads, head_dim, cache_length]; values: [layers, batch, kv_heads,
    cache_length, head_dim] (the layouts in which both attention products are plain matmuls per
    row and head, so nothing is transposed per step); lengths: [batch] int32, the number of
    filled slots in each row.
    """

    keys: jax.Array
    values: jax.Array
    lengths: jax.Array

    keys_by_slot = False  # read_rows gives keys [.., d, c]
    attention = "xla"  # read by cache_attention.py (PagedKVCache may say "pallas")

    @property
    def max_length(self) -> int:
        return self.values.shape[3]

    def reset_rows(self, rows: jax.Array) -> KVCache:
        """Empty the rows where ``rows`` [batch] bool is True (their old slots become invisible)."""
        return dataclasses.replace(self, lengths=jnp.where(rows, 0, self.lengths))

    def read_rows(self, layer: jax.Array, first_row: jax.Array, count: int, length: int):
        """Slots 0 .. length - 1 of rows first_row .. first_row + count - 1 in one layer: keys
        [count, k, d, c], values [count, k, c, d]."""
        _, _, kv_heads, head_dim, _ = self.keys.shape
        keys = jax.lax.dynamic_slice(
            self.keys, (layer, first_row, 0, 0, 0), (1, count, kv_heads, head_dim, length)
        )
        values = jax.lax.dynamic_slice(
            self.values, (layer, first_row, 0, 0, 0), (1, count, kv_heads, length, head_dim)
        )
        return keys[0], values[0]

    def gather_rows(self, layer: jax.Array, rows: jax.Array, length: int):
        """``read_rows`` of the rows ``rows`` [n] int (any order): keys [n, k, d, c], values
        [n, k, c, d]."""
        return self.keys[layer, rows, :, :, :length], self.values[layer, rows, :, :length]

    def with_new_tokens(
        self, keys: jax.Array, values: jax.Array, rows: jax.Array | None, num_tokens: jax.Array
    ) -> KVCache:
        """keys/values [L, b, t, k, d] of t new tokens per row written after rows' filled slots
        (``rows`` [b], default all), lengths advanced by num_tokens [b]; tokens past a row's
        num_tokens are written but not counted, writes past the end are dropped."""
        t = keys.shape[2]
        lengths = self.lengths if rows is None else self.lengths[rows]
        slots = lengths[:, None] + jnp.arange(t, dtype=jnp.int32)  # [b, t]
        # Row and slot indices on either side of sliced axes put the update's dims first:
        # [b, t, L, k, d].
        written = (jnp.arange(keys.shape[1]) if rows is None else rows)[:, None]
        new_keys = self.keys.at[:, written, :, :, slots].set(
            keys.transpose(1, 2, 0, 3, 4), mode="drop"
        )
        new_values = self.values.at[:, written, :, slots].set(
            values.transpose(1, 2, 0, 3, 4), mode="drop"
        )
        return KVCache(
            keys=constrain(new_keys, KEYS_LOGICAL_AXES),
            values=constrain(new_values, VALUES_LOGICAL_AXES),
            lengths=_advance(self.lengths, rows, lengths, num_tokens),
        )

    def with_prompts(
        self, keys: jax.Array, values: jax.Array, rows: jax.Array, lengths: jax.Array
    ) -> KVCache:
        """Prompts' keys [L, n, k, d, s] / values [L, n, k, s, d] (``Qwen3ForCausalLM.prefill``)
        into slots 0 .. s - 1 of rows [n] (out of range: dropped), which then hold lengths [n]."""
        s = keys.shape[4]
        return KVCache(
            keys=self.keys.at[:, rows, :, :, :s].set(keys, mode="drop"),
            values=self.values.at[:, rows, :, :s].set(values, mode="drop"),
            lengths=self.lengths.at[rows].set(lengths, mode="drop"),
        )


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PagedKVCache:
    """Keys/values in pages of ``PAGE`` slots that rows hold through a page table (a pytree).

    keys and values: [kv_heads, layers, pages, PAGE, head_dim]; table: [batch, max_length // PAGE] int32, the pages of each row's slots in order
    (entries past a row's pages: ``pages``, out of range); lengths: [batch] int32, filled slots
    per row. Only slots below a row's new length are written, so a row that takes no token, or
    one whose prefix pages other rows share, never writes a page past its own tokens.
    """

    keys: jax.Array
    values: jax.Array
    table: jax.Array
    lengths: jax.Array
    # How a decode step reads it (static): "xla", every row's pages gathered into a dense copy
    # (cache_attention.py), or "pallas", a kernel reading the pages where they lie
    # (paged_kernel.py).
    attention: str = dataclasses.field(default="xla", metadata={"static": True})

    keys_by_slot = True  # read_rows gives keys [.., c, d] (the dense cache: [.., d, c])

    @property
    def max_length(self) -> int:
        return self.table.shape[1] * PAGE

    def read_rows(self, layer: jax.Array, first_row: jax.Array, count: int, length: int):
        """The rows' first length // PAGE pages, gathered: keys and values [count, k, c, d]."""
        table = jax.lax.dynamic_slice(self.table, (first_row, 0), (count, length // PAGE))
        return self._gather(layer, table)

    def gather_rows(self, layer: jax.Array, rows: jax.Array, length: int):
        """``read_rows`` of the rows ``rows`` [n] int (any order): keys and values [n, k, c, d]."""
        return self._gather(layer, self.table[rows, : length // PAGE])

    def _gather(self, layer: jax.Array, table: jax.Array):
        """The pages ``table`` [count, n] of one layer: keys and values [count, k, n * PAGE, d]."""
        kv_heads, layers, pages, _, head_dim = self.keys.shape
        count, length = table.shape[0], table.shape[1] * PAGE
        index = layer * pages + table  # [count, n] into the layers x pages axis
        shape = (kv_heads, layers * pages, PAGE * head_dim)  # a page's slots: one row to gather

        def gather(pool):  # [k, count, n, B * d] -> [count, k, c, d]
            read = jnp.take(pool.reshape(shape), index, axis=1, mode="clip")
            return read.reshape(kv_heads, count, length, head_dim).transpose(1, 0, 2, 3)

        return gather(self.keys), gather(self.values)

    def with_new_tokens(
        self, keys: jax.Array, values: jax.Array, rows: jax.Array | None, num_tokens: jax.Array
    ) -> PagedKVCache:
        """As ``KVCache.with_new_tokens``, except that tokens past a row's num_tokens are not
        written (their page may belong to another row)."""
        layers, batch, t = keys.shape[:3]
        lengths = self.lengths if rows is None else self.lengths[rows]
        slots = lengths[:, None] + jnp.arange(t, dtype=jnp.int32)  # [b, t]
        table = self.table if rows is None else self.table[rows]
        pages = jnp.take_along_axis(table, slots // PAGE, axis=1, mode="clip")
        real = (jnp.arange(t) < num_tokens[:, None]) & (slots < self.max_length)
        if rows is not None:
            real &= (rows >= 0)[:, None] & (rows < self.table.shape[0])[:, None]
        pages = jnp.where(real, pages, self.keys.shape[2])  # out of range: dropped
        head = jnp.arange(keys.shape[3])[:, None, None, None]
        layer = jnp.arange(layers)[None, :, None, None]
        page, offset = pages[None, None], (slots % PAGE)[None, None]  # [1, 1, b, t]
        # indexed dims [k, L, b, t], then d
        new_keys = self.keys.at[head, layer, page, offset].set(
            keys.transpose(3, 0, 1, 2, 4), mode="drop"
        )
        new_values = self.values.at[head, layer, page, offset].set(
            values.transpose(3, 0, 1, 2, 4), mode="drop"
        )
        return dataclasses.replace(
            self,
            keys=constrain(new_keys, PAGED_KEYS_LOGICAL_AXES),
            values=constrain(new_values, PAGED_VALUES_LOGICAL_AXES),
            lengths=_advance(self.lengths, rows, lengths, num_tokens),
        )

    def with_prompts(
        self, keys: jax.Array, values: jax.Array, rows: jax.Array, lengths: jax.Array
    ) -> PagedKVCache:
        """As ``KVCache.with_prompts``, whole pages at a time (s a multiple of ``PAGE``); pages
        past a prompt's length are not written."""
        layers, n, kv_heads, head_dim, s = keys.shape
        count = s // PAGE
        valid = (rows >= 0) & (rows < self.table.shape[0])
        pages = self.table[jnp.clip(rows, 0, self.table.shape[0] - 1), :count]  # [n, count]
        real = valid[:, None] & (jnp.arange(count) * PAGE < lengths[:, None])
        pages = jnp.where(real, pages, self.keys.shape[2])[None, None]  # [1, 1, n, count]
        head = jnp.arange(kv_heads)[:, None, None, None]
        layer = jnp.arange(layers)[None, :, None, None]
        keys = keys.reshape(layers, n, kv_heads, head_dim, count, PAGE)
        values = values.reshape(layers, n, kv_heads, count, PAGE, head_dim)
        return dataclasses.replace(
            self,
            keys=self.keys.at[head, layer, pages].set(
                keys.transpose(2, 0, 1, 4, 5, 3), mode="drop"
            ),  # indexed dims [k, L, n, count], then B, d
            values=self.values.at[head, layer, pages].set(
                values.transpose(2, 0, 1, 3, 4, 5), mode="drop"
            ),
            lengths=self.lengths.at[rows].set(lengths, mode="drop"),
        )


Cache = KVCache | PagedKVCache


def _advance(
    all_lengths: jax.Array, rows: jax.Array | None, lengths: jax.Array, num_tokens: jax.Array
) -> jax.Array:
    """all_lengths [batch] after rows (default all) of `lengths` took num_tokens [b] each."""
    new_lengths = lengths + num_tokens.astype(jnp.int32)
    return new_lengths if rows is None else all_lengths.at[rows].set(new_lengths, mode="drop")


KEYS_LOGICAL_AXES = ("layers", "batch", "act_kv_heads", "head_dim", "cache_seq")
VALUES_LOGICAL_AXES = ("layers", "batch", "act_kv_heads", "cache_seq", "head_dim")
PAGED_KEYS_LOGICAL_AXES = ("act_kv_heads", "layers", None, None, "head_dim")
PAGED_VALUES_LOGICAL_AXES = PAGED_KEYS_LOGICAL_AXES
