"""JaxSampler's paged cache (block_manager.py): rows hold pages as they grow, so a pool too small
for every request at once preempts the youngest and runs it again, with the tokens and
log-probs of an unconstrained sampler (greedy and seeded), and returns every page when done;
PageTable shares only verified full pages, evicts the least recently used, tail pages first, and
driven at random as the sampler drives it (the red-team's fuzzer, made a test) never hands a row
a slot holding other tokens."""

import asyncio
import dataclasses

import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams, block_manager
from deepswe_jax.sampling.block_manager import PageTable
from deepswe_jax.sampling.prefix_cache import Placement

CONFIG = Qwen3Config(
    vocab_size=101,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    initializer_range=0.5,
)
MAX_LEN = 160  # 10 pages


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(CONFIG, rngs=nnx.Rngs(0))


def requests(params) -> list[GenerateRequest]:
    """Six requests of 20-70 prompt tokens (the first 16-64 shared) and 40-90 new tokens."""
    rng = np.random.default_rng(0)
    shared = tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, 64))
    return [
        GenerateRequest(
            shared[: 16 * (1 + i % 4)] + tuple(int(t) for t in rng.integers(0, 101, 4 + i)),
            params(40 + 10 * i, i),
        )
        for i in range(6)
    ]


def greedy(new_tokens, _):
    return SamplingParams(temperature=0.0, max_new_tokens=new_tokens)


def seeded(new_tokens, i):
    return SamplingParams(temperature=1.0, max_new_tokens=new_tokens, seed=100 + i)


async def concurrently(sampler, reqs):
    return [c for [c] in await asyncio.gather(*(sampler.generate([r]) for r in reqs))]


@pytest.mark.parametrize("attention", ["xla", "pallas"])
@pytest.mark.parametrize("params", [greedy, seeded], ids=["greedy", "seeded"])
def test_a_pool_for_one_sequence_preempts_and_stays_exact(model, params, attention):
    """Six requests at once on a pool of exactly one full-length row (10 pages) and four rows:
    they cannot all grow, so the youngest give way and run again; every completion equals that
    of a dense sampler with room for all six, and all pages come back. Either way of reading the
    pages: the XLA gather, or the Pallas kernel (interpret mode here) for decode steps and for
    prompts continuing shared pages."""
    reqs = requests(params)
    roomy = JaxSampler(model, max_batch=6, max_cache_len=MAX_LEN, prefix_caching=False)
    tight = JaxSampler(
        model, max_batch=4, max_cache_len=MAX_LEN, min_prefill_len=PAGE, paged=True,
        max_cache_tokens=MAX_LEN, paged_attention=attention,
    )  # fmt: skip
    try:
        expected = asyncio.run(concurrently(roomy, reqs))
        got = asyncio.run(concurrently(tight, reqs))
        assert tight.preemptions > 0
        assert [c.token_ids for c in got] == [c.token_ids for c in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        pages = tight._prefixes
        assert pages.free_pages() == tight.cache_pages == MAX_LEN // PAGE
        assert not pages._refs.any() and (pages.table == pages.pages).all()
    finally:
        roomy.close()
        tight.close()


def test_rows_hold_pages_not_whole_rows(model):
    """A budget of two full-length rows: the dense cache gets two rows, the paged one all eight
    (its pool of 20 pages serves eight short requests at once, none preempted)."""
    dense = JaxSampler(model, max_batch=8, max_cache_len=MAX_LEN, max_cache_tokens=2 * MAX_LEN)
    paged = JaxSampler(
        model, max_batch=8, max_cache_len=MAX_LEN, max_cache_tokens=2 * MAX_LEN, paged=True
    )
    try:
        assert dense.max_batch == 2 and paged.max_batch == 8 and paged.cache_pages == 20
        rng = np.random.default_rng(1)
        reqs = [
            GenerateRequest(tuple(int(t) for t in rng.integers(0, 101, 10)), greedy(5, 0))
            for _ in range(8)
        ]
        busy = []
        original = paged._prefixes.grow

        def grow(needs):
            busy.append(len(needs))
            return original(needs)

        paged._prefixes.grow = grow
        got = asyncio.run(concurrently(paged, reqs))
        assert max(busy) == 8 and paged.preemptions == 0
        expected = asyncio.run(concurrently(dense, reqs))
        assert [c.token_ids for c in got] == [c.token_ids for c in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    finally:
        dense.close()
        paged.close()


def test_page_table_shares_verified_full_pages_and_evicts_tail_pages_first(monkeypatch):
    pages = PageTable(rows=3, pages=8, max_len=4 * PAGE)
    a = list(range(40))  # two full pages and a partial one
    # A prompt continuing a in the same round shares the two full pages a writes in wave 0, in
    # wave 1, and recomputes the partial third (vLLM shares whole blocks only).
    placed = pages.place([a, a + [7]], free_rows=[0, 1, 2])
    assert placed == [Placement(0, 0, 0, 0), Placement(1, 1, 2 * PAGE, 1)]
    assert list(pages.table[0, :3]) == [0, 1, 2]
    assert list(pages.table[1, :3]) == [0, 1, 3] and pages._refs[:4].tolist() == [2, 2, 1, 1]
    pages.release(0)
    pages.release(1)
    # Pages 0 and 1 stay cached, a's tail page (1) first in line for eviction; the partial
    # pages 2 and 3 are emptied.
    assert list(pages._cached) == [1, 0] and pages.free_pages() == 8

    small = PageTable(rows=2, pages=4, max_len=4 * PAGE)
    small.place([a[:33]], free_rows=[0])  # pages 0, 1 full, 2 partial
    small.release(0)
    assert list(small._cached) == [1, 0]
    # Three new pages: the two empty ones, then the least recently used cached one, page 1.
    [b_placed] = small.place([list(range(100, 140))], free_rows=[0])
    assert b_placed.reused == 0 and list(small.table[0, :3]) == [2, 3, 1]
    assert list(small._cached) == [0]
    small.release(0)
    # a's first page survived (reused: 16), its second was evicted (recomputed).
    [again] = small.place([a[:33]], free_rows=[1])
    assert again.reused == PAGE and small.table[1, 0] == 0

    # A hash collision is never trusted: every page hashes alike, tokens differ, nothing shared.
    monkeypatch.setattr(block_manager, "_chain", lambda previous, block: b"")
    collide = PageTable(rows=2, pages=8, max_len=4 * PAGE)
    collide.place([list(range(40))], free_rows=[0])
    [other] = collide.place([list(range(50, 90))], free_rows=[1])
    assert other.reused == 0


def test_page_table_preempts_the_youngest_and_admission_waits():
    pages = PageTable(rows=3, pages=6, max_len=4 * PAGE)
    placed = pages.place([list(range(30)), list(range(100, 130))], free_rows=[0, 1, 2])
    assert [p.row for p in placed] == [0, 1]  # 2 pages each
    # A third prompt of 2 pages would leave no page for the two running requests to grow.
    assert pages.place([list(range(200, 230))], free_rows=[2]) == []
    # Both grow to 3 pages (48 slots), then to 4: only one can; the younger (row 1) gives way.
    assert pages.grow({0: 40, 1: 40}) == []
    assert pages.grow({0: 56, 1: 56}) == [1]
    assert pages.preemptions == 1 and pages.free_pages() == 6 - 4
    assert (pages.table[1] == pages.pages).all()


def test_a_failed_device_step_frees_every_placed_row_and_keeps_serving(model):
    """The first prefill fails (as an out-of-memory error would) while a second prompt waits for
    the first's pages in the next wave: both callers get the error, every page comes back, and a
    prompt needing the whole pool is served afterwards (found by red-teaming: the later wave's
    row stayed busy, its pages leaked and that prompt waited forever)."""
    sampler = JaxSampler(
        model, max_batch=2, max_cache_len=96, min_prefill_len=PAGE, paged=True,
        max_cache_tokens=96,
    )  # fmt: skip
    prefill, calls = sampler._programs.prefill, []

    def failing_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("simulated device failure")
        return prefill(*args)

    sampler._programs = dataclasses.replace(sampler._programs, prefill=failing_once)
    rng = np.random.default_rng(2)
    shared = tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, 40))

    async def both():
        return await asyncio.gather(
            sampler.generate([GenerateRequest(shared, greedy(4, 0))]),
            sampler.generate([GenerateRequest(shared + (7,), greedy(4, 0))]),
            return_exceptions=True,
        )

    async def whole_pool():
        prompt = tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, 95))
        return await asyncio.wait_for(
            sampler.generate([GenerateRequest(prompt, greedy(1, 0))]), 300
        )

    try:
        assert [type(r) for r in asyncio.run(both())] == [RuntimeError, RuntimeError]
        assert sampler._prefixes.free_pages() == sampler.cache_pages
        [completion] = asyncio.run(whole_pool())
        assert len(completion.token_ids) == 1
    finally:
        sampler.close()


def test_a_pool_short_of_one_sequence_in_whole_pages_is_refused_before_allocating(model):
    with pytest.raises(ValueError, match="raise sampler.max_cache_tokens to at least 112"):
        JaxSampler(model, max_cache_len=100, max_cache_tokens=100, paged=True)


class Driver:
    """Drives a PageTable as JaxSampler does (place, prefill, grow, decode 8 steps, release),
    recording what the device would hold in each page slot: the row's tokens up to it, and the
    weights' generation (sync_weights bumps it)."""

    def __init__(self, rng, rows: int, pages: int, max_len: int, enabled: bool):
        self.rng, self.table = rng, PageTable(rows, pages, max_len, enabled)
        self.held: dict[tuple[int, int], tuple] = {}  # (page, slot) -> (generation, tokens)
        self.requests: list[dict | None] = [None] * rows
        self.queue: list[dict] = []
        self.generation = 0

    def write(self, row: int, start: int, stop: int) -> None:
        request = self.requests[row]
        for slot in range(start, stop):
            page = self.table._row_pages[row][slot // PAGE]
            self.held[page, slot % PAGE] = (self.generation, tuple(request["ids"][: slot + 1]))

    def check_row(self, row: int) -> None:
        """Every filled slot holds this row's own tokens, computed under the current weights
        unless the row started before they changed."""
        request, pages = self.requests[row], self.table._row_pages[row]
        assert list(self.table.table[row, : len(pages)]) == pages
        for slot in range(self.table.filled(row)):
            generation, tokens = self.held[pages[slot // PAGE], slot % PAGE]
            assert tokens == tuple(request["ids"][: slot + 1])
            assert generation >= request["generation"]

    def admit(self) -> None:
        free = [row for row, r in enumerate(self.requests) if r is None]
        placements = self.table.place([r["prompt"] for r in self.queue], free)
        for placement, request in zip(placements, self.queue, strict=False):
            self.requests[placement.row] = dict(
                request, ids=list(request["prompt"]), made=0, generation=self.generation
            )
        for wave in sorted({p.wave for p in placements}):
            # within a wave the sampler runs prompts grouped by shape, in any order: reversed
            for p in reversed([p for p in placements if p.wave == wave]):
                self.check_row_prefix(p.row, p.reused)  # shared pages were written already
                self.write(p.row, p.reused, len(self.requests[p.row]["ids"]))
                self.sample(p.row)
        self.queue = self.queue[len(placements) :]

    def check_row_prefix(self, row: int, reused: int) -> None:
        request, pages = self.requests[row], self.table._row_pages[row]
        for slot in range(reused):
            generation, tokens = self.held[pages[slot // PAGE], slot % PAGE]
            assert tokens == tuple(request["ids"][: slot + 1]) and generation == self.generation

    def sample(self, row: int) -> None:
        request = self.requests[row]
        request["ids"].append(int(self.rng.integers(0, 3)))
        request["made"] += 1
        if request["made"] >= request["budget"]:
            self.table.release(row)
            self.requests[row] = None

    def decode(self) -> None:
        busy = [row for row, r in enumerate(self.requests) if r is not None]
        needs = {
            row: self.table.filled(row) + min(8, r["budget"] - r["made"])
            for row, r in enumerate(self.requests)
            if r is not None
        }
        for row in self.table.grow(needs):
            request, self.requests[row] = self.requests[row], None
            self.queue.insert(0, dict(prompt=request["prompt"], budget=request["budget"]))
        for _ in range(8):
            for row in busy:
                if self.requests[row] is None:
                    continue
                slot = self.table.filled(row)
                self.write(row, slot, slot + 1)
                self.table.fed(row, self.requests[row]["ids"][-1])
                self.check_row(row)
                self.sample(row)

    def check_pool(self) -> None:
        rows = self.table._row_pages
        holders = [sum(page in pages for pages in rows) for page in range(self.table.pages)]
        assert self.table._refs.tolist() == holders
        held = sum(1 for count in holders if count)
        assert self.table.free_pages() + held == self.table.pages


@pytest.mark.parametrize("seed", range(40))
def test_page_table_driven_like_the_sampler_never_hands_a_row_foreign_tokens(seed):
    """Random rows, pool sizes and prompts over a 3-token alphabet (so pages are shared often),
    with preemptions and new weights: every slot a row reads holds its own tokens computed
    under current weights, reference counts match the tables, and all pages come back."""
    rng = np.random.default_rng(seed)
    max_len = int(rng.choice([32, 48, 64, 96]))
    driver = Driver(
        rng, int(rng.integers(1, 6)), max_len // PAGE + int(rng.integers(0, 4)), max_len,
        enabled=bool(rng.random() < 0.9),
    )  # fmt: skip
    bases = [[int(t) for t in rng.integers(0, 3, max_len)] for _ in range(3)]
    for step in range(2000):  # 60 steps of arrivals, then until drained
        if step < 60:
            for _ in range(int(rng.integers(0, 4))):
                length = int(rng.integers(1, max_len))
                budget = int(rng.integers(1, max_len - length + 1))
                driver.queue.append(
                    dict(prompt=bases[int(rng.integers(0, 3))][:length], budget=budget)
                )
            if rng.random() < 0.05:
                driver.generation += 1
                driver.table.invalidate()
        elif not driver.queue and not any(driver.requests):
            break
        driver.admit()
        driver.decode()
        driver.check_pool()
    assert not driver.queue and not any(driver.requests)
    assert driver.table.free_pages() == driver.table.pages and not driver.table._refs.any()
