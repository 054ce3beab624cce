"""In-process JAX sampler: continuous batching over a fixed-shape KV cache, sharded on a mesh.

The engine holds `max_batch` rows ("slots") of one `KVCache` of `max_cache_len` positions; shapes
never change, so the decode step compiles once. A background thread runs the loop:

  1. admit queued requests into free slots. With prefix caching (the default) a finished
     request's keys/values stay in its slot, and a prompt that begins with tokens some slot
     holds (the next turn of an episode, another rollout of the same prompt) goes to that slot,
     or gets a device copy of that prefix, and computes only the rest (an "extend" that attends
     to the cached slots; prefix_cache.py chooses slots, evicting least recently used ones).
     Prompts with nothing cached run through the model's prefill (a forward that reads no
     cache), grouped by padded length (powers of two, at least `min_prefill_len`), counts
     padded to powers of two. Extends run their rows one by one in a device loop, at most
     EXTEND_CHUNK tokens per row per call, padded to powers of two: a few programs serve every
     number of prompts and every suffix length, so an episode's later turns compile nothing;
  2. DECODE_STEPS decode steps for every slot in one device call (rows without a request, or
     whose request ended within the call, are masked: their cache length stays);
  3. slots whose request hit a stop token or its token budget leave; their callers' futures are
     resolved on their own event loops.

Any number of asyncio callers (on any loops) may call `generate` at once; they are batched
together. Weights are arguments of the jitted steps, never closed-over constants, so
`sync_weights` swaps them without recompiling (and forgets every cached prefix). The jitted
steps themselves (token sampling, prefill, extend, prefix copy, decode) are in decoding.py, the
host record of each row in slots.py; this module schedules them. `prefill_counts` says how
many prompt tokens were computed and reused.

Logprobs: each generated token's logprob is log_softmax(logits / temperature) at that token —
the temperature-scaled policy before top-p / top-k truncation (temperature 0, i.e. greedy, uses
temperature 1). With temperature 1 it is exactly log_softmax of the model's logits, which the
trainer recomputes.

A request generates at most `max_cache_len - len(prompt)` tokens: when the cache row is full it
ends with finish_reason 'length', as when `max_new_tokens` runs out.

Memory: with the dense cache each slot reserves a whole row of `max_cache_len` positions, so
the cache is sized by a token budget when one is given (`max_cache_tokens`: slots = budget //
max_cache_len, at most `max_batch`). With `paged=True` the budget is a pool of pages of 16
positions that `max_batch` rows take as they grow (block_manager.py: full pages shared between
prompts, the newest request preempted and run again when the pool runs out). A sampler whose
weights and cache would not fit the devices' free memory is refused before anything is
allocated, with the sizes and what to change (memory.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.model.qwen3 import Qwen3ForCausalLM
from deepswe_jax.parallel import (
    DEFAULT_RULES,
    make_mesh,
    state_shardings,
    use_rules,
)
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.sampling.base import Completion, GenerateRequest
from deepswe_jax.sampling.block_manager import PageTable
from deepswe_jax.sampling.decoding import DECODE_STEPS, SamplerPrograms
from deepswe_jax.sampling.memory import CacheLayout, allocate_cache
from deepswe_jax.sampling.prefix_cache import Placement, PrefillCounts, RowPrefixCache
from deepswe_jax.sampling.sequences import (
    InFlight,
    bucket,
    deliver,
    pack_prompts,
    powers_of_two_up_to,
)
from deepswe_jax.sampling.slots import Slots
from deepswe_jax.sampling.weights import WeightLayout, Weights, per_layer_by_default

# Longest suffix an extend computes per row in one call (longer ones take several): bounds the
# extend programs to the powers of two from `min_prefill_len` up to it.
EXTEND_CHUNK = 512


class JaxSampler:
    """`Sampler` running `Qwen3ForCausalLM` in this process with continuous batching.

    Args:
      model: the policy; its weights are copied (the caller may keep training it).
      max_batch: decode slots (requests generated at once; others wait in a queue).
      max_cache_len: positions per slot: the longest prompt + completion.
      mesh: where to run; default one device. Params are sharded by their logical axes through
        `rules`, the cache's batch over the ('data', 'fsdp') axes (by the 'batch' rule).
      rules: logical -> mesh axis table (default `DEFAULT_RULES`).
      min_prefill_len: smallest prompt padding bucket.
      seed: seeds the seeds of requests that bring none (slots.py); a request's own
        SamplingParams.seed decides its draws alone.
      max_cache_tokens: token budget of the KV cache; the slots are then
        min(max_batch, max_cache_tokens // max_cache_len) (None: max_batch slots).
      free_bytes: bytes each device may still allocate (None: what the device reports,
        `free_device_bytes`); weights and cache beyond it are refused with a ValueError.
      prefix_caching: keep finished requests' keys/values in their rows and compute only the
        part of a later prompt past its longest cached prefix (prefix_cache.py); False computes
        every prompt whole.
      paged: a paged cache (block_manager.py): `max_batch` rows hold pages of 16 slots as they
        grow, from a pool of max_cache_tokens // 16 pages (default max_batch rows' worth);
        prompts share their common full pages instead of copying them; when the pool runs out,
        the most recently admitted requests are preempted and run again later. False: every row
        reserves `max_cache_len` slots.
      paged_attention: how a decode step reads the paged cache: "xla" gathers every row's
        pages into a dense copy (cache_attention.py; on CPU each row its own length), "pallas"
        reads them where they lie in one kernel (model/paged_kernel.py; for GPUs, where the
        gathered copy of many long rows does not fit; interpret mode on CPU).
      per_layer_weights: hold each decoder layer's weights as arrays of their own, which decode
        and extend steps read in place, instead of stacked (weights.py: XLA:CPU copies a stacked
        layer's slice before every matmul). Default: on when the mesh's devices are CPUs and
        a layer's weights reach `weights.PER_LAYER_MIN_BYTES`.
    """

    syncs_global_arrays = False  # sync_weights reads every param whole on this process

    def __init__(
        self,
        model: Qwen3ForCausalLM,
        *,
        max_batch: int = 8,
        max_cache_len: int = 2048,
        mesh: Mesh | None = None,
        rules: Rules = DEFAULT_RULES,
        min_prefill_len: int = 16,
        seed: int = 0,
        max_cache_tokens: int | None = None,
        free_bytes: int | None = None,
        prefix_caching: bool = True,
        paged: bool = False,
        paged_attention: str = "xla",
        per_layer_weights: bool | None = None,
    ):
        if max_batch < 1 or max_cache_len < 2:
            raise ValueError(
                f"need max_batch >= 1 and max_cache_len >= 2, got {max_batch} and {max_cache_len}"
            )
        layout = CacheLayout.of(max_batch, max_cache_len, max_cache_tokens, paged, paged_attention)
        max_batch = layout.rows
        self.paged = paged
        self.max_batch = max_batch
        self.max_cache_len = max_cache_len
        config = model.config
        self.vocab_size = config.vocab_size
        self._mesh = mesh or make_mesh(1, 1, 1, devices=jax.devices()[:1])
        self._rules = tuple(rules)
        # A paged row's slots are whole pages: its length and every prompt bucket round up.
        row_len, grain = layout.row_len, PAGE if paged else 1
        self._length_buckets = _round_up(powers_of_two_up_to(row_len, min_prefill_len), grain)
        self._extend_buckets = powers_of_two_up_to(min(EXTEND_CHUNK, row_len), min_prefill_len)
        self._count_buckets = powers_of_two_up_to(max_batch)

        self.cache_pages = layout.pages
        # Refused (weights and cache too large for the devices) before anything is allocated.
        self._cache, cache_shardings = allocate_cache(
            model, layout, self._mesh, self._rules, free_bytes
        )
        graphdef, state = nnx.split(model)
        self._state_shardings = state_shardings(state, self._mesh, self._rules)
        self._state_leaves, self._state_treedef = jax.tree.flatten(state)
        if per_layer_weights is None:
            platform = self._mesh.devices.flat[0].platform
            per_layer_weights = per_layer_by_default(state, platform)
        self._layout = WeightLayout.of(graphdef, state, per_layer_weights)
        self._weight_shardings = self._layout.shardings(self._state_shardings)
        self._weights = self._place(state)

        self._programs = SamplerPrograms.build(self._layout, cache_shardings, self._mesh)
        if paged:
            self._table_sharding = cache_shardings.table
            self._table_version = -1
            self._prefixes = PageTable(max_batch, layout.pages, row_len, enabled=prefix_caching)
        else:
            self._prefixes = RowPrefixCache(max_batch, max_cache_len, enabled=prefix_caching)
        self._counts = PrefillCounts()
        self._slots = Slots(max_batch, self._prefixes, seed)

        self._queue: deque[InFlight] = deque()
        self._queue_changed = threading.Condition()
        self._weights_lock = threading.Lock()  # held while a step runs; sync_weights waits on it
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="jax-sampler", daemon=True)
        self._thread.start()

    def _sync_table(self) -> None:
        """Hands a paged cache the host's page table when it changed."""
        if self.paged and self._prefixes.version != self._table_version:
            table = jax.device_put(self._prefixes.table.copy(), self._table_sharding)
            self._cache = dataclasses.replace(self._cache, table=table)
            self._table_version = self._prefixes.version

    @property
    def preemptions(self) -> int:
        """Requests a paged sampler preempted (ran again later) for want of pages."""
        return self._prefixes.preemptions if self.paged else 0

    @property
    def compilation_count(self) -> int:
        """Number of compiled programs (decoding.SamplerPrograms: prefill, extend and copy shape
        buckets, the sampling step and the one decode step)."""
        return self._programs.compilation_count

    @property
    def compilations(self) -> dict[str, int]:
        """``compilation_count`` per step: prefill, extend, copy, sample, decode."""
        return self._programs.compilations

    @property
    def prefill_counts(self) -> PrefillCounts:
        """Prompt tokens admitted so far: all, computed, and reused from cached prefixes."""
        return dataclasses.replace(self._counts)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[Completion]:
        """Completions for `requests`, in order; batched with every other concurrent caller."""
        loop = asyncio.get_running_loop()
        sequences = [
            InFlight.of(request, loop, self.vocab_size, self.max_cache_len) for request in requests
        ]
        pending = [s for s in sequences if s.budget > 0]
        with self._queue_changed:
            if self._closed:
                raise RuntimeError("JaxSampler is closed; build a new one to generate again.")
            self._queue.extend(pending)
            self._queue_changed.notify()
        for sequence in sequences:
            if sequence.budget == 0:
                sequence.future.set_result(Completion((), (), "length"))
        return list(await asyncio.gather(*(s.future for s in sequences)))

    def sync_weights(self, params: Any) -> None:
        """Samples from `params` (a `Qwen3ForCausalLM` or its `nnx.State`) from the next step on.

        The new weights must have the model's structure and shapes; dtypes are cast to the
        sampler's. They are copied onto the sampler's shardings, so the caller may donate or
        update its own buffers afterwards. No recompilation.
        """
        state = nnx.state(params) if isinstance(params, nnx.Module) else params
        leaves, treedef = jax.tree.flatten(state)
        if len(leaves) != len(self._state_leaves):
            raise ValueError(
                f"sync_weights got {len(leaves)} arrays, the sampler's model has "
                f"{len(self._state_leaves)}; pass the same model (or nnx.state(model))"
            )
        paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(state)]
        cast = []
        for path, new, old in zip(paths, leaves, self._state_leaves, strict=True):
            if new.shape != old.shape:
                raise ValueError(
                    f"sync_weights: {path} has shape {new.shape}, the sampler expects {old.shape}"
                )
            cast.append(new.astype(old.dtype) if new.dtype != old.dtype else new)
        new_weights = self._place(jax.tree.unflatten(self._state_treedef, cast))
        with self._weights_lock:
            self._weights = new_weights
            self._prefixes.invalidate()  # cached keys/values came from the old weights

    def _place(self, state: nnx.State) -> Weights:
        """A copy of `state` on the sampler's shardings, in its layout (weights.py)."""
        state = jax.device_put(state, self._state_shardings, may_alias=False)
        return jax.device_put(self._layout.split(state), self._weight_shardings)

    def sleep(self) -> None:
        """A no-op: the KV cache and weights stay allocated (the trainer and JaxSampler share
        JAX's memory pool, so there is nothing to hand over)."""

    def wake(self) -> None:
        """A no-op (see `sleep`)."""

    def close(self) -> None:
        """Stops the engine thread; requests still queued or in flight fail with RuntimeError."""
        with self._queue_changed:
            self._closed = True
            self._queue_changed.notify()
        self._thread.join()
        error = RuntimeError("JaxSampler closed before the request finished")
        for sequence in self._queue:
            deliver(sequence, error)
        self._queue.clear()
        self._slots.fail(error)

    def _run(self) -> None:
        while True:
            with self._queue_changed:
                while not self._closed and not self._queue and not self._slots.occupied():
                    self._queue_changed.wait()
                if self._closed:
                    return
                free = self._slots.free()
                admitted = [self._queue.popleft() for _ in range(min(len(free), len(self._queue)))]
            waiting: list[InFlight] = []
            try:
                with self._weights_lock, jax.set_mesh(self._mesh), use_rules(self._rules):
                    if admitted:
                        waiting = self._admit(free, admitted)
                        with self._queue_changed:
                            self._queue.extendleft(reversed(waiting))
                    if self._slots.occupied():
                        self._decode_once()
            except Exception as error:  # fail the affected callers, keep serving
                self._prefixes.invalidate()
                self._slots.fail(error)  # every placed request: its row is freed
                for sequence in admitted:
                    if all(sequence is not w for w in waiting):  # those wait in the queue
                        deliver(sequence, error)

    def _admit(self, free: list[int], admitted: list[InFlight]) -> list[InFlight]:
        """Places admitted requests in free rows (prefix_cache.py) and computes their prompts,
        wave by wave: copies of cached prefixes first, then the rest of each prompt. Returns
        the requests that found no row this time (they wait at the front of the queue)."""
        placements = self._prefixes.place([s.prompt_ids for s in admitted], free)
        for placement, sequence in zip(placements, admitted, strict=False):
            # every placed request holds its row now, so a failure in any wave frees them all
            self._slots.start(placement.row, sequence)
        self._sync_table()
        for wave in sorted({p.wave for p in placements}):
            placed = [(p, s) for p, s in zip(placements, admitted, strict=False) if p.wave == wave]
            copies = [p for p, _ in placed if p.source != p.row]
            if copies:
                sources, targets = np.zeros((2, self.max_batch), np.int32)
                sources[: len(copies)] = [p.source for p in copies]
                targets[: len(copies)] = [p.row for p in copies]
                length = bucket(max(p.reused for p in copies), self._length_buckets)
                self._cache = self._programs.copy(
                    self._cache, sources, targets, np.int32(len(copies)), length
                )
            groups: dict[tuple[bool, int], list[tuple[Placement, InFlight]]] = {}
            for placement, sequence in placed:
                computed = len(sequence.prompt_ids) - placement.reused
                self._counts.add(len(sequence.prompt_ids), computed)
                if placement.reused:
                    key = (True, bucket(min(computed, EXTEND_CHUNK), self._extend_buckets))
                else:
                    key = (False, bucket(computed, self._length_buckets))
                groups.setdefault(key, []).append((placement, sequence))
            for (extends, length), group in sorted(groups.items()):
                (self._extend_prompts if extends else self._prefill_prompts)(group, length)
        return admitted[len(placements) :]

    def _prefill_prompts(self, group: list[tuple[Placement, InFlight]], length: int) -> None:
        """Runs whole prompts (at most `length` tokens) into their rows from slot 0 and records
        each one's first new token."""
        count = bucket(len(group), self._count_buckets)
        real = [p.row for p, _ in group]
        prompt_ids, prompt_lengths, _, rows = pack_prompts(
            [s.prompt_ids for _, s in group],
            [0] * len(group),
            real,
            (count, length),
            self.max_batch,
        )  # out-of-range rows: dropped
        self._cache, tokens, logprobs = self._programs.prefill(
            self._weights,
            self._cache,
            prompt_ids,
            prompt_lengths,
            rows,
            *self._slots.sampling(real, count),
        )
        self._slots.record(
            real, np.asarray(tokens)[: len(group)], np.asarray(logprobs)[: len(group)]
        )

    def _extend_prompts(self, group: list[tuple[Placement, InFlight]], length: int) -> None:
        """Runs the uncached part of each prompt after its row's cached slots, at most `length`
        tokens per row per call (longer ones continue in the next), and records each prompt's
        first new token once its last token has run."""
        done = 0
        while group:
            suffix_ids, suffix_lengths, starts, rows = pack_prompts(
                [s.prompt_ids for _, s in group],
                [p.reused + done for p, _ in group],
                [p.row for p, _ in group],
                (self.max_batch, length),
                0,
            )
            self._cache, logits = self._programs.extend(
                self._weights,
                self._cache,
                suffix_ids,
                suffix_lengths,
                starts,
                rows,
                np.int32(len(group)),
            )
            ending = [
                i for i, (p, s) in enumerate(group) if len(s.prompt_ids) <= p.reused + done + length
            ]
            if ending:
                sampling = self._slots.sampling([p.row for p, _ in group], self.max_batch)
                tokens, logprobs = self._programs.sample(logits, *sampling)
                self._slots.record(
                    [group[i][0].row for i in ending],
                    np.asarray(tokens)[ending],
                    np.asarray(logprobs)[ending],
                )
            group = [entry for i, entry in enumerate(group) if i not in ending]
            done += length

    def _grow_pages(self) -> None:
        """Pages for every slot the next decode call may fill; requests preempted for want of
        pages go back to the front of the queue, to run again from their prompts."""
        remaining = self._slots.remaining()
        needs = {
            row: self._prefixes.filled(row) + min(DECODE_STEPS, int(remaining[row]))
            for row in self._slots.occupied()
        }
        preempted = [self._slots.preempt(row) for row in self._prefixes.grow(needs)]
        if preempted:
            with self._queue_changed:
                self._queue.extendleft(reversed(preempted))
        self._sync_table()

    def _decode_once(self) -> None:
        """DECODE_STEPS tokens for every occupied slot, recorded step by step until each row's
        request ends (the device stopped feeding it at the same point)."""
        if self.paged:
            self._grow_pages()
        rows = self._slots.occupied()
        if not rows:
            return
        active = np.zeros(self.max_batch, bool)
        active[rows] = True
        self._cache, tokens, logprobs = self._programs.decode(
            self._weights,
            self._cache,
            self._slots.next_tokens,
            active,
            self._slots.remaining(),
            self._slots.stop_ids,
            self._slots.temperature,
            self._slots.top_p,
            self._slots.top_k,
            self._slots.seeds,
            self._slots.positions(),
        )
        tokens, logprobs = np.asarray(tokens), np.asarray(logprobs)
        for step in range(DECODE_STEPS):
            rows = [row for row in rows if self._slots.requests[row] is not None]
            if not rows:
                break
            self._slots.record(rows, tokens[step, rows], logprobs[step, rows])


def _round_up(sizes: list[int], grain: int) -> list[int]:
    """sizes rounded up to multiples of grain, without repeats."""
    return sorted({-(-size // grain) * grain for size in sizes})
