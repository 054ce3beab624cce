"""A decode call's cache reads: every row as far as the longest row, each row its own length, and
each row its own pages of a paged cache.

  JAX_PLATFORMS=cpu python -m bench.decode_reads [--repeats 7]

`Qwen3ForCausalLM.decode` with `each_row_reads` False (one read length for the batch, the shortest
of cache_attention.read_lengths holding the longest live row) and True
(cache_attention.attend_each_row_cache, the CPU default: rows sorted by length and read in small
groups, each group the read length of its longest row; rows without a token read nothing), in
one jitted call of decoding.DECODE_STEPS greedy steps, as the sampler's decode call runs them,
the cache donated as there. The paged cache (kv_cache.PagedKVCache, each row its own length) holds the same
keys and values in pages of 16 slots, each row's pages scattered over the pool in a random order.
Random float32 weights and cache contents; row lengths drawn uniformly in each case's range (agent
episodes at different turns hold thousands of slots more or less than each other). The three
programs alternate call by call after a warm-up; the table reports the fastest call of each (wall
time; the machine is shared) and checks that all pick the same tokens.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bench.vllm_sampler import MODELS
from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.kv_cache import PAGE, PagedKVCache
from deepswe_jax.sampling.decoding import DECODE_STEPS

# (model, rows, cache slots, shortest and longest row, rows taking tokens)
CASES = (
    ("tiny", 8, 3_648, 1_000, 3_600, 8),  # the agent bench's scaled draw, every episode decoding
    ("tiny", 8, 3_648, 1_000, 3_600, 5),  # three of them between turns
    ("tiny", 32, 11_568, 1_000, 11_000, 32),  # the full-size draw
    ("tiny", 16, 1_024, 64, 400, 16),  # short rows of similar lengths
    ("100M", 8, 3_648, 1_000, 3_600, 8),
    ("100M", 64, 512, 64, 330, 64),  # single-turn batch 64
)


def decode_call(graphdef, live, each_row_reads, state, cache, tokens):
    model = nnx.merge(graphdef, state)

    def step(carry, _):
        cache, tokens = carry
        logits, cache = model.decode(
            tokens[:, None], cache, num_tokens=live.astype(jnp.int32), each_row_reads=each_row_reads
        )
        tokens = jnp.argmax(logits[:, 0], -1).astype(jnp.int32)
        return (cache, tokens), tokens

    (cache, _), tokens = jax.lax.scan(step, (cache, tokens), jnp.arange(DECODE_STEPS))
    return cache, tokens


def run_case(name, rows, slots, shortest, longest, live_rows, repeats):
    config = dataclasses.replace(
        Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()),
        **MODELS[name],
        max_position_embeddings=slots + DECODE_STEPS,
    )
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    cache = model.init_cache(batch_size=rows, max_length=slots)
    cache = dataclasses.replace(
        cache,
        keys=0.1 * jax.random.normal(jax.random.key(1), cache.keys.shape),
        values=jax.random.normal(jax.random.key(2), cache.values.shape),
        lengths=jnp.asarray(np.random.default_rng(0).integers(shortest, longest, rows), jnp.int32),
    )
    live = jnp.arange(rows) < live_rows
    tokens = jnp.ones((rows,), jnp.int32)
    lengths = np.asarray(cache.lengths)
    paged = paged_copy(cache)
    # The cache is donated, as the sampler's decode call donates it (else every call copies it).
    calls = {
        mode: jax.jit(functools.partial(decode_call, graphdef, live, mode != "longest row"),
                      donate_argnums=1)
        for mode in ("longest row", "each row", "paged")
    }  # fmt: skip
    caches = {"dense": cache, "paged": paged}
    picked, seconds = {}, {mode: [] for mode in calls}
    for repeat in range(repeats + 1):  # the first round compiles
        for mode, call in calls.items():
            key = "paged" if mode == "paged" else "dense"
            cache = dataclasses.replace(caches[key], lengths=jnp.asarray(lengths))
            start = time.perf_counter()
            caches[key], picked[mode] = jax.block_until_ready(call(state, cache, tokens))
            if repeat:
                seconds[mode].append(time.perf_counter() - start)
    best = {mode: min(times) for mode, times in seconds.items()}
    picked = {mode: np.asarray(tokens)[:, :live_rows] for mode, tokens in picked.items()}
    same = all((picked[mode] == picked["longest row"]).all() for mode in picked)
    print(
        f"{name:>5}{rows:>6}{slots:>8,}{f'{shortest:,}-{longest:,}':>14}{live_rows:>6}"
        f"{best['longest row'] * 1e3:>14.1f}{best['each row'] * 1e3:>12.1f}"
        f"{best['paged'] * 1e3:>9.1f}{best['longest row'] / best['each row']:>9.2f}x"
        f"{best['each row'] / best['paged']:>8.2f}x{str(same):>7}",
        flush=True,
    )


def paged_copy(cache):
    """cache's keys and values in a PagedKVCache, each row's pages in a random order of the pool."""
    layers, rows, kv_heads, head_dim, slots = cache.keys.shape
    per_row = slots // PAGE
    table = np.random.default_rng(3).permutation(rows * per_row).reshape(rows, per_row)
    keys = cache.keys.reshape(layers, rows, kv_heads, head_dim, per_row, PAGE)
    values = cache.values.reshape(layers, rows, kv_heads, per_row, PAGE, head_dim)
    order = np.argsort(table.reshape(-1))
    # [L, rows, k, d, C] and [L, rows, k, C, d] -> pages [k, L, rows * per_row, B, d]
    keys = keys.transpose(2, 0, 1, 4, 5, 3).reshape(kv_heads, layers, -1, PAGE, head_dim)
    values = values.transpose(2, 0, 1, 3, 4, 5).reshape(kv_heads, layers, -1, PAGE, head_dim)
    return PagedKVCache(
        keys=keys[:, :, order], values=values[:, :, order], table=jnp.asarray(table, jnp.int32),
        lengths=cache.lengths,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{DECODE_STEPS} decode steps per call, float32, on {jax.default_backend()} "
        f"({len(os.sched_getaffinity(0))} cores), load {os.getloadavg()[0]:.1f}, fastest of "
        f"{args.repeats}; ms per call"
    )
    print(
        f"{'model':>5}{'rows':>6}{'slots':>8}{'row lengths':>14}{'live':>6}"
        f"{'longest row':>14}{'each row':>12}{'paged':>9}{'speedup':>10}{'paged':>9}{'same':>7}"
    )
    for case in CASES:
        run_case(*case, args.repeats)


if __name__ == "__main__":
    main()
