"""Which tokens each KV-cache row holds, and where a new prompt should go to reuse them.

JaxSampler keeps a finished request's keys/values in its cache row instead of dropping them, so
a later prompt that begins with the same tokens (the next turn of an agent episode: the whole
conversation so far plus an observation; or another rollout of the same task) computes only
the tokens past the shared prefix. Requests are plain prompts: nothing but the token ids says
what can be reused, as in vLLM's automatic prefix caching.

    cache = RowPrefixCache(rows=8, max_len=4096)
    placements = cache.place([prompt_a, prompt_b], free_rows=[0, 3, 5])
    # Placement(row, source, reused, wave): copy the first `reused` slots of `source` into `row`
    # (nothing to copy when source == row), then compute prompt[reused:] there; a placement of
    # wave w > 0 reads a row that wave w - 1 fills (n rollouts of one prompt: it is computed
    # once in wave 0 and copied into the other rows in wave 1).
    cache.fed(row, token)       # a decode step wrote `token`'s keys/values after the row's slots
    cache.release(row)          # the request left; its slots stay reusable until evicted

Matching is token-exact: rows are indexed by chained hashes of their complete blocks of
`BLOCK` tokens, the longest hash match is checked against the stored tokens (a hash collision
costs reuse, never correctness) and extended token by token into the next block. The last
prompt token is always computed (its logits give the first new token). A free row whose prefix
is not wanted is evicted least recently used first; an evicted prefix is simply recomputed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

# Tokens per hashed block: the grain of the index (reuse itself is token-exact).
BLOCK = 16


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one admitted prompt goes: its first `reused` tokens' keys/values are those of cache
    row `source` (copied into `row` unless source == row); it runs in `wave` (0 first)."""

    row: int
    source: int
    reused: int
    wave: int


@dataclasses.dataclass
class PrefillCounts:
    """Prompt tokens a sampler admitted: all of them, those whose keys/values it computed, and
    those it reused from a cached prefix (computed + reused = prompt)."""

    prompt_tokens: int = 0
    computed_tokens: int = 0
    reused_tokens: int = 0

    def add(self, prompt: int, computed: int) -> None:
        self.prompt_tokens += prompt
        self.computed_tokens += computed
        self.reused_tokens += prompt - computed


def _chain(previous: int, block: np.ndarray) -> int:
    return hash((previous, block.tobytes()))


class RowPrefixCache:
    """Host record of the tokens whose keys/values each cache row holds (module docstring).

    Args:
      rows: cache rows.
      max_len: slots per row.
      enabled: False: nothing is reused (every prompt is computed whole); rows are still
        recorded so the counts stay comparable.
    """

    def __init__(self, rows: int, max_len: int, enabled: bool = True):
        self.enabled = enabled
        self._tokens = np.zeros((rows, max_len), np.int32)  # [rows, slots]
        self._filled = np.zeros(rows, np.int64)  # slots holding keys/values of _tokens[row]
        self._hashes: list[list[int]] = [[] for _ in range(rows)]  # chain hash per full block
        self._index: dict[int, set[int]] = {}  # chain hash -> rows holding that chain
        self._busy = np.zeros(rows, bool)
        self._stale = np.zeros(rows, bool)  # busy rows whose slots came from replaced weights
        self._last_used = np.zeros(rows, np.int64)
        self._clock = 0

    def filled(self, row: int) -> int:
        return int(self._filled[row])

    def place(self, prompts: Sequence[Sequence[int]], free_rows: Sequence[int]) -> list[Placement]:
        """Placements for the first prompts that find a free row, in order (the rest wait).

        A row that is a copy source in this round is never a target in it, and a prompt placed
        in this round is recorded at once, so later prompts may start from it (a later wave).
        """
        free = set(free_rows)
        protected: set[int] = set()
        wave_of: dict[int, int] = {}
        placements = []
        for prompt in prompts:
            ids = np.asarray(prompt, np.int32)
            source, reused = self._match(ids, free - protected - wave_of.keys(), wave_of)
            if source in free and source not in protected and source not in wave_of:
                row = source
            else:
                row = self._evictable(free - protected - wave_of.keys())
                if row is None:
                    break
                if reused:
                    protected.add(source)
            wave = wave_of[source] + 1 if reused and source in wave_of else 0
            self._write(row, source, reused, ids)
            self._busy[row] = True
            wave_of[row] = wave
            placements.append(Placement(row, source if reused else row, reused, wave))
        return placements

    def fed(self, row: int, token: int) -> None:
        """A decode step wrote `token`'s keys/values into the row's next slot."""
        if self._stale[row]:
            return
        slot = self._filled[row]
        self._tokens[row, slot] = token
        self._filled[row] = slot + 1
        self._hash_blocks(row)

    def release(self, row: int) -> None:
        """The row's request is done; its slots stay reusable (least recently used go first)."""
        self._busy[row] = False
        self._stale[row] = False
        self._clock += 1
        self._last_used[row] = self._clock

    def invalidate(self) -> None:
        """Forgets every row's contents (new weights, or a failed device step)."""
        self._filled[:] = 0
        self._hashes = [[] for _ in self._hashes]
        self._index.clear()
        self._stale[:] = self._busy

    def _match(self, ids: np.ndarray, prefer: set[int], wave_of: dict[int, int]) -> tuple[int, int]:
        """(row, tokens) of the longest cached prefix of ids, at most len(ids) - 1 tokens; among
        equals a row in `prefer` (free: reused in place), then one filled before this round or
        in its earliest wave (so n copies of one prompt take two waves, not n)."""
        limit = len(ids) - 1
        if not self.enabled or limit < BLOCK:
            return -1, 0
        candidates: set[int] = set()
        blocks, chain = 0, 0
        while (blocks + 1) * BLOCK <= limit:
            chain = _chain(chain, ids[blocks * BLOCK : (blocks + 1) * BLOCK])
            rows = self._index.get(chain)
            if not rows:
                break
            candidates, blocks = rows, blocks + 1
        best, best_key = -1, (0, False, 0)
        for row in candidates:
            start = blocks * BLOCK
            if not np.array_equal(self._tokens[row, :start], ids[:start]):
                continue  # a hash collision: reuse nothing from this row
            end = min(limit, int(self._filled[row]))
            same = self._tokens[row, start:end] == ids[start:end]
            length = start + (int(same.argmin()) if not same.all() else len(same))
            key = (length, row in prefer, -wave_of.get(row, -1))
            if key > best_key:
                best, best_key = row, key
        return best, best_key[0]

    def _evictable(self, candidates: set[int]) -> int | None:
        """The empty or least recently used row among candidates (None when there is none)."""
        if not candidates:
            return None
        return min(candidates, key=lambda row: (self._filled[row] > 0, self._last_used[row]))

    def _write(self, row: int, source: int, reused: int, ids: np.ndarray) -> None:
        """Records that `row` will hold ids: its first `reused` slots from `source`."""
        if source == row:
            self._truncate(row, reused)
        else:
            self._truncate(row, 0)
            self._tokens[row, :reused] = self._tokens[source, :reused]
            self._filled[row] = reused
            for chain in self._hashes[source][: reused // BLOCK]:
                self._hashes[row].append(chain)
                self._index.setdefault(chain, set()).add(row)
        self._tokens[row, reused : len(ids)] = ids[reused:]
        self._filled[row] = len(ids)
        self._stale[row] = False
        self._hash_blocks(row)

    def _truncate(self, row: int, length: int) -> None:
        self._filled[row] = min(self._filled[row], length)
        hashes = self._hashes[row]
        while len(hashes) * BLOCK > self._filled[row]:
            chain = hashes.pop()
            holders = self._index[chain]
            holders.discard(row)
            if not holders:
                del self._index[chain]

    def _hash_blocks(self, row: int) -> None:
        if not self.enabled:
            return
        hashes = self._hashes[row]
        while (len(hashes) + 1) * BLOCK <= self._filled[row]:
            start = len(hashes) * BLOCK
            chain = _chain(hashes[-1] if hashes else 0, self._tokens[row, start : start + BLOCK])
            hashes.append(chain)
            self._index.setdefault(chain, set()).add(row)
