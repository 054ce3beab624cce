"""Which pages of a paged KV cache each row holds, which prompts' pages can be shared, and which
request gives way when the pages run out (JaxSampler with ``paged=True``).

A row's slots live in pages of ``PAGE`` tokens listed in its page table (model/kv_cache.py
``PagedKVCache``). A full page is indexed by the chained hash of its tokens and everything before
them, so a later prompt that begins with the same tokens (the next turn of an episode, another
rollout of the task) takes those pages into its own table, with no copy, and computes only the
rest: vLLM's automatic prefix caching, which also shares full blocks only (a partial last page
is recomputed, at most ``PAGE - 1`` tokens a prompt). The chain is a 128-bit BLAKE2b digest of the
previous page's digest and the page's tokens (vLLM offers sha256 for the same reason: a chain
collision would hand over keys and values computed after another prefix), and a matched page's
tokens are checked as well.

    pages = PageTable(rows=8, pages=512, max_len=4096)
    placements = pages.place([prompt_a, prompt_b], free_rows=[0, 3, 5])
    # Placement(row, row, reused, wave): the row's first `reused` slots are shared pages (some
    # written in this round by a placement of an earlier wave), compute prompt[reused:]
    preempted = pages.grow({row: slots_needed, ...})   # before a decode call; see `grow`
    pages.fed(row, token)     # a decode step wrote `token` after the row's slots
    pages.release(row)        # the request left: its full pages stay cached (LRU) until reused

A page is held by every row whose table names it (a reference count); when none does, a full
page joins the least-recently-used list of cached pages and is evicted only when a page is
needed and no empty one is left (an evicted prefix is recomputed, never wrong).
"""

from __future__ import annotations

import hashlib
import heapq
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.sampling.prefix_cache import Placement


def _chain(previous: bytes, block: np.ndarray) -> bytes:
    return hashlib.blake2b(previous + block.tobytes(), digest_size=16).digest()


class PageTable:
    """Host record of a paged cache's pages and of each row's page table (module docstring).

    Args:
      rows: cache rows (requests served at once).
      pages: pages in the pool (per layer).
      max_len: slots per row at most (a multiple of ``PAGE``).
      enabled: False: no page is shared (every prompt computed whole).
    """

    def __init__(self, rows: int, pages: int, max_len: int, enabled: bool = True):
        if max_len % PAGE:
            raise ValueError(f"max_len={max_len} is not a multiple of the page size {PAGE}")
        if pages < max_len // PAGE:
            raise ValueError(
                f"{pages} pages of {PAGE} tokens cannot hold one sequence of {max_len:,} tokens; "
                f"raise sampler.max_cache_tokens to at least {max_len:,}"
            )
        self.enabled = enabled
        self.pages = pages
        self.table = np.full((rows, max_len // PAGE), pages, np.int32)  # pages: none
        self.version = 0  # bumped whenever `table` changes
        self.preemptions = 0
        self.peak_held = 0  # most pages rows held at once (the pool's high-water mark)
        self._tokens = np.zeros((pages, PAGE), np.int32)
        self._hash: list[bytes | None] = [None] * pages  # chain digest of an indexed full page
        self._refs = np.zeros(pages, np.int64)
        self._index: dict[bytes, int] = {}  # chain digest -> page
        self._cached: OrderedDict[int, None] = OrderedDict()  # unreferenced full pages, LRU first
        # Empty pages; a row takes the page after its last one when that is empty, else the
        # lowest (a heap, stale entries skipped): rows' pages stay in runs, which a CPU gathers
        # about 2x faster than pages scattered over the pool (bench/decode_reads.py).
        self._empty = set(range(pages))
        self._lowest = list(range(pages))
        self._row_pages: list[list[int]] = [[] for _ in range(rows)]
        self._row_chain: list[list[bytes]] = [[] for _ in range(rows)]  # digest per full page
        self._filled = np.zeros(rows, np.int64)
        self._busy = np.zeros(rows, bool)
        self._stale = np.zeros(rows, bool)  # busy rows whose pages came from replaced weights
        self._admitted = np.zeros(rows, np.int64)  # admission order (preempt the youngest)
        self._clock = 0

    def filled(self, row: int) -> int:
        return int(self._filled[row])

    def free_pages(self) -> int:
        """Pages a request could take now: empty ones and unreferenced cached ones."""
        return len(self._empty) + len(self._cached)

    def place(self, prompts: Sequence[Sequence[int]], free_rows: Sequence[int]) -> list[Placement]:
        """Placements for the first prompts that find a free row and their pages, in order (the
        rest wait). A prompt may share full pages that an earlier prompt of this round writes;
        it then runs in the next wave. Pages for one more decode call of every request stay
        free, so running requests are not preempted at once."""
        free = sorted(free_rows, reverse=True)
        written: dict[int, int] = {}  # page written in this round -> its wave
        placements = []
        for prompt in prompts:
            if not free:
                break
            ids = np.asarray(prompt, np.int32)
            shared, chains = self._match(ids)
            needed = -(-len(ids) // PAGE) - len(shared)
            taken_from_cache = sum(1 for page in shared if self._refs[page] == 0)
            reserve = int(self._busy.sum())  # a page for each running request's next call
            if needed + reserve > self.free_pages() - taken_from_cache:
                break
            row = free.pop()
            if self._busy[row]:
                raise RuntimeError(f"row {row} is still busy; release it before placing in it")
            for page in shared:
                self._take(page)
            pages = list(shared)
            for _ in range(needed):
                pages.append(self._allocate(pages[-1] if pages else None))
            wave = max((written[p] + 1 for p in shared if p in written), default=0)
            for page in pages[len(shared) :]:
                written[page] = wave
            self._row_pages[row] = pages
            self._row_chain[row] = chains
            self.table[row] = self.pages
            self.table[row, : len(pages)] = pages
            self.version += 1
            start = len(shared) * PAGE
            tail = np.zeros((len(pages) - len(shared)) * PAGE, np.int32)  # the new pages' slots
            tail[: len(ids) - start] = ids[start:]
            self._tokens[pages[len(shared) :]] = tail.reshape(-1, PAGE)
            self._filled[row] = len(ids)
            self._hash_full_pages(row)
            self._busy[row], self._stale[row] = True, False
            self._clock += 1
            self._admitted[row] = self._clock
            placements.append(Placement(row, row, start, wave))
        return placements

    def grow(self, needs: Mapping[int, int]) -> list[int]:
        """Gives each busy row in ``needs`` (row -> slots it may fill in the next decode call)
        the pages for them. When the pool runs short, the most recently admitted requests are
        preempted (released; the caller restarts them later) until the rest fit; the oldest
        always fits, since the pool holds one full row. Returns the preempted rows."""
        needs = dict(needs)
        preempted = []

        def missing() -> int:
            return sum(
                max(0, -(-min(n, self.table.shape[1] * PAGE) // PAGE) - len(self._row_pages[r]))
                for r, n in needs.items()
            )

        while missing() > self.free_pages():
            youngest = max(needs, key=lambda r: self._admitted[r])
            del needs[youngest]
            self.release(youngest)
            self.preemptions += 1
            preempted.append(youngest)
        for row, slots in needs.items():
            pages = self._row_pages[row]
            while len(pages) * PAGE < min(slots, self.table.shape[1] * PAGE):
                self.table[row, len(pages)] = page = self._allocate(pages[-1] if pages else None)
                pages.append(page)
                self.version += 1
        return preempted

    def fed(self, row: int, token: int) -> None:
        """A decode step wrote `token`'s keys/values into the row's next slot."""
        slot = int(self._filled[row])
        self._tokens[self._row_pages[row][slot // PAGE], slot % PAGE] = token
        self._filled[row] = slot + 1
        if not self._stale[row]:
            self._hash_full_pages(row)

    def release(self, row: int) -> None:
        """The row's request is done: its pages lose a reference; unreferenced full pages stay
        cached (the row's last pages are evicted first), the others are emptied."""
        for page in reversed(self._row_pages[row]):
            self._refs[page] -= 1
            if self._refs[page]:
                continue
            if self._hash[page] is not None and self._index.get(self._hash[page]) == page:
                self._cached[page] = None
            else:
                self._forget(page)
                self._free(page)
        self._row_pages[row], self._row_chain[row] = [], []
        self._filled[row] = 0
        self._busy[row] = self._stale[row] = False
        self.table[row] = self.pages
        self.version += 1

    def invalidate(self) -> None:
        """Forgets every page's contents (new weights, or a failed device step); rows still
        running keep their pages but share nothing more."""
        for page in list(self._cached):
            self._forget(page)
            self._free(page)
        self._cached.clear()
        self._index.clear()
        self._hash = [None] * self.pages
        self._stale[:] = self._busy

    def _match(self, ids: np.ndarray) -> tuple[list[int], list[bytes]]:
        """The indexed full pages holding ids' longest prefix of whole pages (at most
        len(ids) - 1 tokens: the last is computed for its logits), and their chain hashes."""
        pages, chains, chain = [], [], b""
        if not self.enabled:
            return pages, chains
        while (len(pages) + 1) * PAGE <= len(ids) - 1:
            block = ids[len(pages) * PAGE : (len(pages) + 1) * PAGE]
            chain = _chain(chain, block)
            page = self._index.get(chain)
            if page is None or not np.array_equal(self._tokens[page], block):
                break  # not cached, or a hash collision: reuse nothing more
            pages.append(page)
            chains.append(chain)
        return pages, chains

    def _take(self, page: int) -> None:
        if self._refs[page] == 0:
            del self._cached[page]
        self._refs[page] += 1
        self._note_held()

    def _free(self, page: int) -> None:
        self._empty.add(page)
        heapq.heappush(self._lowest, page)

    def _allocate(self, after: int | None) -> int:
        """An empty page (the one after `after` if empty, else the lowest), else the least
        recently used cached one (forgotten); referenced once."""
        if after is not None and after + 1 in self._empty:
            page = after + 1
            self._empty.remove(page)
        elif self._empty:
            page = heapq.heappop(self._lowest)
            while page not in self._empty:  # taken as some row's next page since pushed
                page = heapq.heappop(self._lowest)
            self._empty.remove(page)
        else:
            page, _ = self._cached.popitem(last=False)
            self._forget(page)
        self._refs[page] = 1
        self._note_held()
        return page

    def _note_held(self) -> None:
        self.peak_held = max(self.peak_held, self.pages - self.free_pages())

    def _forget(self, page: int) -> None:
        chain = self._hash[page]
        if chain is not None and self._index.get(chain) == page:
            del self._index[chain]
        self._hash[page] = None

    def _hash_full_pages(self, row: int) -> None:
        if not self.enabled:
            return
        chains, pages = self._row_chain[row], self._row_pages[row]
        while (len(chains) + 1) * PAGE <= self._filled[row]:
            page = pages[len(chains)]
            chain = _chain(chains[-1] if chains else b"", self._tokens[page])
            chains.append(chain)
            if chain not in self._index:
                self._index[chain] = page
                self._hash[page] = chain
