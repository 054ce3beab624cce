"""What a JaxSampler holds on each device (weights and the KV cache), before it allocates any,
and the cache it then allocates.

    weights, cache = memory_per_device(model, slots=8, max_cache_len=36864, mesh=mesh)
    free = free_device_bytes(mesh.devices.flat[0])
    layout = CacheLayout.of(max_batch=64, max_cache_len=36864, max_cache_tokens=None, paged=True)
    cache, shardings = allocate_cache(model, layout, mesh, rules, free_bytes=None)

Used by JaxSampler to refuse a cache that cannot fit (`refuse_what_cannot_fit`) and to build
its cache, and by the memory planner and tests to check a config's sampler.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from deepswe_jax.model.kv_cache import (
    KEYS_LOGICAL_AXES,
    PAGE,
    PAGED_KEYS_LOGICAL_AXES,
    PAGED_VALUES_LOGICAL_AXES,
    VALUES_LOGICAL_AXES,
    KVCache,
    PagedKVCache,
)
from deepswe_jax.model.paged_kernel import check_paged_kernel
from deepswe_jax.model.qwen3 import Qwen3ForCausalLM
from deepswe_jax.parallel import DEFAULT_RULES, logical_to_sharding, state_shardings
from deepswe_jax.parallel.sharding import Rules


def free_device_bytes(device: jax.Device) -> int:
    """Bytes `device` can still allocate: its allocator's limit minus what is in use, or for CPU
    devices (no allocator statistics) the host's available memory, which they share."""
    stats = device.memory_stats()
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _bytes_per_device(shape: Sequence[int], dtype: Any, sharding: NamedSharding) -> int:
    return math.prod(sharding.shard_shape(tuple(shape))) * np.dtype(dtype).itemsize


def cache_shape(config: Any, slots: int, max_cache_len: int) -> tuple[int, ...]:
    """[layers, slots, kv_heads, positions, head_dim] of the values (the keys hold as many, with
    positions last)."""
    c = config
    return (c.num_hidden_layers, slots, c.num_key_value_heads, max_cache_len, c.head_dim)


def memory_per_device(
    model: Qwen3ForCausalLM,
    *,
    slots: int,
    max_cache_len: int,
    mesh: Mesh,
    rules: Rules = DEFAULT_RULES,
    pages: int | None = None,
) -> tuple[int, int]:
    """(weights, KV cache) bytes on each device of a JaxSampler with `slots` cache rows of
    `max_cache_len` positions on `mesh`, or with a paged cache of `pages` pages of ``PAGE``
    tokens (shared by its rows; split over kv heads only) (`model` may be abstract, from
    nnx.eval_shape)."""
    state = nnx.state(model)
    shardings = state_shardings(state, mesh, rules)
    weights = sum(
        _bytes_per_device(leaf.shape, leaf.dtype, sharding)
        for leaf, sharding in zip(jax.tree.leaves(state), jax.tree.leaves(shardings), strict=True)
    )
    if pages is not None:
        c = model.config
        shape = (c.num_key_value_heads, c.num_hidden_layers, pages, PAGE, c.head_dim)
        cache_sharding = logical_to_sharding(PAGED_VALUES_LOGICAL_AXES, mesh, rules, shape=shape)
        return weights, 2 * _bytes_per_device(shape, model.dtype, cache_sharding)
    shape = cache_shape(model.config, slots, max_cache_len)
    # keys and values hold the same bytes, sharded alike (batch and kv heads)
    cache_sharding = logical_to_sharding(VALUES_LOGICAL_AXES, mesh, rules, shape=shape)
    return weights, 2 * _bytes_per_device(shape, model.dtype, cache_sharding)


def refuse_what_cannot_fit(
    model: Qwen3ForCausalLM,
    slots: int,
    max_cache_len: int,
    mesh: Mesh,
    rules: Rules,
    free_bytes: int | None,
    pages: int | None = None,
) -> None:
    """Raises ValueError, before anything is allocated, when a JaxSampler's weights plus the keys
    and values of `slots` rows of `max_cache_len` (or of a pool of `pages` pages) would not fit
    each device's free memory (None: what the device reports), with the sizes and what to
    change."""
    weights, cache = memory_per_device(
        model, slots=slots, max_cache_len=max_cache_len, mesh=mesh, rules=rules, pages=pages
    )
    device = mesh.devices.flat[0]
    free = free_device_bytes(device) if free_bytes is None else free_bytes
    if weights + cache <= free:
        return
    length = max_cache_len if pages is None else pages * PAGE
    layers, slots, kv_heads, length, head_dim = cache_shape(model.config, slots, length)
    sizes = (
        f"{layers} layers x keys and values x {kv_heads} kv heads x {head_dim} x "
        f"{np.dtype(model.dtype).itemsize} bytes, over {mesh.size} device(s)"
    )
    needs = (
        f"JaxSampler needs {(weights + cache) / 1e9:,.1f} GB per device but {device} has "
        f"{free / 1e9:,.1f} GB free"
    )
    if pages is not None:
        fitting = max(int((free - weights) // (cache / length)), 0)
        raise ValueError(
            f"{needs}: KV cache {cache / 1e9:,.1f} GB ({pages:,} pages x {PAGE} tokens x "
            f"{sizes}) plus weights {weights / 1e9:,.1f} GB. {fitting:,} tokens fit: set "
            f"sampler.max_cache_tokens={fitting:,} (at least the longest sequence), or shard "
            "the sampler over more devices"
        )
    fitting_slots = max(int((free - weights) // (cache / slots)), 0)
    raise ValueError(
        f"{needs}: KV cache {cache / 1e9:,.1f} GB ({slots} slots x {length:,} tokens x {sizes}) "
        f"plus weights {weights / 1e9:,.1f} GB. {fitting_slots} "
        f"slots fit: set sampler.max_batch={fitting_slots} or sampler.max_cache_tokens="
        f"{fitting_slots * length:,}, shorten agent.max_context, or shard the sampler over "
        "more devices"
    )


@dataclasses.dataclass(frozen=True)
class CacheLayout:
    """A JaxSampler's cache: `rows` rows of `row_len` slots each, dense (pages None) or sharing
    a pool of `pages` pages of ``PAGE`` slots (row_len then a whole number of pages), which a
    decode step reads by `attention` ("xla" or "pallas": model/paged_kernel.py)."""

    rows: int
    row_len: int
    pages: int | None
    attention: str = "xla"

    @classmethod
    def of(
        cls,
        max_batch: int,
        max_cache_len: int,
        max_cache_tokens: int | None,
        paged: bool,
        attention: str = "xla",
    ) -> CacheLayout:
        """The layout for a token budget (None: `max_batch` full rows' worth): dense, as many
        full rows as it holds (at most max_batch); paged, max_batch rows over its pages.
        ValueError, saying what to raise, when it holds no full row."""
        row_len = -(-max_cache_len // PAGE) * PAGE if paged else max_cache_len
        if max_cache_tokens is not None and max_cache_tokens < row_len:
            whole_pages = f" rounded up to whole pages of {PAGE}" if paged else ""
            raise ValueError(
                f"a cache budget of {max_cache_tokens:,} tokens holds no sequence of "
                f"max_cache_len={max_cache_len:,}{whole_pages}; raise sampler.max_cache_tokens "
                f"to at least {row_len:,}"
            )
        if paged:
            check_paged_kernel(attention)
            pages = (max_cache_tokens or max_batch * row_len) // PAGE
            return cls(max_batch, row_len, pages, attention)
        if max_cache_tokens is not None:
            max_batch = min(max_batch, max_cache_tokens // max_cache_len)
        return cls(max_batch, row_len, None)


def allocate_cache(
    model: Qwen3ForCausalLM,
    layout: CacheLayout,
    mesh: Mesh,
    rules: Rules,
    free_bytes: int | None,
) -> tuple[KVCache | PagedKVCache, KVCache | PagedKVCache]:
    """The empty cache of `layout` on `mesh` and its shardings, after refusing weights plus a
    cache that would not fit (`refuse_what_cannot_fit`). Kv heads are placed by the rules; a
    dense cache's rows over the batch axes, a paged cache's pool, table and lengths on every
    data-parallel device."""
    rows, row_len, pages = layout.rows, layout.row_len, layout.pages
    refuse_what_cannot_fit(model, rows, row_len, mesh, rules, free_bytes, pages=pages)
    if pages is None:
        init = functools.partial(model.init_cache, rows, row_len)
    else:
        init = functools.partial(
            model.init_paged_cache, rows, pages, row_len, attention=layout.attention
        )
    shape = jax.eval_shape(init)

    def sharding(axes, array):
        return logical_to_sharding(axes, mesh, rules, array.shape)

    if pages is None:
        shardings = KVCache(
            keys=sharding(KEYS_LOGICAL_AXES, shape.keys),
            values=sharding(VALUES_LOGICAL_AXES, shape.values),
            lengths=sharding(("batch",), shape.lengths),
        )
    else:
        shardings = PagedKVCache(
            keys=sharding(PAGED_KEYS_LOGICAL_AXES, shape.keys),
            values=sharding(PAGED_VALUES_LOGICAL_AXES, shape.values),
            table=sharding((None, None), shape.table),
            lengths=sharding((None,), shape.lengths),
            attention=layout.attention,
        )
    return jax.jit(init, out_shardings=shardings)(), shardings
