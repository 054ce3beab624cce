"""The JAX sampler's device kernels: token sampling and the prefill, extend, copy and decode steps.

Pure functions of (layout, weights, cache, ...); `SamplerPrograms.build` jits them (once per
shape) for `JaxSampler` (jax_sampler.py), which runs them from its scheduling thread. Weights
are arguments, never closed-over constants, so swapping them does not recompile; the layout
(weights.py) says how they are held.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from deepswe_jax.model.kv_cache import Cache, KVCache
from deepswe_jax.sampling.weights import WeightLayout, Weights

# Decode steps per device call: one host round trip per DECODE_STEPS tokens (the per-step round
# trip dominated small-model decoding). Queued requests join between calls.
DECODE_STEPS = 8
# Stop tokens a request may name (Qwen3 chat uses 1-2).
MAX_STOP_IDS = 8


def row_keys(seeds: jax.Array, positions: jax.Array) -> jax.Array:
    """The PRNG key of each row's next token: from its request's seed [b] (uint32) and the
    token's index in the completion [b], nothing else. A request's draws therefore do not depend
    on which rows, steps or programs it shares with other requests (vLLM's per-request seed)."""
    root = jax.random.key(0)
    return jax.vmap(lambda s, p: jax.random.fold_in(jax.random.fold_in(root, s), p))(
        seeds, positions
    )


def first_argmax(x: jax.Array) -> jax.Array:
    """jnp.argmax over the last axis (first index of the maximum; a NaN counts as the maximum),
    from a max and a min: XLA:CPU runs argmax as a variadic reduce, 9 ms against 1.5 ms for
    [64, 32000] here. x [b, v] -> [b] int32."""
    peak = x.max(axis=-1, keepdims=True)
    index = jnp.arange(x.shape[-1], dtype=jnp.int32)
    return jnp.min(jnp.where((x == peak) | jnp.isnan(x), index, x.shape[-1]), axis=-1)


def sample_next_tokens(
    logits: jax.Array,
    keys: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    top_k: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """One token per row, with per-row sampling parameters.

    Args:
      logits: [b, v] next-token logits.
      keys: [b] PRNG keys, one per row (`row_keys`).
      temperature: [b] float; 0 means greedy (argmax, no randomness).
      top_p: [b] float in (0, 1]; 1 keeps the whole distribution.
      top_k: [b] int; 0 keeps every token.

    Returns:
      tokens [b] int32 and their logprobs [b] float32 under log_softmax(logits / temperature)
      (temperature 1 for greedy rows), i.e. before top-p / top-k truncation.
    """
    logits = logits.astype(jnp.float32)
    greedy = temperature <= 0.0
    scaled = logits / jnp.where(greedy, 1.0, temperature)[:, None]
    logprobs = jax.nn.log_softmax(scaled, axis=-1)

    def truncate(scaled: jax.Array) -> jax.Array:
        descending = -jnp.sort(-scaled, axis=-1)  # [b, v]
        probs = jax.nn.softmax(descending, axis=-1)
        mass_before = jnp.cumsum(probs, axis=-1) - probs
        rank = jnp.arange(scaled.shape[-1])[None, :]
        keep = (mass_before < top_p[:, None]) & ((top_k[:, None] <= 0) | (rank < top_k[:, None]))
        threshold = jnp.min(jnp.where(keep, descending, jnp.inf), axis=-1, keepdims=True)
        return jnp.where(scaled >= threshold, scaled, -jnp.inf)

    # Sorting the vocabulary is the costly part; skip it when no row truncates (the RL setting).
    truncating = jnp.any((top_p < 1.0) | (top_k > 0))
    candidates = jax.lax.cond(truncating, truncate, lambda s: s, scaled)
    argmax = first_argmax(logits)
    # Drawing [b, v] Gumbel noise costs more than the rest of a small model's step: skip it when
    # every row is greedy. Gumbel-max is jax.random.categorical's own draw.
    sampled = jax.lax.cond(
        jnp.all(greedy),
        lambda: argmax,
        lambda: first_argmax(
            jax.vmap(lambda k, c: jax.random.gumbel(k, c.shape))(keys, candidates) + candidates
        ),
    )
    tokens = jnp.where(greedy, argmax, sampled)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]


def prefill_step(
    layout: WeightLayout,
    weights: Weights,
    cache: Cache,
    prompt_ids: jax.Array,
    prompt_lengths: jax.Array,
    rows: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    top_k: jax.Array,
    seeds: jax.Array,
) -> tuple[Cache, jax.Array, jax.Array]:
    """Prompts [n, t] (right-padded; true lengths [n]) into cache rows [n] (out of range = skip).

    Runs the prompts through `Qwen3ForCausalLM.prefill` (no cache read), writes their keys/values
    into slots 0..t-1 of the given rows, and samples each prompt's first new token. Returns
    (cache, tokens [n], logprobs [n]).
    """
    model, _ = layout.model(weights)
    last_logits, keys, values = model.prefill(prompt_ids, prompt_lengths, cache.keys.dtype)
    cache = cache.with_prompts(keys, values, rows, prompt_lengths)
    tokens, logprobs = sample_first_tokens(last_logits, temperature, top_p, top_k, seeds)
    return cache, tokens, logprobs


def sample_first_tokens(
    logits: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    top_k: jax.Array,
    seeds: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """`sample_next_tokens` of each completion's first token (index 0 of its seed's draws),
    after a prefill or after an extend ran its prompt."""
    keys = row_keys(seeds, jnp.zeros_like(seeds, dtype=jnp.int32))
    return sample_next_tokens(logits, keys, temperature, top_p, top_k)


def extend_step(
    layout: WeightLayout,
    weights: Weights,
    cache: Cache,
    suffix_ids: jax.Array,
    suffix_lengths: jax.Array,
    starts: jax.Array,
    rows: jax.Array,
    count: jax.Array,
) -> tuple[Cache, jax.Array]:
    """Prompts whose first starts [n] tokens are already in cache rows [n]: runs only their
    remaining tokens, suffix_ids [n, t] (right-padded; true lengths [n], at least 1), attending
    to those cached slots, and writes them after the cached ones. Only the first `count` (int
    scalar) of the n entries are real.

    The rows run one after another in a device loop of `count` iterations, so `count` is not a
    shape (one program per t, whatever the number of prompts) and each row reads only its own
    cached slots. Returns (cache, logits [n, v] float32 at each prompt's last token; zeros past
    `count`).
    """
    model, layer_weights = layout.model(weights)

    def extend_row(i, carry):
        cache, logits = carry
        row, length = rows[i][None], suffix_lengths[i][None]
        cache = dataclasses.replace(cache, lengths=cache.lengths.at[row].set(starts[i]))
        row_logits, cache = model.decode(
            suffix_ids[i][None],
            cache,
            num_tokens=length,
            rows=row,
            logits_at=length - 1,
            layer_weights=layer_weights,
        )
        return cache, logits.at[i].set(row_logits[0, 0])

    logits = jnp.zeros((suffix_ids.shape[0], model.config.vocab_size), jnp.float32)
    return jax.lax.fori_loop(0, count, extend_row, (cache, logits))


def copy_prefixes(
    cache: KVCache, sources: jax.Array, targets: jax.Array, count: jax.Array, length: int
) -> KVCache:
    """Copies slots 0 .. length - 1 of cache rows sources [m] into rows targets [m], for the
    first `count` (int scalar) pairs, one after another (no row both a source and a target).
    Lengths are left to the extend that follows."""

    layers, _, kv_heads, head_dim, _ = cache.keys.shape

    def copy_row(i, cache):
        source, target = (0, sources[i], 0, 0, 0), (0, targets[i], 0, 0, 0)
        keys = jax.lax.dynamic_slice(cache.keys, source, (layers, 1, kv_heads, head_dim, length))
        values = jax.lax.dynamic_slice(
            cache.values, source, (layers, 1, kv_heads, length, head_dim)
        )
        return dataclasses.replace(
            cache,
            keys=jax.lax.dynamic_update_slice(cache.keys, keys, target),
            values=jax.lax.dynamic_update_slice(cache.values, values, target),
        )

    return jax.lax.fori_loop(0, count, copy_row, cache)


def decode_step(
    layout: WeightLayout,
    weights: Weights,
    cache: Cache,
    tokens: jax.Array,
    active: jax.Array,
    remaining: jax.Array,
    stop_ids: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    top_k: jax.Array,
    seeds: jax.Array,
    positions: jax.Array,
) -> tuple[Cache, jax.Array, jax.Array]:
    """DECODE_STEPS decode steps on the device, without a host round trip between them.

    Feeds tokens [b] (one per row) and samples the next ones, step after step. A row stops
    feeding (its cache length stays) once it sampled one of its stop_ids [b, MAX_STOP_IDS]
    (-1 pads) or `remaining` [b] tokens, or from the start when active [b] is False; what it
    samples after that is discarded by the host. Row r's token of step i is drawn with
    `row_keys` of its request's seeds [b] at completion index positions[r] + i (positions [b]:
    tokens the row's request generated before the call). Returns (cache, tokens [k, b],
    logprobs [k, b]).
    """
    model, layer_weights = layout.model(weights)

    def step(carry, index):
        cache, tokens, live = carry
        logits, cache = model.decode(
            tokens[:, None],
            cache,
            num_tokens=live.astype(jnp.int32),
            layer_weights=layer_weights,
        )
        keys = row_keys(seeds, positions + index)
        next_tokens, logprobs = sample_next_tokens(logits[:, 0], keys, temperature, top_p, top_k)
        stopped = jnp.any(next_tokens[:, None] == stop_ids, axis=-1)
        live = live & (index + 1 < remaining) & ~stopped
        return (cache, next_tokens, live), (next_tokens, logprobs)

    steps = jnp.arange(DECODE_STEPS, dtype=jnp.int32)
    (cache, _, _), (tokens, logprobs) = jax.lax.scan(step, (cache, tokens, active), steps)
    return cache, tokens, logprobs


@dataclasses.dataclass(frozen=True)
class SamplerPrograms:
    """The steps above, jitted with the cache donated and laid out by `cache_shardings`; every
    other output is replicated. Shapes that compile a program of their own: prefill (prompt
    count, length), extend (suffix length), copy (prefix length), sample and decode (one each).
    """

    prefill: Callable
    extend: Callable
    copy: Callable
    sample: Callable
    decode: Callable

    @classmethod
    def build(cls, layout: WeightLayout, cache_shardings: Cache, mesh: Mesh) -> SamplerPrograms:
        replicated = NamedSharding(mesh, PartitionSpec())
        step_out = (cache_shardings, replicated, replicated)
        return cls(
            prefill=jax.jit(
                functools.partial(prefill_step, layout),
                donate_argnums=(1,),
                out_shardings=step_out,
            ),
            extend=jax.jit(
                functools.partial(extend_step, layout),
                donate_argnums=(1,),
                out_shardings=(cache_shardings, replicated),
            ),
            copy=jax.jit(
                copy_prefixes,
                static_argnums=(4,),
                donate_argnums=(0,),
                out_shardings=cache_shardings,
            ),
            sample=jax.jit(sample_first_tokens, out_shardings=(replicated, replicated)),
            decode=jax.jit(
                functools.partial(decode_step, layout),
                donate_argnums=(1,),
                out_shardings=step_out,
            ),
        )

    @property
    def compilations(self) -> dict[str, int]:
        """Programs compiled so far, per step (over its shapes)."""
        return {f.name: getattr(self, f.name)._cache_size() for f in dataclasses.fields(self)}

    @property
    def compilation_count(self) -> int:
        """Programs compiled so far, over all steps and shapes."""
        return sum(self.compilations.values())
